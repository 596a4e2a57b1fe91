#include "collective_check.h"

#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <numeric>
#include <tuple>

#include "distml/comm/half.h"
#include "distml/core/error.h"

namespace distml::test {
namespace {

using comm::AllreduceOptions;
using comm::Buffer;
using comm::ConstBuffer;

std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

double raw_value(std::uint64_t seed, int rank, std::size_t index, DType dtype, ReduceOp op,
                 Values values) {
  std::uint64_t h = mix(seed * 0x9e3779b97f4a7c15ULL + mix(rank * 1000003ULL + index));
  bool is_float =
      dtype == DType::f32 || dtype == DType::f64 || dtype == DType::f16 || dtype == DType::bf16;
  if (values == Values::random && is_float) return (h % 2000001) / 1e6 - 1.0;
  if (op == ReduceOp::prod) {
    if (dtype == DType::u8) return 1 + h % 2;
    if (is_float) {
      static const double choices[] = {-1.0, 1.0, 0.5, 2.0};
      return choices[h % 4];
    }
    static const double choices[] = {-1.0, 1.0, 2.0};
    return choices[h % 3];
  }
  if (is_float) return static_cast<double>(static_cast<int>(h % 17) - 8) * 0.25;
  if (dtype == DType::u8) return static_cast<double>(h % 32);
  return static_cast<double>(static_cast<std::int64_t>(h % 2001) - 1000);
}

void store(void* p, std::size_t i, DType t, double v);
double load(const void* p, std::size_t i, DType t);

// The input value of `rank` at `index`, rounded to what the dtype can hold.
double value(std::uint64_t seed, int rank, std::size_t index, DType dtype, ReduceOp op,
             Values values) {
  std::byte one[8];
  store(one, 0, dtype, raw_value(seed, rank, index, dtype, op, values));
  return load(one, 0, dtype);
}

// Stores and loads doubles in any dtype.
void store(void* p, std::size_t i, DType t, double v) {
  switch (t) {
    case DType::f32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::f64: static_cast<double*>(p)[i] = v; break;
    case DType::f16:
      static_cast<std::uint16_t*>(p)[i] = comm::f32_to_f16(static_cast<float>(v));
      break;
    case DType::bf16:
      static_cast<std::uint16_t*>(p)[i] = comm::f32_to_bf16(static_cast<float>(v));
      break;
    case DType::i32: static_cast<std::int32_t*>(p)[i] = static_cast<std::int32_t>(v); break;
    case DType::i64: static_cast<std::int64_t*>(p)[i] = static_cast<std::int64_t>(v); break;
    case DType::u8: static_cast<std::uint8_t*>(p)[i] = static_cast<std::uint8_t>(v); break;
  }
}

double load(const void* p, std::size_t i, DType t) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::f64: return static_cast<const double*>(p)[i];
    case DType::f16: return comm::f16_to_f32(static_cast<const std::uint16_t*>(p)[i]);
    case DType::bf16: return comm::bf16_to_f32(static_cast<const std::uint16_t*>(p)[i]);
    case DType::i32: return static_cast<const std::int32_t*>(p)[i];
    case DType::i64: return static_cast<double>(static_cast<const std::int64_t*>(p)[i]);
    case DType::u8: return static_cast<const std::uint8_t*>(p)[i];
  }
  return 0;
}

bool is_float(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}

double epsilon(DType t) {
  switch (t) {
    case DType::f32: return std::ldexp(1.0, -24);
    case DType::f64: return std::ldexp(1.0, -53);
    case DType::f16: return std::ldexp(1.0, -11);
    case DType::bf16: return std::ldexp(1.0, -8);
    default: return 0;
  }
}

