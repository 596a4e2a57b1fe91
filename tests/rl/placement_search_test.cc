// The placement search (rl/placement_search.h) against exhaustive search over every
// contiguous placement, on cases small enough to enumerate: with equal ranks, where the
// partition's dynamic programming (train/pipeline/cost_model.h) is exact, and with unequal
// ranks and links, which the dynamic programming does not model.
#include "distml/rl/placement_search.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "distml/core/error.h"
#include "distml/train/pipeline/cost_model.h"
#include "distml/train/pipeline/simulate.h"

namespace distml::rl {
namespace {

namespace pp = train::pipeline;

// Every way to give `stages` stages at least one of `layers` layers each, in order.
void each_placement(int layers, int stages, std::vector<int>& prefix,
                    const std::function<void(const std::vector<int>&)>& visit) {
  if (static_cast<int>(prefix.size()) == stages - 1) {
    prefix.push_back(layers);
    visit(prefix);
    prefix.pop_back();
    return;
  }
  const int left = stages - 1 - static_cast<int>(prefix.size());  // stages after this one
  for (int c = 1; c <= layers - left; ++c) {
    prefix.push_back(c);
    each_placement(layers - c, stages, prefix, visit);
    prefix.pop_back();
  }
}

double exhaustive_best(int layers, int stages, const PlacementTime& step_s) {
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> prefix;
  each_placement(layers, stages, prefix,
                 [&](const std::vector<int>& c) { best = std::min(best, step_s(c)); });
  return best;
}

// Layers of unequal compute (1 to 10 ms) and activations (10 KB to 1 MB), drawn from `seed`.
std::vector<pp::LayerCost> random_layers(int n, unsigned seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<double> ms(1, 10), kb(10, 1000);
  std::vector<pp::LayerCost> layers(n);
  for (auto& l : layers) {
    l.forward_s = ms(random) * 1e-3;
    l.backward_s = 2 * l.forward_s;
    l.output_bytes = kb(random) * 1e3;
    l.parameter_bytes = kb(random) * 1e3;
  }
  return layers;
}

const pp::Link kLink{50e-6, 1.25e9};  // 10 Gbit/s: the activations' transfers matter

// Equal ranks, one replica: the dynamic programming's partition is the exhaustive optimum of
// its cost model, and the search finds that optimum too; the policy's own most likely
// placement is within 5% of it (the planner's target). The times compared are the same
// function's values on the same placement, so the optimum is matched to float64 rounding.
// (With replicas the dynamic programming adds the all-reduce after choosing the cuts, and is
// not exact: the search, which times the whole step, can do better there.)
TEST(PlacementSearch, FindsTheDynamicProgrammingOptimumWithEqualRanks) {
  for (unsigned seed = 1; seed <= 3; ++seed)
    for (int stages : {2, 3, 4})
      for (int micro : {1, 4}) {
        const auto layers = random_layers(8, seed);
        const PlacementTime closed_form = [&](const std::vector<int>& counts) {
          return pp::predicted_step_s(layers, counts, micro, kLink);
        };
        const double optimum = exhaustive_best(8, stages, closed_form);
        const auto dp = pp::best_partition(layers, stages, micro, kLink);
        const auto rl = search_placement(8, stages, closed_form, {.seed = seed});
        SCOPED_TRACE(cat("seed ", seed, ", ", stages, " stages, ", micro, " micro-batches"));
        EXPECT_NEAR(dp.step_s, optimum, 1e-12 * optimum);
        EXPECT_NEAR(rl.step_s, optimum, 1e-12 * optimum);
        EXPECT_LE(rl.most_likely_step_s, 1.05 * optimum);
      }
}

// Unequal ranks and links, played out by the pipeline simulator: the search finds the
// exhaustive optimum, which is faster than the equal-rank plan of the dynamic programming.
// Eight equal layers (forward 1 ms, backward 2 ms) on two stages, the second rank at half
// speed, four micro-batches under 1f1b; played out by hand (stage 0: F0 F1 B0 F2 B1 F3 B2 B3,
// stage 1: F0 B0 F1 B1 ..., each op when its input has arrived), the equal-rank plan [4, 4]
// ends at 108 ms, [5, 3] at 87, [6, 2] at 78 and [7, 1] at 84.
TEST(PlacementSearch, PlacesForASlowRankAndASlowLink) {
  std::vector<pp::LayerCost> equal(8, pp::LayerCost{.forward_s = 1e-3, .backward_s = 2e-3});
  const pp::Unequal slow_rank{.slowdown = {1, 2}};
  const PlacementTime half_speed = [&](const std::vector<int>& counts) {
    return pp::simulated_step_s(equal, counts, 4, "1f1b", {}, {}, 1, false, slow_rank);
  };
  const auto dp = pp::best_partition(equal, 2, 4, {});
  EXPECT_EQ(dp.counts, (std::vector<int>{4, 4}));
  EXPECT_NEAR(half_speed(dp.counts), 108e-3, 1e-12);
  EXPECT_NEAR(half_speed({5, 3}), 87e-3, 1e-12);
  EXPECT_NEAR(half_speed({7, 1}), 84e-3, 1e-12);
  const auto rl = search_placement(8, 2, half_speed);
  EXPECT_EQ(rl.counts, (std::vector<int>{6, 2}));
  EXPECT_NEAR(rl.step_s, 78e-3, 1e-12);
  EXPECT_EQ(rl.most_likely, rl.counts);

  // Random layers on three stages, one rank slow and one link at a tenth of the others'.
  for (unsigned seed = 1; seed <= 3; ++seed) {
    const auto layers = random_layers(8, seed);
    const pp::Unequal unequal{.slowdown = {1, 1.5, 1},
                              .links = {kLink, {kLink.latency_s, kLink.bytes_per_s / 10}}};
    const PlacementTime simulated = [&](const std::vector<int>& counts) {
      return pp::simulated_step_s(layers, counts, 4, "1f1b", kLink, {}, 1, false, unequal);
    };
    const double optimum = exhaustive_best(8, 3, simulated);
    const auto rl = search_placement(8, 3, simulated, {.seed = seed});
    SCOPED_TRACE(cat("seed ", seed));
    EXPECT_NEAR(rl.step_s, optimum, 1e-12 * optimum);
    EXPECT_LE(rl.most_likely_step_s, 1.05 * optimum);
    EXPECT_LT(optimum, simulated(pp::best_partition(layers, 3, 4, kLink).counts));
  }
}

TEST(PlacementSearch, RefusesFewerLayersThanStages) {
  const PlacementTime any = [](const std::vector<int>&) { return 1.0; };
  EXPECT_THROW(search_placement(2, 3, any), ConfigError);
  EXPECT_THROW(search_placement(4, 2, any, {.samples = 1}), ConfigError);
  // One stage: one placement.
  EXPECT_EQ(search_placement(5, 1, any).counts, (std::vector<int>{5}));
}

}  // namespace
}  // namespace distml::rl
