// Conversions between f32 and the two 16-bit float formats, round to nearest even.
#pragma once

#include <cstdint>
#include <cstring>

namespace distml::comm {

inline float f16_to_f32(std::uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return static_cast<float>(h);
}

inline std::uint16_t f32_to_f16(float f) {
  auto h = static_cast<_Float16>(f);
  std::uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

inline float bf16_to_f32(std::uint16_t bits) {
  std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline std::uint16_t f32_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu))  // NaN stays a quiet NaN
    return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

}  // namespace distml::comm