// The serial reduction of all ranks' values at `index`, in the dtype's own arithmetic for
// integers (u8 wraps) and exactly (in double) for floats.
double reference(std::uint64_t seed, int world, std::size_t index, DType t, ReduceOp op,
                 Values values, double* abs_sum) {
  double acc = value(seed, 0, index, t, op, values);
  *abs_sum = std::abs(acc);
  for (int r = 1; r < world; ++r) {
    double v = value(seed, r, index, t, op, values);
    *abs_sum += std::abs(v);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: acc += v; break;
      case ReduceOp::prod: acc *= v; break;
      case ReduceOp::min: acc = std::min(acc, v); break;
      case ReduceOp::max: acc = std::max(acc, v); break;
    }
    if (t == DType::u8) acc = static_cast<double>(static_cast<std::uint8_t>(static_cast<int>(acc)));
  }
  if (op == ReduceOp::avg) {
    if (is_float(t)) return acc / world;
    return static_cast<double>(static_cast<std::int64_t>(acc) / world);
  }
  return acc;
}

// The reference result of every element of an all-reduce, and the sum of the absolute inputs
// behind it (for the float tolerance).
struct Expected {
  std::vector<double> want, abs_sum;
};

// The reference for these arguments, computed once per process: each algorithm and in-place
// variant checks against the same, and on the in-process engine so does every rank. Building it
// costs world x count input values, which would otherwise dominate the suite's time.
std::shared_ptr<const Expected> expected(std::uint64_t seed, int world, std::size_t count, DType t,
                                         ReduceOp op, Values values) {
  using Key = std::tuple<std::uint64_t, int, std::size_t, DType, ReduceOp, Values>;
  static std::mutex mutex;
  static std::deque<std::pair<Key, std::shared_ptr<const Expected>>> recent;
  const Key key{seed, world, count, t, op, values};
  std::lock_guard lock(mutex);
  for (const auto& [k, e] : recent)
    if (k == key) return e;
  auto e = std::make_shared<Expected>();
  e->want.resize(count);
  e->abs_sum.resize(count);
  for (std::size_t i = 0; i < count; ++i)
    e->want[i] = reference(seed, world, i, t, op, values, &e->abs_sum[i]);
  recent.emplace_back(key, e);
  if (recent.size() > 4) recent.pop_front();  // the ranks run the checks in step
  return e;
}

std::size_t esize(DType t) { return comm::dtype_size(t); }

std::string where(const char* what, std::size_t count, DType t, int rank) {
  return cat(what, " count=", count, " dtype=", comm::dtype_name(t), " on rank ", rank);
}

}  // namespace

double float_tolerance(DType dtype, int world, double abs_sum) {
  return (world + 1) * epsilon(dtype) * abs_sum;
}

CheckResult check_allreduce(Communicator& comm, std::size_t count, DType t, ReduceOp op,
                            Algorithm algo, bool in_place, Values values, std::uint64_t seed) {
  const int r = comm.rank(), p = comm.size();
  std::vector<std::byte> in(count * esize(t) + 1), out(count * esize(t) + 1);
  for (std::size_t i = 0; i < count; ++i) store(in.data(), i, t, value(seed, r, i, t, op, values));
  AllreduceOptions o{op, algo, 4096};  // small chunks: exercise the ring pipeline
  if (in_place)
    comm.allreduce(Buffer{in.data(), count, t}, o);
  else
    comm.allreduce(ConstBuffer{in.data(), count, t}, Buffer{out.data(), count, t}, o);
  const void* got = in_place ? in.data() : out.data();
  const auto reduced = expected(seed, p, count, t, op, values);
  for (std::size_t i = 0; i < count; ++i) {
    const double want = reduced->want[i], abs_sum = reduced->abs_sum[i];
    double g = load(got, i, t);
    double tol = 0;
    if (is_float(t)) {
      // Exact inputs still round once when avg divides; random ones follow the bound.
      tol = values == Values::random ? float_tolerance(t, p, abs_sum) : 0;
      if (op == ReduceOp::avg) tol += epsilon(t) * std::abs(want) * 2;
    }
    if (!(std::abs(g - want) <= tol))
      return {false,
              cat(where("allreduce", count, t, r), " op=", comm::reduce_op_name(op),
                  " algo=", comm::algorithm_name(algo), in_place ? " in-place" : "", ": element ",
                  i, " is ", g, ", expected ", want, " (tolerance ", tol, ")")};
  }
  return {};
}

