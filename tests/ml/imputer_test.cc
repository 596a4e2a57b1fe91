// The imputer's mean and median over all ranks' rows against values worked out by hand and
// against a serial median (np.median of the present values), at world sizes 1 to 4 (each rank
// holding a block of the rows), and the median's memory: it must not gather the values.
#include "distml/ml/imputer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>

#include "distml/comm/block_range.h"
#include "distml/comm/local/local_world.h"
#include "distml/core/error.h"
#include "distml/data/permutation.h"
#include "synthetic_shards.h"

// Bytes allocated through operator new now, and the most since the last reset: what the
// median's memory test reads. Every other operator new and delete of the program forwards to
// these two (array, nothrow and sized forms call them); each block carries its size in front.
namespace distml::ml::imputer_test {
std::atomic<std::int64_t> allocated{0}, peak_allocated{0};
}  // namespace distml::ml::imputer_test

void* operator new(std::size_t n) {
  using distml::ml::imputer_test::allocated, distml::ml::imputer_test::peak_allocated;
  constexpr std::size_t kHeader = alignof(std::max_align_t);
  auto* block = static_cast<unsigned char*>(std::malloc(n + kHeader));
  if (block == nullptr) throw std::bad_alloc();
  *reinterpret_cast<std::size_t*>(block) = n;
  const std::int64_t now = allocated += static_cast<std::int64_t>(n);
  std::int64_t peak = peak_allocated.load();
  while (now > peak && !peak_allocated.compare_exchange_weak(peak, now)) {
  }
  return block + kHeader;
}

void operator delete(void* p) noexcept {
  if (p == nullptr) return;
  constexpr std::size_t kHeader = alignof(std::max_align_t);
  auto* block = static_cast<unsigned char*>(p) - kHeader;
  distml::ml::imputer_test::allocated -=
      static_cast<std::int64_t>(*reinterpret_cast<std::size_t*>(block));
  std::free(block);
}

namespace distml::ml::imputer_test {  // its own: unity builds merge anonymous namespaces
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int kWorlds[] = {1, 2, 3, 4};

// 5 rows x 2 features; column a present: 1, 3, 5, 10; column b: 4, 8, 2.
const std::vector<double> kRows = {1, kNaN, kNaN, 4, 3, kNaN, 5, 8, 10, 2};

LocalData block(comm::Communicator& comm) {
  const auto range = comm::block_range(5, comm.size(), comm.rank());
  LocalData d;
  d.features = 2;
  d.rows = range.end - range.begin;
  d.x.assign(kRows.begin() + 2 * range.begin, kRows.begin() + 2 * range.end);
  d.global_rows = 5;
  return d;
}

TEST(Imputer, MeanAndMedianOfThePresentValuesOverAllRanks) {
  // Exact in binary or compared with the same division: mean a = 19 / 4, b = 14 / 3; median
  // a = (3 + 5) / 2 (an even count: the middle two), b = 4.
  for (int world : kWorlds) {
    comm::local::run_ranks(world, {}, [&](comm::Communicator& comm) {
      auto d = block(comm);
      const auto mean = fit_imputer(d, "mean", comm);
      EXPECT_EQ(mean.values, (std::vector<double>{19.0 / 4, 14.0 / 3})) << "world " << world;
      const auto median = fit_imputer(d, "median", comm);
      EXPECT_EQ(median.values, (std::vector<double>{4, 4})) << "world " << world;
      median.apply(d);
      for (double v : d.x) EXPECT_FALSE(std::isnan(v));
      const auto back = Imputer::from_json(median.to_json());
      EXPECT_EQ(back.strategy, "median");
      EXPECT_EQ(back.values, median.values);
    });
  }
}

// np.median of the present (not NaN) values: the middle one of the sorted values, or the mean
// of the middle two.
double serial_median(std::vector<double> present) {
  std::sort(present.begin(), present.end());
  const std::size_t n = present.size(), mid = n / 2;
  return n % 2 == 1 ? present[mid] : (present[mid - 1] + present[mid]) / 2;
}

// rows x 6 features, about 30% missing (never on row 0): many ties (a few distinct values),
// negative values, -0.0 next to 0.0, magnitudes from the smallest subnormal to 1e300; feature 4 has
// one present value and feature 5 two (when rows allow).
LocalData awkward_rows(std::size_t rows, std::uint64_t seed) {
  data::SplitMix64 rng(seed);
  const double values[] = {-1e300, -2.5, -1, -0.0, 0.0, 4.9e-324, 0.25, 1, 1, 3, 7.5, 1e300};
  LocalData d;
  d.rows = d.global_rows = rows;
  d.features = 6;
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t c = 0; c < d.features; ++c) {
      double v = i > 0 && rng.next() % 10 < 3 ? kNaN : values[rng.next() % std::size(values)];
      if (c == 1) v = std::isnan(v) ? v : std::ldexp(v, -3) + static_cast<double>(i % 7);
      if (c == 4) v = i == rows / 2 ? -3.0 : kNaN;
      if (c == 5) v = i == 0 ? 2.0 : i + 1 == rows ? -6.0 : kNaN;
      d.x.push_back(v);
    }
  return d;
}

