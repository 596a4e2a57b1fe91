#include "distml/comm/reduce.h"

#include <algorithm>
#include <cstdint>

#include "distml/comm/half.h"
#include "distml/core/error.h"

namespace distml::comm {
namespace {

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

template <class T>
void divide_native(T* data, std::size_t n, int divisor) {
  for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<T>(data[i] / static_cast<T>(divisor));
}

template <float (*ToF32)(std::uint16_t), std::uint16_t (*FromF32)(float)>
void divide_half(std::uint16_t* data, std::size_t n, int divisor) {
  for (std::size_t i = 0; i < n; ++i)
    data[i] = FromF32(ToF32(data[i]) / static_cast<float>(divisor));
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
      return pair_half<f16_to_f32, f32_to_f16>(static_cast<std::uint16_t*>(out),
                                               static_cast<const std::uint16_t*>(a),
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
    case DType::f16:
      return divide_half<f16_to_f32, f32_to_f16>(static_cast<std::uint16_t*>(data), count, divisor);
    case DType::bf16:
      return divide_half<bf16_to_f32, f32_to_bf16>(static_cast<std::uint16_t*>(data), count,
                                                   divisor);
  }
}

}  // namespace distml::comm
