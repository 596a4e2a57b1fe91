#include "distml/train/bucket_planner.h"

#include <gtest/gtest.h>

namespace distml::train {
namespace {

using Buckets = std::vector<std::vector<std::size_t>>;

TEST(BucketPlanner, FillsInReverseOrderUpToTheCaps) {
  // First bucket capped at 10 bytes, later ones at 25.
  auto plan = plan_buckets({8, 8, 8, 8, 4, 6}, 10, 25);
  EXPECT_EQ(plan.buckets, (Buckets{{5, 4}, {3, 2, 1}, {0}}));
}

TEST(BucketPlanner, OversizedParameterGetsABucketOfItsOwn) {
  auto plan = plan_buckets({4, 100, 4}, 10, 25);
  EXPECT_EQ(plan.buckets, (Buckets{{2}, {1}, {0}}));
}

TEST(BucketPlanner, EveryParameterExactlyOnce) {
  std::vector<std::size_t> bytes(37);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = (i * 7919) % 50 + 1;
  auto plan = plan_buckets(bytes, 30, 60);
  std::vector<int> seen(bytes.size(), 0);
  for (auto& b : plan.buckets)
    for (auto k : b) ++seen[k];
  for (int s : seen) EXPECT_EQ(s, 1);
  EXPECT_TRUE(plan_buckets({}, 1, 1).buckets.empty());
}

}  // namespace
}  // namespace distml::train
