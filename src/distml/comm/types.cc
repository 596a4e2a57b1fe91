#include "distml/comm/types.h"

#include <array>

#include "distml/core/error.h"

namespace distml::comm {
namespace {

template <class Enum, std::size_t N>
Enum parse_name(std::string_view name, const std::array<std::string_view, N>& names,
                std::string_view what) {
  for (std::size_t i = 0; i < N; ++i)
    if (names[i] == name) return static_cast<Enum>(i);
  std::string valid;
  for (auto n : names) valid += cat(valid.empty() ? "" : ", ", n);
  throw UsageError(cat("unknown ", what, " '", name, "' (valid: ", valid, ")"));
}

constexpr std::array<std::string_view, 7> kDTypeNames = {"f32", "f64", "f16", "bf16",
                                                         "i32", "i64", "u8"};
constexpr std::array<std::size_t, 7> kDTypeSizes = {4, 8, 2, 2, 4, 8, 1};
constexpr std::array<std::string_view, 5> kOpNames = {"sum", "avg", "min", "max", "prod"};
constexpr std::array<std::string_view, 8> kAlgoNames = {"native",   "ring",         "hd",  "tree",
                                                        "pairwise", "hierarchical", "shm", "auto"};

}  // namespace

std::size_t dtype_size(DType t) { return kDTypeSizes[static_cast<std::size_t>(t)]; }
std::string_view dtype_name(DType t) { return kDTypeNames[static_cast<std::size_t>(t)]; }
DType parse_dtype(std::string_view name) { return parse_name<DType>(name, kDTypeNames, "dtype"); }

std::string_view reduce_op_name(ReduceOp op) { return kOpNames[static_cast<std::size_t>(op)]; }
ReduceOp parse_reduce_op(std::string_view name) {
  return parse_name<ReduceOp>(name, kOpNames, "reduce op");
}

std::string_view algorithm_name(Algorithm a) { return kAlgoNames[static_cast<std::size_t>(a)]; }
Algorithm parse_algorithm(std::string_view name) {
  return parse_name<Algorithm>(name, kAlgoNames, "algorithm");
}

}  // namespace distml::comm