CheckResult check_broadcast(Communicator& comm, std::size_t count, DType t, int root,
                            Algorithm algo) {
  const int r = comm.rank();
  std::vector<std::byte> buf(count * esize(t) + 1);
  for (std::size_t i = 0; i < count; ++i)
    store(buf.data(), i, t, value(7, r, i, t, ReduceOp::sum, Values::exact));
  comm.broadcast(Buffer{buf.data(), count, t}, root, algo);
  for (std::size_t i = 0; i < count; ++i) {
    double want = value(7, root, i, t, ReduceOp::sum, Values::exact);
    if (load(buf.data(), i, t) != want)
      return {false, cat(where("broadcast", count, t, r), " root=", root, ": element ", i, " is ",
                         load(buf.data(), i, t), ", expected ", want)};
  }
  return {};
}

namespace {
CheckResult check_gathered(const char* what, const std::vector<std::byte>& out,
                           const std::vector<std::size_t>& counts, DType t, int rank) {
  std::size_t pos = 0;
  for (std::size_t q = 0; q < counts.size(); ++q)
    for (std::size_t i = 0; i < counts[q]; ++i, ++pos) {
      double want = value(11, static_cast<int>(q), i, t, ReduceOp::sum, Values::exact);
      if (load(out.data(), pos, t) != want)
        return {false, cat(what, " dtype=", comm::dtype_name(t), " on rank ", rank, ": block ", q,
                           " element ", i, " is ", load(out.data(), pos, t), ", expected ", want)};
    }
  return {};
}
}  // namespace

CheckResult check_allgather(Communicator& comm, std::size_t count, DType t, Algorithm algo,
                            bool in_place) {
  const int r = comm.rank(), p = comm.size();
  std::vector<std::byte> in(count * esize(t) + 1), out(p * count * esize(t) + 1);
  std::byte* src = in_place ? out.data() + r * count * esize(t) : in.data();
  for (std::size_t i = 0; i < count; ++i)
    store(src, i, t, value(11, r, i, t, ReduceOp::sum, Values::exact));
  comm.allgather(ConstBuffer{src, count, t}, Buffer{out.data(), p * count, t}, algo);
  return check_gathered(in_place ? "allgather in-place" : "allgather", out,
                        std::vector<std::size_t>(p, count), t, r);
}

CheckResult check_allgatherv(Communicator& comm, std::size_t count, DType t, Algorithm algo) {
  const int r = comm.rank(), p = comm.size();
  std::vector<std::size_t> counts(p);
  for (int q = 0; q < p; ++q) counts[q] = (count * (q + 1)) / p;  // rank 0 may send nothing
  std::size_t total = std::accumulate(counts.begin(), counts.end(), 0ul);
  std::vector<std::byte> in(counts[r] * esize(t) + 1), out(total * esize(t) + 1);
  for (std::size_t i = 0; i < counts[r]; ++i)
    store(in.data(), i, t, value(11, r, i, t, ReduceOp::sum, Values::exact));
  comm.allgatherv(ConstBuffer{in.data(), counts[r], t}, Buffer{out.data(), total, t}, counts, algo);
  return check_gathered("allgatherv", out, counts, t, r);
}

CheckResult check_reduce_scatter(Communicator& comm, std::size_t count, DType t, ReduceOp op,
                                 Algorithm algo) {
  const int r = comm.rank(), p = comm.size();
  std::vector<std::byte> in(p * count * esize(t) + 1), out(count * esize(t) + 1);
  for (std::size_t i = 0; i < p * count; ++i)
    store(in.data(), i, t, value(13, r, i, t, op, Values::exact));
  comm.reduce_scatter(ConstBuffer{in.data(), p * count, t}, Buffer{out.data(), count, t}, op, algo);
  const auto reduced = expected(13, p, p * count, t, op, Values::exact);
  for (std::size_t i = 0; i < count; ++i) {
    const double want = reduced->want[r * count + i];
    double tol = is_float(t) && op == ReduceOp::avg ? 2 * epsilon(t) * std::abs(want) : 0;
    if (!(std::abs(load(out.data(), i, t) - want) <= tol))
      return {false, cat(where("reduce_scatter", count, t, r), " op=", comm::reduce_op_name(op),
                         " algo=", comm::algorithm_name(algo), ": element ", i, " is ",
                         load(out.data(), i, t), ", expected ", want)};
  }
  return {};
}

