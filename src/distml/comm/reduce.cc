#include "distml/comm/reduce.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include "distml/comm/half.h"
#include "distml/core/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace distml::comm {
namespace {

// fp16 <-> f32 for a block of values. A baseline x86-64 build converts each _Float16 in a
// library call (about 2 ns); where the CPU has F16C (every x86-64 CPU since 2013) eight values go
// per instruction. Both are exact from f16 and round to nearest even to f16, so the results are
// the same bits either way.
#if defined(__x86_64__)
__attribute__((target("avx,f16c"))) void widen_f16c(const std::uint16_t* in, float* out,
                                                    std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  for (; i < n; ++i) out[i] = f16_to_f32(in[i]);
}

__attribute__((target("avx,f16c"))) void narrow_f16c(const float* in, std::uint16_t* out,
                                                     std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) out[i] = f32_to_f16(in[i]);
}

const bool kHasF16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
#endif

void widen(const std::uint16_t* in, float* out, std::size_t n) {
#if defined(__x86_64__)
  if (kHasF16c) return widen_f16c(in, out, n);
#endif
  for (std::size_t i = 0; i < n; ++i) out[i] = f16_to_f32(in[i]);
}

void narrow(const float* in, std::uint16_t* out, std::size_t n) {
#if defined(__x86_64__)
  if (kHasF16c) return narrow_f16c(in, out, n);
#endif
  for (std::size_t i = 0; i < n; ++i) out[i] = f32_to_f16(in[i]);
}

template <class T>
T combine(T a, T b, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return static_cast<T>(a + b);
    case ReduceOp::prod: return static_cast<T>(a * b);
    case ReduceOp::min: return std::min(a, b);
    case ReduceOp::max: return std::max(a, b);
  }
  return a;
}

// One loop per op so that the compiler vectorises the common sum case.
template <class T>
void pair_native(T* out, const T* a, const T* b, std::size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T>(a[i] + b[i]);
      return;
    case ReduceOp::prod:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T>(a[i] * b[i]);
      return;
    case ReduceOp::min:
      for (std::size_t i = 0; i < n; ++i) out[i] = std::min(a[i], b[i]);
      return;
    case ReduceOp::max:
      for (std::size_t i = 0; i < n; ++i) out[i] = std::max(a[i], b[i]);
      return;
  }
}

template <float (*ToF32)(std::uint16_t), std::uint16_t (*FromF32)(float)>
void pair_half(std::uint16_t* out, const std::uint16_t* a, const std::uint16_t* b, std::size_t n,
               ReduceOp op) {
  for (std::size_t i = 0; i < n; ++i) out[i] = FromF32(combine(ToF32(a[i]), ToF32(b[i]), op));
}

// fp16 in blocks through f32: widened, combined, narrowed; each value rounded once, as above.
void pair_f16(std::uint16_t* out, const std::uint16_t* a, const std::uint16_t* b, std::size_t n,
              ReduceOp op) {
  constexpr std::size_t kBlock = 1024;
  std::array<float, kBlock> x, y;
  for (std::size_t i = 0; i < n; i += kBlock) {
    const std::size_t m = std::min(kBlock, n - i);
    widen(a + i, x.data(), m);
    widen(b + i, y.data(), m);
    pair_native(x.data(), x.data(), y.data(), m, op);
    narrow(x.data(), out + i, m);
  }
}

template <class T>
void divide_native(T* data, std::size_t n, int divisor) {
  for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<T>(data[i] / static_cast<T>(divisor));
}

template <float (*ToF32)(std::uint16_t), std::uint16_t (*FromF32)(float)>
void divide_half(std::uint16_t* data, std::size_t n, int divisor) {
  for (std::size_t i = 0; i < n; ++i)
    data[i] = FromF32(ToF32(data[i]) / static_cast<float>(divisor));
}

void divide_f16(std::uint16_t* data, std::size_t n, int divisor) {
  constexpr std::size_t kBlock = 1024;
  std::array<float, kBlock> x;
  for (std::size_t i = 0; i < n; i += kBlock) {
    const std::size_t m = std::min(kBlock, n - i);
    widen(data + i, x.data(), m);
    divide_native(x.data(), m, divisor);
    narrow(x.data(), data + i, m);
  }
}

}  // namespace

void reduce_pair(void* out, const void* a, const void* b, std::size_t count, DType dtype,
                 ReduceOp op) {
  switch (dtype) {
    case DType::f32:
      return pair_native(static_cast<float*>(out), static_cast<const float*>(a),
                         static_cast<const float*>(b), count, op);
    case DType::f64:
      return pair_native(static_cast<double*>(out), static_cast<const double*>(a),
                         static_cast<const double*>(b), count, op);
    case DType::i32:
      return pair_native(static_cast<std::int32_t*>(out), static_cast<const std::int32_t*>(a),
                         static_cast<const std::int32_t*>(b), count, op);
    case DType::i64:
      return pair_native(static_cast<std::int64_t*>(out), static_cast<const std::int64_t*>(a),
                         static_cast<const std::int64_t*>(b), count, op);
    case DType::u8:
      return pair_native(static_cast<std::uint8_t*>(out), static_cast<const std::uint8_t*>(a),
                         static_cast<const std::uint8_t*>(b), count, op);
    case DType::f16:
      return pair_f16(static_cast<std::uint16_t*>(out), static_cast<const std::uint16_t*>(a),
                      static_cast<const std::uint16_t*>(b), count, op);
    case DType::bf16:
      return pair_half<bf16_to_f32, f32_to_bf16>(static_cast<std::uint16_t*>(out),
                                                 static_cast<const std::uint16_t*>(a),
                                                 static_cast<const std::uint16_t*>(b), count, op);
  }
}

void reduce_into(void* acc, const void* in, std::size_t count, DType dtype, ReduceOp op) {
  reduce_pair(acc, acc, in, count, dtype, op);
}

void divide_by(void* data, std::size_t count, DType dtype, int divisor) {
  DML_CHECK(divisor > 0, "divisor must be positive");
  switch (dtype) {
    case DType::f32: return divide_native(static_cast<float*>(data), count, divisor);
    case DType::f64: return divide_native(static_cast<double*>(data), count, divisor);
    case DType::i32: return divide_native(static_cast<std::int32_t*>(data), count, divisor);
    case DType::i64: return divide_native(static_cast<std::int64_t*>(data), count, divisor);
    case DType::u8: return divide_native(static_cast<std::uint8_t*>(data), count, divisor);
    case DType::f16: return divide_f16(static_cast<std::uint16_t*>(data), count, divisor);
    case DType::bf16:
      return divide_half<bf16_to_f32, f32_to_bf16>(static_cast<std::uint16_t*>(data), count,
                                                   divisor);
  }
}

}  // namespace distml::comm
