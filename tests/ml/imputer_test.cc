// The imputer's mean and median over all ranks' rows against values worked out by hand, at
// several world sizes (each rank holding a block of the rows).
#include "distml/ml/imputer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "distml/comm/block_range.h"
#include "distml/comm/local/local_world.h"
#include "distml/core/error.h"

namespace distml::ml::imputer_test {  // its own: unity builds merge anonymous namespaces
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

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
  for (int world : {1, 2, 3, 4}) {
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

TEST(Imputer, RefusesAnUnknownStrategyAndAFeatureMissingEverywhere) {
  comm::local::run_ranks(2, {}, [&](comm::Communicator& comm) {
    auto d = block(comm);
    EXPECT_THROW(fit_imputer(d, "mode", comm), ConfigError);
    for (std::size_t i = 0; i < d.rows; ++i) d.x[2 * i] = kNaN;  // column a gone
    d.feature_names = {"a", "b"};
    try {
      fit_imputer(d, "mean", comm);
      ADD_FAILURE() << "no error";
    } catch (const DataError& e) {
      EXPECT_STREQ(e.what(),
                   "feature 'a' is missing on every row, so it has no mean to fill it with");
    }
  });
}

}  // namespace
}  // namespace distml::ml::imputer_test
