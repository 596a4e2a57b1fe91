#include "distml/rl/placement_search.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <span>

#include "distml/core/error.h"

namespace distml::rl {
namespace {

// Step 1 for a batch of placements: row i of `cuts` is 1 before each layer that opens a stage.
// `draw` gives each decision's uniform number, or none for the most likely decisions. Returns
// the log-probability of each placement (its free decisions') and fills `cuts`.
torch::Tensor place(const torch::Tensor& theta, int n, int layers, int stages,
                    const std::function<torch::Tensor()>& draw, torch::Tensor& cuts) {
  auto stage = torch::zeros({n}, torch::kLong);
  auto log_prob = torch::zeros({n});
  cuts = torch::zeros({n, layers}, torch::kLong);
  for (int l = 1; l < layers; ++l) {
    const auto logits = theta[l].index_select(0, stage);
    const auto last = stage == stages - 1;
    const auto forced = (stages - 1 - stage) == (layers - l);  // as many layers as stages left
    const auto chosen = draw ? draw() < torch::sigmoid(logits).detach() : logits.detach() > 0;
    const auto cut = (chosen & ~last) | forced;
    const auto free = ~(last | forced);
    log_prob = log_prob + torch::where(free & cut, torch::log_sigmoid(logits),
                                       torch::where(free, torch::log_sigmoid(-logits),
                                                    torch::zeros_like(logits)));
    cuts.select(1, l).copy_(cut);
    stage = stage + cut.to(torch::kLong);
  }
  return log_prob;
}

std::vector<int> counts_of(const torch::Tensor& cuts_row, int stages) {
  std::vector<int> counts(stages, 0);
  const auto cut = cuts_row.accessor<std::int64_t, 1>();
  int s = 0;
  for (std::int64_t l = 0; l < cut.size(0); ++l) {
    s += static_cast<int>(cut[l]);
    ++counts[s];
  }
  return counts;
}

}  // namespace

PlacementSearchResult search_placement(int layers, int stages, const PlacementTime& step_s,
                                       const PlacementSearchOptions& options) {
  if (stages < 1 || layers < stages)
    throw ConfigError(
        cat("placement search: ", stages, " stages need at least as many layers; got ", layers));
  if (options.iterations < 1 || options.samples < 2 || !(options.learning_rate > 0))
    throw ConfigError(
        cat("placement search: iterations >= 1, samples >= 2 and a learning rate "
            "> 0 expected, got ",
            options.iterations, ", ", options.samples, ", ", options.learning_rate));
  torch::NoGradGuard outer;  // only the policy's own graph below records gradients
  auto theta = torch::zeros({layers, stages});
  theta.set_requires_grad(true);
  torch::optim::Adam adam({theta}, torch::optim::AdamOptions(options.learning_rate));
  std::mt19937_64 random(options.seed);
  std::uniform_real_distribution<float> uniform(0, 1);
  const int n = options.samples;
  auto draw = [&] {
    auto u = torch::empty({n});
    for (auto& x : std::span(u.data_ptr<float>(), n)) x = uniform(random);
    return u;
  };
  std::map<std::vector<int>, double> timed;  // step 2's cache
  auto time_of = [&](const std::vector<int>& counts) {
    auto [it, fresh] = timed.try_emplace(counts, 0.0);
    if (fresh) it->second = step_s(counts);
    return it->second;
  };
  PlacementSearchResult result;
  result.step_s = std::numeric_limits<double>::infinity();
  for (int it = 0; it < options.iterations; ++it) {
    torch::Tensor cuts;
    torch::AutoGradMode on(true);
    const auto log_prob = place(theta, n, layers, stages, draw, cuts);
    auto reward = torch::empty({n}, torch::kDouble);
    for (int i = 0; i < n; ++i) {
      const auto counts = counts_of(cuts[i], stages);
      const double t = time_of(counts);
      reward[i] = -std::log(t);
      if (t < result.step_s) result = {counts, t, {}, 0, 0};
    }
    // 2. The batch's mean as the baseline, its spread as the scale.
    const auto spread = reward.std(/*unbiased=*/false).item<double>();
    const auto advantage = ((reward - reward.mean()) / (spread + 1e-12)).to(torch::kFloat);
    // 3.
    adam.zero_grad();
    (-(advantage * log_prob).mean()).backward();
    adam.step();
  }
  torch::Tensor cuts;
  place(theta, 1, layers, stages, {}, cuts);
  result.most_likely = counts_of(cuts[0], stages);
  result.most_likely_step_s = time_of(result.most_likely);
  result.placements_timed = static_cast<int>(timed.size());
  return result;
}

}  // namespace distml::rl
