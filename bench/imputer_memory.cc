// Per-rank memory of the median imputer (fit_imputer "median": a radix selection on all-reduced
// counts) against the gather it replaced (every rank all-gathers each feature's present values
// and takes the middle ones), on the same synthetic shard: ROWS rows x FEATURES features per
// rank, 10% missing. Memory is the OS's: the peak resident set (VmHWM) above the resident set
// before the call, with the peak reset in between (/proc/self/clear_refs). Run under mpirun;
// prints one JSON line per rank. A measurement, not a test.
//
// Usage: mpirun -np P distml_imputer_memory ROWS FEATURES
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "distml/comm/engines.h"
#include "distml/data/permutation.h"
#include "distml/ml/imputer.h"

namespace {

using distml::ml::LocalData;

// A field of /proc/self/status in kB (VmRSS, VmHWM).
long status_kb(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  return -1;
}

void reset_peak() { std::ofstream("/proc/self/clear_refs") << "5"; }

LocalData synthetic_shard(std::size_t rows, std::size_t features, int rank) {
  distml::data::SplitMix64 rng(static_cast<std::uint64_t>(rank) + 1);
  LocalData d;
  d.rows = rows;
  d.features = features;
  d.x.resize(rows * features);
  for (double& v : d.x)
    v = rng.next() % 10 == 0 ? std::numeric_limits<double>::quiet_NaN()
                             : static_cast<double>(rng.next() % 100000) / 4;
  return d;
}

// The replaced algorithm, as it was: per feature, all-gather every rank's present values.
std::vector<double> gathered_medians(const LocalData& d, distml::comm::Communicator& comm) {
  std::vector<double> medians(d.features);
  for (std::size_t c = 0; c < d.features; ++c) {
    std::vector<double> mine;
    for (std::size_t i = 0; i < d.rows; ++i)
      if (const double v = d.x[i * d.features + c]; !std::isnan(v)) mine.push_back(v);
    std::int64_t n = static_cast<std::int64_t>(mine.size());
    std::vector<std::int64_t> counts(comm.size());
    comm.allgather(distml::comm::ConstBuffer{&n, 1, distml::comm::DType::i64},
                   distml::comm::Buffer{counts.data(), counts.size(), distml::comm::DType::i64});
    const std::vector<std::size_t> sizes(counts.begin(), counts.end());
    std::vector<double> all(std::accumulate(sizes.begin(), sizes.end(), std::size_t{0}));
    comm.allgatherv(distml::comm::cview(mine), distml::comm::view(all), sizes);
    const auto mid = all.begin() + static_cast<std::ptrdiff_t>(all.size() / 2);
    std::nth_element(all.begin(), mid, all.end());
    medians[c] = all.size() % 2 == 1 ? *mid : (*std::max_element(all.begin(), mid) + *mid) / 2;
  }
  return medians;
}

struct Measured {
  std::vector<double> medians;
  double extra_mb, seconds;
};

template <class Fn>
Measured measure(distml::comm::Communicator& comm, Fn fn) {
  comm.barrier();
  reset_peak();
  const long before = status_kb("VmRSS");
  const auto start = std::chrono::steady_clock::now();
  auto medians = fn();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const long peak = status_kb("VmHWM");
  comm.barrier();
  return {std::move(medians), static_cast<double>(peak - before) / 1024, seconds};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: mpirun -np P %s ROWS FEATURES\n", argv[0]);
    return 2;
  }
  const std::size_t rows = std::stoul(argv[1]), features = std::stoul(argv[2]);
  auto comm = distml::comm::connect();
  const LocalData d = synthetic_shard(rows, features, comm->rank());
  const long shard_kb = status_kb("VmRSS");
  const auto selection =
      measure(*comm, [&] { return distml::ml::fit_imputer(d, "median", *comm).values; });
  const auto gather = measure(*comm, [&] { return gathered_medians(d, *comm); });
  std::printf(
      "{\"rank\": %d, \"np\": %d, \"rows_per_rank\": %zu, \"features\": %zu, "
      "\"rss_with_shard_mb\": %.1f, \"selection_extra_mb\": %.1f, \"gather_extra_mb\": %.1f, "
      "\"selection_s\": %.3f, \"gather_s\": %.3f, \"same_medians\": %s}\n",
      comm->rank(), comm->size(), rows, features, static_cast<double>(shard_kb) / 1024,
      selection.extra_mb, gather.extra_mb, selection.seconds, gather.seconds,
      selection.medians == gather.medians ? "true" : "false");
  return 0;
}
