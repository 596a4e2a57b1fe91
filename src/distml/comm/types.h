// Element types, reduction operators and buffer views that the communication layer moves.
// No torch here: buffers are (pointer, count, dtype), so comm/ compiles fast and alone.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace distml::comm {

enum class DType : std::uint8_t { f32, f64, f16, bf16, i32, i64, u8 };
inline constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                       DType::i32, DType::i64, DType::u8};

/// Bytes per element.
std::size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
/// Parses "f32", "f64", "f16", "bf16", "i32", "i64", "u8"; throws UsageError listing them.
DType parse_dtype(std::string_view name);

/// Reductions. f16 and bf16 are computed in f32 and rounded once per step; `avg` sums and
/// then divides by the world size (integer division for integer types).
enum class ReduceOp : std::uint8_t { sum, avg, min, max, prod };
std::string_view reduce_op_name(ReduceOp op);
ReduceOp parse_reduce_op(std::string_view name);

/// A mutable view of `count` elements of `dtype` at `data`. Does not own the memory.
struct Buffer {
  void* data = nullptr;
  std::size_t count = 0;
  DType dtype = DType::f32;
  std::size_t bytes() const { return count * dtype_size(dtype); }
};

/// A read-only view; converts from Buffer.
struct ConstBuffer {
  const void* data = nullptr;
  std::size_t count = 0;
  DType dtype = DType::f32;
  ConstBuffer() = default;
  ConstBuffer(const void* d, std::size_t n, DType t) : data(d), count(n), dtype(t) {}
  ConstBuffer(Buffer b) : data(b.data), count(b.count), dtype(b.dtype) {}  // NOLINT
  std::size_t bytes() const { return count * dtype_size(dtype); }
};

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<std::int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<std::int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<std::uint8_t>() {
  return DType::u8;
}

/// Views over contiguous containers of a C++ element type: `view(vec)`.
template <class C>
Buffer view(C& c) {
  return {c.data(), c.size(), dtype_of<typename C::value_type>()};
}
template <class C>
ConstBuffer cview(const C& c) {
  return {c.data(), c.size(), dtype_of<typename C::value_type>()};
}

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

/// The point in time by which a blocking operation must have finished.
struct Deadline {
  Clock::time_point at;
  static Deadline after(Millis timeout) { return {Clock::now() + timeout}; }
  bool passed() const { return Clock::now() >= at; }
};

/// How an all-reduce is carried out. All but `native` are written over point-to-point.
enum class Algorithm : std::uint8_t {
  native,
  ring,
  halving_doubling,
  tree,
  pairwise,
  hierarchical,
  shm,
  automatic
};
std::string_view algorithm_name(Algorithm a);
/// Parses "native", "ring", "hd", "tree", "pairwise", "hierarchical", "shm", "auto"; throws
/// UsageError listing them.
Algorithm parse_algorithm(std::string_view name);

}  // namespace distml::comm
