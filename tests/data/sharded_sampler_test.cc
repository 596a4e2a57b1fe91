#include "distml/data/sharded_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

#include "distml/core/error.h"
#include "distml/data/permutation.h"

namespace distml::data {
namespace {

constexpr std::uint64_t kSeed = 1234;

// (dataset size, batch per rank, drop_last) under every world size 1..4.
class ShardedSamplerWorld
    : public ::testing::TestWithParam<std::tuple<int, std::size_t, std::size_t, bool>> {};

TEST_P(ShardedSamplerWorld, RanksTogetherSeeOneRankWithWorldTimesBatch) {
  const auto [world, n, batch, drop_last] = GetParam();
  const ShardedSampler single(n, 1, 0, batch * world, kSeed, drop_last);
  std::vector<ShardedSampler> ranks;
  for (int r = 0; r < world; ++r) ranks.emplace_back(n, world, r, batch, kSeed, drop_last);
  for (std::uint64_t epoch : {0u, 1u, 7u}) {
    ASSERT_EQ(ranks[0].steps_per_epoch(), single.steps_per_epoch());
    for (std::size_t step = 0; step < single.steps_per_epoch(); ++step) {
      std::vector<std::size_t> joined;
      for (const ShardedSampler& s : ranks) {
        const std::vector<std::size_t> mine = s.indices(epoch, step);
        EXPECT_LE(mine.size(), batch);
        joined.insert(joined.end(), mine.begin(), mine.end());
      }
      EXPECT_EQ(joined, single.indices(epoch, step)) << "epoch " << epoch << " step " << step;
    }
  }
}

TEST_P(ShardedSamplerWorld, ShardsAreDisjointAndCoverEachIndexAtMostOnce) {
  const auto [world, n, batch, drop_last] = GetParam();
  std::set<std::size_t> seen;
  std::size_t total = 0;
  for (int r = 0; r < world; ++r) {
    const ShardedSampler s(n, world, r, batch, kSeed, drop_last);
    for (std::size_t step = 0; step < s.steps_per_epoch(); ++step) {
      for (std::size_t i : s.indices(3, step)) {
        EXPECT_LT(i, n);
        EXPECT_TRUE(seen.insert(i).second) << "index " << i << " twice (rank " << r << ")";
        ++total;
      }
    }
  }
  const std::size_t global = batch * world;
  EXPECT_EQ(total, drop_last ? n / global * global : n);
}

INSTANTIATE_TEST_SUITE_P(WorldSizesAndRemainders, ShardedSamplerWorld,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values<std::size_t>(103, 96, 23),
                                            ::testing::Values<std::size_t>(1, 4, 5),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return "w" + std::to_string(std::get<0>(info.param)) + "_n" +
                                  std::to_string(std::get<1>(info.param)) + "_b" +
                                  std::to_string(std::get<2>(info.param)) +
                                  (std::get<3>(info.param) ? "_drop" : "_keep");
                         });

TEST(ShardedSampler, WithoutDropLastSplitsTheLastWindowEvenly) {
  // 103 = 4 * 24 + 7: the last window of 7 goes 2, 2, 2, 1 to four ranks of batch 6.
  std::vector<std::size_t> sizes;
  for (int r = 0; r < 4; ++r) {
    const ShardedSampler s(103, 4, r, 6, kSeed, /*drop_last=*/false);
    ASSERT_EQ(s.steps_per_epoch(), 5u);
    sizes.push_back(s.indices(0, 4).size());
  }
  EXPECT_EQ(sizes, (std::vector<std::size_t>{2, 2, 2, 1}));
  EXPECT_EQ(ShardedSampler(103, 4, 0, 6, kSeed, true).steps_per_epoch(), 4u);
}

TEST(ShardedSampler, IsDeterministicPerSeedAndEpochAndDiffersAcrossThem) {
  const ShardedSampler a(1000, 3, 1, 10, kSeed), b(1000, 3, 1, 10, kSeed);
  const ShardedSampler other_seed(1000, 3, 1, 10, kSeed + 1);
  EXPECT_EQ(a.indices(5, 2), b.indices(5, 2));
  EXPECT_NE(a.indices(5, 2), a.indices(6, 2));
  EXPECT_NE(a.indices(5, 2), other_seed.indices(5, 2));
  EXPECT_NE(shuffled_permutation(1000, kSeed, 0), shuffled_permutation(1000, kSeed, 1));
}

TEST(ShardedSampler, PermutationIsPinnedAcrossPlatforms) {
  // Pinned output of splitmix64 + Fisher-Yates, computed by an independent Python version of
  // the algorithm documented in permutation.h: a change here breaks resumption of
  // checkpoints written by earlier builds, and ranks built by other toolchains.
  EXPECT_EQ(SplitMix64(0).next(), 0xe220a8397b1dcdafULL);
  const std::vector<std::size_t> p = shuffled_permutation(10, 42, 0);
  std::vector<std::size_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(p, (std::vector<std::size_t>{4, 7, 2, 9, 0, 6, 8, 5, 3, 1}));
}

TEST(ShardedSampler, RestoredPositionResumesAtTheSameNextBatch) {
  ShardedSampler s(50, 2, 1, 4, kSeed);  // 6 steps per epoch
  for (int i = 0; i < 9; ++i) s.next();
  const SamplerPosition saved = s.position();
  EXPECT_EQ(saved, (SamplerPosition{1, 3}));
  const std::vector<std::size_t> expected = s.next();
  ShardedSampler resumed(50, 2, 1, 4, kSeed);
  resumed.restore(saved);
  EXPECT_EQ(resumed.next(), expected);
  EXPECT_EQ(resumed.next(), s.next());
  EXPECT_EQ(expected, s.indices(1, 3));
  EXPECT_THROW(resumed.restore({0, 6}), CheckpointError);
}

// An elastic restart: `old_world` ranks take `stop` steps of epoch 2, then `new_world` ranks
// (fewer, more, or as many)
// resume from the re-sharded position and finish the epoch. Over the two runs no sample is
// taken twice, and the only samples never taken are, with drop_last, a tail shorter than one
// new global batch (exactly what any epoch's end drops); without drop_last none is missed.
void expect_world_change_keeps_the_epoch(std::size_t n, std::size_t batch, bool drop_last, int old_world,
                                   int new_world, std::size_t stop) {
  SCOPED_TRACE(cat("n ", n, " batch ", batch, drop_last ? " drop_last" : " keep", " world ",
                   old_world, " -> ", new_world, " after ", stop, " steps"));
  constexpr std::uint64_t kEpoch = 2;
  std::multiset<std::size_t> taken;
  for (int r = 0; r < old_world; ++r) {
    const ShardedSampler s(n, old_world, r, batch, kSeed, drop_last);
    for (std::size_t step = 0; step < stop; ++step)
      for (std::size_t i : s.indices(kEpoch, step)) taken.insert(i);
  }
  const SamplerPosition saved{kEpoch, stop};
  for (int r = 0; r < new_world; ++r) {
    ShardedSampler s(n, new_world, r, batch, kSeed, drop_last);
    s.restore(s.resharded(saved, old_world));
    while (s.position().epoch == kEpoch)
      for (std::size_t i : s.next()) taken.insert(i);
    EXPECT_EQ(s.position(), (SamplerPosition{kEpoch + 1, 0})) << "the next epoch starts whole";
  }
  const std::set<std::size_t> distinct(taken.begin(), taken.end());
  EXPECT_EQ(distinct.size(), taken.size()) << "a sample was taken twice";
  const std::size_t missed = n - distinct.size();
  if (drop_last)
    EXPECT_LT(missed, batch * new_world);
  else
    EXPECT_EQ(missed, 0u);
}

TEST(ShardedSampler, ChangingTheWorldInMidEpochNeitherSkipsNorRepeatsASample) {
  for (const std::size_t n : {103u, 96u, 23u})
    for (const std::size_t batch : {1u, 4u, 5u})
      for (const bool drop_last : {true, false})
        for (int old_world = 1; old_world <= 4; ++old_world) {
          if (n < batch * old_world) continue;  // no step at all
          const std::size_t steps =
              ShardedSampler(n, old_world, 0, batch, kSeed, drop_last).steps_per_epoch();
          for (int new_world = 1; new_world <= 4; ++new_world)
            for (std::size_t stop = 0; stop < steps; ++stop)
              expect_world_change_keeps_the_epoch(n, batch, drop_last, old_world, new_world, stop);
        }
}

TEST(ShardedSampler, ReshardedEpochCountsItsStepsAndEndsAtTheNextWholeEpoch) {
  // 3 ranks of batch 4 took 5 steps (60 of 100); 2 ranks of batch 4 take 40 in 5 steps.
  ShardedSampler s(100, 2, 0, 4, kSeed);
  const SamplerPosition at = s.resharded({1, 5}, 3);
  EXPECT_EQ(at, (SamplerPosition{1, 0, 60}));
  s.restore(at);
  EXPECT_EQ(s.steps_before_epoch(2), 5u);
  EXPECT_EQ(s.steps_before_epoch(4), 5u + 2 * s.steps_per_epoch());
  const std::vector<std::size_t> order = shuffled_permutation(100, kSeed, 1);
  EXPECT_EQ(s.indices(at), std::vector<std::size_t>(order.begin() + 60, order.begin() + 64));
  EXPECT_EQ(s.following({1, 4, 60}), (SamplerPosition{2, 0}));
  // Fewer positions left than one global batch (drop_last): the next epoch starts.
  s.restore({1, 0, 96});  // 4 left < 8
  EXPECT_EQ(s.position(), (SamplerPosition{2, 0}));
  EXPECT_THROW(s.restore({1, 5, 60}), CheckpointError);  // only 5 steps after offset 60
}

TEST(ShardedSampler, RejectsBadArgumentsNamingTheValues) {
  auto message = [](auto make) -> std::string {
    try {
      make();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_THROW(ShardedSampler(10, 0, 0, 1, kSeed), UsageError);
  EXPECT_NE(message([] { ShardedSampler(10, 0, 0, 1, kSeed); }).find("world_size 0"),
            std::string::npos);
  EXPECT_THROW(ShardedSampler(10, 2, 2, 1, kSeed), UsageError);
  EXPECT_NE(message([] { ShardedSampler(10, 2, -1, 1, kSeed); }).find("rank -1"),
            std::string::npos);
  EXPECT_THROW(ShardedSampler(10, 2, 0, 0, kSeed), UsageError);
  EXPECT_THROW(ShardedSampler(10, 3, 0, 4, kSeed, true), DataError);
  EXPECT_THROW(ShardedSampler(0, 1, 0, 4, kSeed, false), DataError);
  EXPECT_THROW(ShardedSampler(10, 1, 0, 4, kSeed).indices(0, 2), UsageError);
}

}  // namespace
}  // namespace distml::data
