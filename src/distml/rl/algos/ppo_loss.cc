#include "distml/rl/algos/ppo_loss.h"

#include <cmath>
#include <limits>

#include "distml/rl/algos/common.h"

namespace distml::rl {
namespace {

// The statistics of the columns of `rows` [n, w] alone, two-pass in float64.
RunningMeanStd statistics_of(const torch::Tensor& rows) {
  const torch::Tensor x = rows.detach().to(torch::kDouble).reshape({rows.size(0), -1});
  const auto w = static_cast<std::size_t>(x.size(1));
  std::vector<double> packed(RunningMeanStd::packed_size(w), 0.0);
  packed[0] = static_cast<double>(x.size(0));
  if (x.size(0) > 0) {
    const torch::Tensor mean = x.mean(0);
    const torch::Tensor m2 = (x - mean).pow(2).sum(0);
    for (std::size_t i = 0; i < w; ++i) {
      packed[1 + i] = mean[static_cast<std::int64_t>(i)].item<double>();
      packed[1 + w + i] = m2[static_cast<std::int64_t>(i)].item<double>();
    }
  }
  return RunningMeanStd::unpack(packed, w);
}

AdvantageScale scale_of(const RunningMeanStd& s) {
  if (s.count() < 2) return {s.count(), 0, 1};
  // torch's std, which CleanRL normalises with: unbiased.
  const double unbiased = s.variance()[0] * s.count() / (s.count() - 1);
  return {s.count(), s.mean()[0], std::sqrt(unbiased)};
}

}  // namespace

RunningMeanStd merged_over_ranks(const torch::Tensor& rows, comm::Communicator& comm) {
  const RunningMeanStd mine = statistics_of(rows);
  if (comm.size() == 1) return mine;
  const std::vector<double> packed = mine.pack();
  std::vector<double> all(packed.size() * static_cast<std::size_t>(comm.size()));
  comm.allgather(comm::cview(packed), comm::view(all));
  RunningMeanStd merged(mine.width());
  for (int r = 0; r < comm.size(); ++r)
    merged.merge(RunningMeanStd::unpack(
        std::span<const double>(all).subspan(r * packed.size(), packed.size()), mine.width()));
  return merged;
}

AdvantageScale global_advantage_scale(const torch::Tensor& advantages, comm::Communicator& comm) {
  return scale_of(merged_over_ranks(advantages, comm));
}

PpoLoss ppo_loss(ActorCriticImpl& net, const PpoBatch& b, const torch::Tensor& idx,
                 const AlgoConfig& algo, std::optional<AdvantageScale> scale) {
  const auto out = net.forward(b.observations.index_select(0, idx));
  const auto log_p = net.log_prob(out.policy, b.actions.index_select(0, idx));
  const auto log_ratio = log_p - b.log_probs.index_select(0, idx);
  const auto ratio = torch::exp(log_ratio);
  double clip_fraction = 0, approx_kl = 0, old_approx_kl = 0;
  {
    torch::NoGradGuard no_grad;
    approx_kl = ((ratio - 1) - log_ratio).mean().item<double>();
    old_approx_kl = (-log_ratio).mean().item<double>();
    if (algo.clip > 0)
      clip_fraction = ((ratio - 1).abs() > algo.clip).to(torch::kDouble).mean().item<double>();
  }
  auto adv = b.advantages.index_select(0, idx);
  if (algo.normalize_advantages) {
    const AdvantageScale s = scale ? *scale : scale_of(statistics_of(adv));
    if (s.count >= 2) adv = (adv - s.mean) / (s.std + 1e-8);
  }
  torch::Tensor policy_loss;
  if (algo.clip > 0) {
    const auto clipped = torch::clamp(ratio, 1 - algo.clip, 1 + algo.clip);
    policy_loss = -torch::min(ratio * adv, clipped * adv).mean();
  } else {
    policy_loss = -(ratio * adv).mean();
  }
  const auto returns = b.returns.index_select(0, idx);
  const auto v = out.value;
  torch::Tensor value_loss = (v - returns).pow(2);
  if (algo.value_clip > 0) {
    const auto old_v = b.values.index_select(0, idx);
    const auto v_clipped = old_v + torch::clamp(v - old_v, -algo.value_clip, algo.value_clip);
    value_loss = torch::max(value_loss, (v_clipped - returns).pow(2));
  }
  value_loss = 0.5 * value_loss.mean();
  const auto entropy = net.entropy(out.policy).mean();
  return {policy_loss + algo.value_coef * value_loss - algo.entropy * entropy,
          policy_loss.item<double>(),
          value_loss.item<double>(),
          entropy.item<double>(),
          clip_fraction,
          approx_kl,
          old_approx_kl};
}

PpoLoss ppo_minibatch_gradient(ActorCriticImpl& net, const PpoBatch& batch,
                               const torch::Tensor& indices, const AlgoConfig& algo,
                               comm::Communicator& comm, Timeline::Lane* lane) {
  std::optional<AdvantageScale> scale;
  if (algo.normalize_advantages)
    scale = global_advantage_scale(batch.advantages.index_select(0, indices), comm);
  PpoLoss loss = ppo_loss(net, batch, indices, algo, scale);
  net.zero_grad();
  loss.total.backward();
  std::vector<double> numbers = {loss.policy,        loss.value,     loss.entropy,
                                 loss.clip_fraction, loss.approx_kl, loss.old_approx_kl};
  {
    Span sync(lane, "grad_sync");
    average_gradients(net, comm, &numbers);
  }
  loss.policy = numbers[0];
  loss.value = numbers[1];
  loss.entropy = numbers[2];
  loss.clip_fraction = numbers[3];
  loss.approx_kl = numbers[4];
  loss.old_approx_kl = numbers[5];
  return loss;
}

double explained_variance(const PpoBatch& batch, comm::Communicator& comm) {
  const RunningMeanStd s =
      merged_over_ranks(torch::stack({batch.returns, batch.returns - batch.values}, 1), comm);
  const std::vector<double> var = s.variance();
  if (s.count() == 0 || var[0] == 0) return std::numeric_limits<double>::quiet_NaN();
  return 1 - var[1] / var[0];
}

}  // namespace distml::rl
