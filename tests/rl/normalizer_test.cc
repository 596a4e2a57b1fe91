// Observation and reward normalisation: running statistics merged over ranks and actors against
// those of the whole stream computed directly, the reward scale against its formula, and the
// statistics through a checkpoint.
#include "distml/rl/normalizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <random>
#include <vector>

#include "distml/comm/local/local_world.h"
#include "distml/core/error.h"
#include "distml/rl/learner_state.h"
#include "distml/rl/policy_state.h"
#include "distml/rl/running_stats.h"

namespace distml::rl {
namespace {

// Rows of `width` floats with a different mean and spread per dimension, so that a mixed-up
// dimension or a wrong merge shows.
std::vector<float> rows(std::size_t n, std::size_t width, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<float> out(n * width);
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t i = 0; i < width; ++i)
      out[r * width + i] = static_cast<float>(
          3.0 * i - 2 + (0.5 + i) * std::normal_distribution<double>(0, 1)(gen));
  return out;
}

// The mean and population variance per dimension of `data`, two passes in long double: the
// reference every merge is held to.
struct Direct {
  std::vector<double> mean, variance;
};
Direct direct(const std::vector<float>& data, std::size_t width) {
  const std::size_t n = data.size() / width;
  Direct d{std::vector<double>(width), std::vector<double>(width)};
  for (std::size_t i = 0; i < width; ++i) {
    long double sum = 0, squares = 0;
    for (std::size_t r = 0; r < n; ++r) sum += data[r * width + i];
    const long double mean = sum / n;
    for (std::size_t r = 0; r < n; ++r)
      squares += (data[r * width + i] - mean) * (data[r * width + i] - mean);
    d.mean[i] = static_cast<double>(mean);
    d.variance[i] = static_cast<double>(squares / n);
  }
  return d;
}

// The data are floats, exact in float64. Each batch's two passes and each merge add a few float64
// roundings (2^-53 relative each) to quantities no larger than 10^2 x (1 + |mean|) or
// 10^2 x (1 + variance) here (values below ~30, at most ~400 rows or merges, each adding a
// rounding of at most that size): 10^3 x 2^-53 x 10^2 relative to (1 + |mean|) and
// (1 + variance) bounds the difference with a margin, far below what a wrong merge (a count, a
// mean or a cross term off) would give.
void expect_equal_stats(const RunningMeanStd& s, const Direct& d, double count) {
  ASSERT_EQ(s.count(), count);
  const double scale = 1e3 * std::ldexp(1.0, -53) * 1e2;
  const std::vector<double> variance = s.variance();
  for (std::size_t i = 0; i < d.mean.size(); ++i) {
    EXPECT_NEAR(s.mean()[i], d.mean[i], scale * (1 + std::abs(d.mean[i]))) << "dimension " << i;
    EXPECT_NEAR(variance[i], d.variance[i], scale * (1 + d.variance[i])) << "dimension " << i;
  }
}

TEST(RunningMeanStd, BatchesOfAnySizeGiveTheStatisticsOfTheWholeStream) {
  const std::size_t width = 5;
  const std::vector<float> data = rows(301, width, 1);
  for (std::size_t batch : {1u, 7u, 64u, 301u}) {
    RunningMeanStd s(width);
    for (std::size_t at = 0; at < 301; at += batch) {
      const std::size_t n = std::min<std::size_t>(batch, 301 - at);
      s.add(std::span<const float>(data).subspan(at * width, n * width));
    }
    expect_equal_stats(s, direct(data, width), 301);
  }
}

TEST(RunningMeanStd, MergingPartsEqualsCountingTheirConcatenation) {
  const std::size_t width = 3;
  const std::vector<float> a = rows(40, width, 2), b = rows(1, width, 3), c = rows(95, width, 4);
  RunningMeanStd sa(width), sb(width), sc(width), empty(width);
  sa.add(a);
  sb.add(b);
  sc.add(c);
  sa.merge(empty);  // an empty part changes nothing
  sa.merge(sb);
  sa.merge(sc);
  std::vector<float> all = a;
  all.insert(all.end(), b.begin(), b.end());
  all.insert(all.end(), c.begin(), c.end());
  expect_equal_stats(sa, direct(all, width), 136);
}

TEST(RunningMeanStd, NothingCountedMeansMeanZeroVarianceOne) {
  RunningMeanStd s(2);
  EXPECT_EQ(s.count(), 0);
  EXPECT_EQ(s.mean(), (std::vector<double>{0, 0}));
  EXPECT_EQ(s.variance(), (std::vector<double>{1, 1}));
}

TEST(RunningMeanStd, UnpackRejectsWrongSizesAndImpossibleValues) {
  RunningMeanStd s(2);
  s.add(rows(3, 2, 5));
  EXPECT_EQ(RunningMeanStd::unpack(s.pack(), 2).pack(), s.pack());
  EXPECT_THROW(RunningMeanStd::unpack(s.pack(), 3), Error);
  std::vector<double> negative = s.pack();
  negative[0] = -1;
  EXPECT_THROW(RunningMeanStd::unpack(negative, 2), Error);
  negative = s.pack();
  negative.back() = -0.5;  // an M2
  EXPECT_THROW(RunningMeanStd::unpack(negative, 2), Error);
}

NormalizeConfig both_on() {
  NormalizeConfig c;
  c.observations = c.rewards = true;
  return c;
}

// Ranks each see their own rows; after sync() every rank holds the statistics of all rows, as
// if one process had seen rank 0's, then rank 1's, ... (1 to 4 ranks, 3 synchronisations).
TEST(Normalizer, SyncOverOneToFourRanksEqualsTheConcatenatedStream) {
  const std::size_t width = 4, per_step = 3;  // copies per rank
  for (int ranks = 1; ranks <= 4; ++ranks) {
    std::vector<float> stream;  // every row in rank order, round by round
    std::vector<std::vector<float>> seen(ranks);
    for (int round = 0; round < 3; ++round)
      for (int r = 0; r < ranks; ++r) {
        const std::vector<float> mine = rows(per_step * (2 + round), width, 100 * round + r);
        stream.insert(stream.end(), mine.begin(), mine.end());
        seen[r].insert(seen[r].end(), mine.begin(), mine.end());
      }
    std::mutex mutex;
    std::vector<std::vector<double>> states(ranks);
    comm::local::run_ranks(ranks, {}, [&](comm::Communicator& comm) {
      Normalizer n(both_on(), static_cast<int>(width), static_cast<int>(per_step), 0.99);
      std::size_t at = 0;
      for (int round = 0; round < 3; ++round) {
        const std::size_t count = per_step * (2 + round) * width;
        std::vector<float> batch(seen[comm.rank()].begin() + at,
                                 seen[comm.rank()].begin() + at + count);
        at += count;
        for (std::size_t step = 0; step < batch.size(); step += per_step * width)
          n.observe(std::span<float>(batch).subspan(step, per_step * width));
        n.sync(comm);
      }
      std::lock_guard lock(mutex);
      states[comm.rank()] = n.shared_state();
    });
    for (int r = 1; r < ranks; ++r) EXPECT_EQ(states[r], states[0]) << ranks << " ranks, rank " << r;
    const RunningMeanStd merged =
        RunningMeanStd::unpack(std::span<const double>(states[0]).first(1 + 2 * width), width);
    expect_equal_stats(merged, direct(stream, width), static_cast<double>(stream.size() / width));
  }
}

// The asynchronous route (an actor's take_pending merged by the learner) gives what one
// process counting every row would.
TEST(Normalizer, PendingRowsMergedByALearnerEqualTheWholeStream) {
  const std::size_t width = 2;
  Normalizer learner(both_on(), width, 1, 0.9), actor_a(both_on(), width, 1, 0.9),
      actor_b(both_on(), width, 1, 0.9);
  const std::vector<float> a = rows(30, width, 7), b = rows(12, width, 8);
  for (std::size_t r = 0; r < 30; ++r) {
    std::vector<float> row(a.begin() + r * width, a.begin() + (r + 1) * width);
    actor_a.observe(row);
  }
  std::vector<float> bb = b;
  actor_b.observe(bb);
  learner.merge_pending(actor_a.take_pending());
  learner.merge_pending(actor_b.take_pending());
  const std::vector<double> left = actor_a.take_pending();
  EXPECT_EQ(left[0], 0) << "take_pending leaves no rows pending";
  std::vector<float> all = a;
  all.insert(all.end(), b.begin(), b.end());
  const std::vector<double> state = learner.shared_state();
  expect_equal_stats(RunningMeanStd::unpack(std::span<const double>(state).first(1 + 2 * width),
                                            width),
                     direct(all, width), 42);
}

TEST(Normalizer, ObservationsAreCentredScaledAndClipped) {
  NormalizeConfig c;
  c.observations = true;
  c.clip_observations = 1.5;
  Normalizer n(c, 1, 4, 0.99);
  std::vector<float> batch{1, 2, 3, 10};  // mean 4, variance 12.5
  n.observe(batch);
  const double sd = std::sqrt(12.5 + c.epsilon);
  EXPECT_FLOAT_EQ(batch[0], static_cast<float>((1 - 4) / sd));
  EXPECT_FLOAT_EQ(batch[1], static_cast<float>((2 - 4) / sd));
  EXPECT_FLOAT_EQ(batch[2], static_cast<float>((3 - 4) / sd));
  EXPECT_FLOAT_EQ(batch[3], 1.5f);  // (10 - 4) / 3.54 = 1.70, clipped
  std::vector<float> later{4};
  n.normalize(later);  // not counted: the mean stays 4
  EXPECT_EQ(later[0], 0.0f);
}

// r_t / sqrt(Var(G) + eps) with G_t = gamma G_{t-1} + r_t per copy, restarted after an episode
// end, and the variance over every G counted so far; clipped to +-clip_rewards.
TEST(Normalizer, RewardsAreScaledByTheRunningStdOfTheDiscountedReturn) {
  NormalizeConfig c;
  c.rewards = true;
  c.clip_rewards = 2.0;
  const double gamma = 0.5;
  Normalizer n(c, 3, 2, gamma);
  const std::vector<std::vector<float>> steps = {{1, 4}, {2, -1}, {0.5f, 30}, {1, 1}};
  const std::vector<std::vector<std::uint8_t>> ends = {{0, 0}, {1, 0}, {0, 0}, {0, 0}};
  std::vector<double> g(2, 0), all_returns;
  for (std::size_t t = 0; t < steps.size(); ++t) {
    std::vector<float> r = steps[t];
    n.scale_rewards(r, ends[t]);
    for (int k = 0; k < 2; ++k) all_returns.push_back(g[k] = gamma * g[k] + steps[t][k]);
    double mean = 0, var = 0;
    for (double v : all_returns) mean += v / all_returns.size();
    for (double v : all_returns) var += (v - mean) * (v - mean) / all_returns.size();
    for (int k = 0; k < 2; ++k) {
      const double expected = std::clamp(steps[t][k] / std::sqrt(var + c.epsilon), -2.0, 2.0);
      EXPECT_NEAR(r[k], expected, 1e-6 * std::abs(expected))  // float rounding of the result
          << "step " << t << " copy " << k;
      if (ends[t][k]) g[k] = 0;
    }
  }
}

TEST(Normalizer, OffChangesNothingAndHasNoState) {
  Normalizer n(NormalizeConfig{}, 3, 2, 0.99);
  std::vector<float> obs{5, 6, 7, 8, 9, 10}, r{3, 4};
  const auto obs0 = obs, r0 = r;
  n.observe(obs);
  n.scale_rewards(r, std::vector<std::uint8_t>{0, 0});
  EXPECT_EQ(obs, obs0);
  EXPECT_EQ(r, r0);
  EXPECT_TRUE(n.shared_state().empty());
  EXPECT_EQ(n.packed_size(), 0u);
}

TEST(Normalizer, StatisticsFromAnotherConfigAreRefused) {
  Normalizer obs_only([] {
    NormalizeConfig c;
    c.observations = true;
    return c;
  }(), 3, 1, 0.99);
  Normalizer both(both_on(), 3, 1, 0.99);
  EXPECT_THROW(both.set_shared(obs_only.shared_state()), Error);
  EXPECT_THROW(both.merge_pending(obs_only.take_pending()), Error);
}

// The checkpoint keeps the shared statistics bit for bit, and a resumed normaliser treats the
// next rows exactly as the one that went on.
TEST(Normalizer, CheckpointedStatisticsResumeExactly) {
  torch::nn::Linear net(3, 2);
  torch::optim::SGD optimizer(net->parameters(), 0.1);
  Normalizer before(both_on(), 3, 2, 0.99);
  std::vector<float> seen = rows(20, 3, 9), rewards{1.5f, -2};
  before.observe(seen);
  before.scale_rewards(rewards, std::vector<std::uint8_t>{0, 1});
  Normalizer synced = before;
  synced.merge_pending(synced.take_pending());
  const std::string payload = save_learner_state({*net, optimizer, &synced}, {7, 700});

  Normalizer after(both_on(), 3, 2, 0.99);
  const LearnerCounters counters = load_learner_state(payload, "ck", {*net, optimizer, &after});
  EXPECT_EQ(counters.update, 7);
  EXPECT_EQ(after.shared_state(), synced.shared_state());
  std::vector<float> next_a = rows(5, 3, 10), next_b = next_a;
  synced.observe(next_a);
  after.observe(next_b);
  EXPECT_EQ(next_a, next_b);

  Normalizer other(NormalizeConfig{}, 3, 2, 0.99);  // a checkpoint without [normalize] on
  const std::string plain = save_learner_state({*net, optimizer, &other}, {1, 1});
  EXPECT_THROW(load_learner_state(plain, "ck", {*net, optimizer, &after}), CheckpointError);
}

// What a learner sends its actors: parameters and statistics, both arriving unrounded.
TEST(PolicyState, ParametersAndStatisticsRoundTripExactly) {
  torch::manual_seed(3);
  torch::nn::Linear a(4, 2), b(4, 2);
  Normalizer from(both_on(), 4, 1, 0.99), to(both_on(), 4, 1, 0.99);
  std::vector<float> seen = rows(9, 4, 11);
  from.observe(seen);
  from.merge_pending(from.take_pending());
  const std::vector<float> payload = pack_policy(*a, &from);
  EXPECT_EQ(payload.size(), policy_floats(*a, &from));
  unpack_policy(payload, *b, &to);
  EXPECT_TRUE(torch::equal(a->weight, b->weight));
  EXPECT_EQ(to.shared_state(), from.shared_state());
}

}  // namespace
}  // namespace distml::rl
