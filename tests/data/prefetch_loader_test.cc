#include "distml/data/prefetch_loader.h"

#include <gtest/gtest.h>

#include <vector>

#include "distml/core/error.h"

namespace distml::data {
namespace {

// n samples of 3 features: sample i is {i, i + 0.5, -i} with label i % 7.
Dataset make_dataset(std::size_t n) {
  Dataset ds;
  ds.num_samples = n;
  ds.feature_dim = 3;
  ds.sample_shape = {3};
  for (std::size_t i = 0; i < n; ++i) {
    const float f = static_cast<float>(i);
    ds.features.insert(ds.features.end(), {f, f + 0.5f, -f});
    ds.labels.push_back(static_cast<std::int64_t>(i % 7));
  }
  return ds;
}

TEST(PrefetchLoader, YieldsTheSamplersBatchesThenEndOfEpoch) {
  const Dataset ds = make_dataset(23);
  const ShardedSampler sampler(23, 3, 2, 2, 99, /*drop_last=*/false);  // 4 steps
  ShardedSampler reference = sampler;
  PrefetchLoader loader(ds, sampler, 2);
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (std::size_t step = 0; step < reference.steps_per_epoch(); ++step) {
      const SamplerPosition at = reference.position();
      const std::vector<std::size_t> want = reference.next();
      const std::optional<Batch> b = loader.next();
      ASSERT_TRUE(b.has_value()) << "epoch " << epoch << " step " << step;
      EXPECT_EQ(b->indices, want);
      EXPECT_EQ(b->position, at);
      ASSERT_EQ(b->size, want.size());
      ASSERT_EQ(b->features.size(), want.size() * 3);
      for (std::size_t k = 0; k < want.size(); ++k) {
        EXPECT_EQ(b->features[3 * k], static_cast<float>(want[k]));
        EXPECT_EQ(b->features[3 * k + 2], -static_cast<float>(want[k]));
        EXPECT_EQ(b->labels[k], static_cast<std::int64_t>(want[k] % 7));
      }
    }
    EXPECT_FALSE(loader.next().has_value()) << "no end of epoch " << epoch;
  }
}

TEST(PrefetchLoader, StartsAtARestoredPosition) {
  const Dataset ds = make_dataset(40);
  ShardedSampler sampler(40, 2, 0, 5, 7);
  sampler.restore({3, 2});
  PrefetchLoader loader(ds, sampler, 1);
  EXPECT_EQ(loader.next()->indices, sampler.indices(3, 2));
  EXPECT_EQ(loader.next()->indices, sampler.indices(3, 3));
  EXPECT_FALSE(loader.next().has_value());
  EXPECT_EQ(loader.next()->indices, sampler.indices(4, 0));
}

TEST(PrefetchLoader, StopsCleanlyWithAFullQueue) {
  const Dataset ds = make_dataset(100);
  for (int i = 0; i < 20; ++i) {
    PrefetchLoader loader(ds, ShardedSampler(100, 1, 0, 10, i), 3);
    if (i % 2 == 0) loader.next();
  }  // each destructor must return although its worker is blocked on a full queue
}

TEST(PrefetchLoader, RethrowsTheWorkersErrorOnEveryLaterCall) {
  Dataset ds = make_dataset(8);
  ds.features.resize(5 * 3);  // rows 5..7 are missing
  PrefetchLoader loader(ds, ShardedSampler(8, 1, 0, 8, 1), 2);
  EXPECT_THROW(loader.next(), DataError);
  EXPECT_THROW(loader.next(), DataError);
}

TEST(PrefetchLoader, RejectsZeroDepthAndSizeMismatch) {
  const Dataset ds = make_dataset(10);
  EXPECT_THROW(PrefetchLoader(ds, ShardedSampler(10, 1, 0, 2, 1), 0), UsageError);
  EXPECT_THROW(PrefetchLoader(ds, ShardedSampler(12, 1, 0, 2, 1), 2), UsageError);
}

}  // namespace
}  // namespace distml::data