TEST(Imputer, MedianEqualsTheSerialMedianAtEveryWorldSize) {
  // Odd and even counts of present values, ties, signed zeros and extreme magnitudes; some
  // ranks hold no rows (2 rows on 3 or 4 ranks). The median is an order statistic (or the
  // mean of two, computed as np.median does), so it must be equal, not close.
  for (std::size_t rows : {2, 3, 8, 101, 1000}) {
    const LocalData all = awkward_rows(rows, rows);
    std::vector<double> expected(all.features);
    for (std::size_t c = 0; c < all.features; ++c) {
      std::vector<double> present;
      for (std::size_t i = 0; i < rows; ++i)
        if (!std::isnan(all.row(i)[c])) present.push_back(all.row(i)[c]);
      ASSERT_FALSE(present.empty());
      expected[c] = serial_median(present);
    }
    for (int world : kWorlds) {
      const auto medians =
          testing::on_ranks(world, all, [](comm::Communicator& comm, const LocalData& d) {
            return fit_imputer(d, "median", comm).values;
          });
      for (int r = 0; r < world; ++r)
        EXPECT_EQ(medians[r], expected) << rows << " rows, world " << world << ", rank " << r;
    }
  }
}

TEST(Imputer, MedianNeedsNoCopyOfTheValues) {
  // 2^20 rows x 2 features on 2 ranks: each rank's column is 4 MiB, all ranks' 8 MiB. A median
  // that gathers the values needs that much at least; a selection by counts needs counts per
  // feature only. The counting allocator sees both ranks (threads of this process) and the
  // local engine's own buffers, so the bound allows 64 KiB per rank for those plus 64 KiB
  // per feature, far below a column.
  constexpr std::size_t kRows = std::size_t{1} << 20;
  LocalData all;
  all.rows = all.global_rows = kRows;
  all.features = 2;
  all.x.resize(2 * kRows);
  for (std::size_t i = 0; i < all.x.size(); ++i)
    all.x[i] = i % 5 == 0 ? kNaN : static_cast<double>((i * 7919) % 1000);
  const LocalData shards[] = {testing::shard(all, 2, 0), testing::shard(all, 2, 1)};
  std::int64_t used = 0;
  comm::local::run_ranks(2, {}, [&](comm::Communicator& comm) {
    comm.barrier();
    if (comm.rank() == 0) peak_allocated = allocated.load();
    const std::int64_t before = allocated.load();
    comm.barrier();
    fit_imputer(shards[comm.rank()], "median", comm);
    comm.barrier();
    if (comm.rank() == 0) used = peak_allocated.load() - before;
  });
  EXPECT_LE(used, 2 * (64 << 10) + 2 * (64 << 10)) << "bytes allocated at the peak";
}

TEST(Imputer, RefusesAnUnknownStrategyAndAFeatureMissingEverywhere) {
  comm::local::run_ranks(2, {}, [&](comm::Communicator& comm) {
    auto d = block(comm);
    EXPECT_THROW(fit_imputer(d, "mode", comm), ConfigError);
    for (std::size_t i = 0; i < d.rows; ++i) d.x[2 * i] = kNaN;  // column a gone
    d.feature_names = {"a", "b"};
    for (const std::string strategy : {"mean", "median"}) {
      try {
        fit_imputer(d, strategy, comm);
        ADD_FAILURE() << "no error";
      } catch (const DataError& e) {
        EXPECT_EQ(std::string(e.what()), "feature 'a' is missing on every row, so it has no " +
                                             strategy + " to fill it with");
      }
    }
  });
}

}  // namespace
}  // namespace distml::ml::imputer_test