CheckResult check_alltoall(Communicator& comm, std::size_t count, DType t, Algorithm algo,
                           bool in_place) {
  const int r = comm.rank(), p = comm.size();
  // Block j of rank q's input holds value(17, q, j * count + i).
  std::vector<std::byte> in(p * count * esize(t) + 1), out(p * count * esize(t) + 1);
  for (std::size_t i = 0; i < p * count; ++i)
    store(in.data(), i, t, value(17, r, i, t, ReduceOp::sum, Values::exact));
  std::byte* dst = in_place ? in.data() : out.data();
  comm.alltoall(ConstBuffer{in.data(), p * count, t}, Buffer{dst, p * count, t}, algo);
  for (int q = 0; q < p; ++q)
    for (std::size_t i = 0; i < count; ++i) {
      double want = value(17, q, r * count + i, t, ReduceOp::sum, Values::exact);
      double got = load(dst, q * count + i, t);
      if (got != want)
        return {false, cat(where("alltoall", count, t, r), " algo=", comm::algorithm_name(algo),
                           in_place ? " in-place" : "", ": block ", q, " element ", i, " is ", got,
                           ", expected ", want)};
    }
  return {};
}

std::vector<std::size_t> standard_counts() { return {0, 1, 7, 1000, 65537, 1u << 20}; }

std::vector<std::string> run_collective_grid(Communicator& comm,
                                             const std::vector<Algorithm>& allreduce_algos,
                                             const std::vector<std::size_t>& counts) {
  std::vector<std::string> failures;
  auto note = [&](const CheckResult& c) {
    if (!c.ok) failures.push_back(c.detail);
  };
  const ReduceOp ops[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::min, ReduceOp::max,
                          ReduceOp::prod};
  for (std::size_t count : counts) {
    // The largest count runs on two dtypes only, to keep the suite fast; all dtypes and
    // ops run at every smaller count.
    const bool large = count >= (1u << 20);
    for (DType t : comm::kAllDTypes) {
      if (large && t != DType::f32 && t != DType::i64) continue;
      for (ReduceOp op : ops) {
        if (large && op != ReduceOp::sum && op != ReduceOp::max) continue;
        for (Algorithm a : allreduce_algos) {
          note(check_allreduce(comm, count, t, op, a, /*in_place=*/true));
          if (!large) note(check_allreduce(comm, count, t, op, a, /*in_place=*/false));
        }
      }
      if (is_float(t) && !large)
        for (Algorithm a : allreduce_algos)
          note(check_allreduce(comm, count, t, ReduceOp::sum, a, true, Values::random, 5));
      if (large) continue;
      std::size_t per_rank = std::max<std::size_t>(count / comm.size(), count ? 1 : 0);
      for (Algorithm a : {Algorithm::native, Algorithm::tree})
        note(check_broadcast(comm, count, t, comm.size() - 1, a));
      for (Algorithm a : {Algorithm::native, Algorithm::ring}) {
        note(check_allgather(comm, per_rank, t, a, false));
        note(check_allgather(comm, per_rank, t, a, true));
        note(check_allgatherv(comm, count, t, a));
        note(check_reduce_scatter(comm, per_rank, t, ReduceOp::sum, a));
        note(check_reduce_scatter(comm, per_rank, t, ReduceOp::max, a));
      }
      for (Algorithm a : {Algorithm::native, Algorithm::pairwise}) {
        note(check_alltoall(comm, per_rank, t, a, false));
        note(check_alltoall(comm, per_rank, t, a, true));
      }
    }
  }
  return failures;
}

}  // namespace distml::test
