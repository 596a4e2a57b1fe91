#include "distml/rl/rollout.h"

#include "distml/core/error.h"

namespace distml::rl {

Rollout collect_rollout(ActorCriticImpl& net, VectorEnv& envs, Normalizer& normalizer,
                        ActionSampler& sampler, std::int64_t steps, double gamma) {
  DML_CHECK(steps >= 1, "a rollout of no steps");
  torch::NoGradGuard no_grad;
  const std::int64_t k = envs.copies(), obs = envs.observation_size();
  const std::int64_t act = envs.action_space().size();
  const int groups = envs.groups();
  // Per group, per step: what the policy saw and did, [group's copies, ...].
  std::vector<std::vector<torch::Tensor>> observations(groups), actions(groups), log_probs(groups),
      values(groups);
  std::vector<float> rewards(steps * k), discounts(steps * k);  // [T x K]
  // Group g's step t has ended: its rewards, scaled, with the truncation bootstrap.
  auto record = [&](int g, std::int64_t t) {
    const VectorEnv::Step& s = envs.finish_step(g);
    const auto [first, count] = envs.group(g);
    std::vector<float> scaled(s.rewards.begin() + first, s.rewards.begin() + first + count);
    std::vector<std::uint8_t> ended(count);
    for (int i = 0; i < count; ++i) ended[i] = s.terminated[first + i] || s.truncated[first + i];
    normalizer.scale_rewards(scaled, ended, first);
    for (int i = 0; i < count; ++i) {
      const std::int64_t c = first + i;
      double reward = scaled[i];
      if (s.truncated[c] && !s.terminated[c]) {
        std::vector<float> last(s.final_observations.begin() + c * obs,
                                s.final_observations.begin() + (c + 1) * obs);
        normalizer.normalize(last);
        reward += gamma * net.forward(as_tensor(last, obs)).value.item<float>();
      }
      rewards[t * k + c] = static_cast<float>(reward);
      discounts[t * k + c] = ended[i] ? 0.0f : static_cast<float>(gamma);
    }
  };
  // Group g's observation rows, from `envs`.
  auto rows_of = [&](int g) {
    const auto [first, count] = envs.group(g);
    const auto begin = envs.observations().begin() + first * obs;
    return std::vector<float>(begin, begin + count * obs);
  };
  // With two groups, one steps on the workers while the other's actions are computed.
  for (std::int64_t t = 0; t < steps; ++t) {
    for (int g = 0; g < groups; ++g) {
      if (t > 0) record(g, t - 1);
      std::vector<float> seen = rows_of(g);
      normalizer.observe(seen);
      const auto o = as_tensor(seen, obs);
      const auto out = net.forward(o);
      const std::vector<float> a = sampler.sample(net, out.policy);
      const auto a_tensor = as_tensor(a, act);
      observations[g].push_back(o);
      actions[g].push_back(a_tensor);
      log_probs[g].push_back(net.log_prob(out.policy, a_tensor));
      values[g].push_back(out.value);
      envs.start_step(g, net.env_actions(a));
    }
  }
  for (int g = 0; g < groups; ++g) {
    record(g, steps - 1);
    std::vector<float> next = rows_of(g);  // counted when the next rollout acts on it
    normalizer.normalize(next);
    observations[g].push_back(as_tensor(next, obs));
  }
  // Each field: the groups' [T, count, ...] side by side.
  auto join = [](const std::vector<std::vector<torch::Tensor>>& parts) {
    std::vector<torch::Tensor> stacked;
    for (const auto& p : parts) stacked.push_back(torch::stack(p));
    return torch::cat(stacked, 1);
  };
  Rollout r{join(observations), join(actions),         join(log_probs),
            join(values),       as_tensor(rewards, k), as_tensor(discounts, k)};
  const VectorEnv::Finished finished = envs.take_finished();
  for (double ret : finished.returns) r.finished_return_sum += ret;
  r.finished_episodes = static_cast<std::int64_t>(finished.returns.size());
  return r;
}

std::size_t RolloutShape::floats() const {
  const auto t = static_cast<std::size_t>(steps), k = static_cast<std::size_t>(copies);
  return (t + 1) * k * observation_size + t * k * (action_size + 4) + 2;
}

RolloutShape shape_of(const VectorEnv& envs, std::int64_t steps) {
  return {steps, envs.copies(), envs.observation_size(), envs.action_space().size()};
}

namespace {

// The tensors of a rollout in message order.
std::vector<torch::Tensor*> fields(Rollout& r) {
  return {&r.observations, &r.actions, &r.log_probs, &r.values, &r.rewards, &r.discounts};
}

}  // namespace

std::vector<float> pack(const Rollout& rollout) {
  Rollout r = rollout;
  std::vector<float> out;
  for (torch::Tensor* t : fields(r)) {
    const auto c = t->contiguous();
    out.insert(out.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  out.push_back(static_cast<float>(r.finished_return_sum));
  out.push_back(static_cast<float>(r.finished_episodes));
  return out;
}

Rollout unpack(std::span<const float> flat, const RolloutShape& s) {
  DML_CHECK_EQ(flat.size(), s.floats(), "unroll size");
  Rollout r;
  const std::vector<std::vector<std::int64_t>> shapes = {
      {s.steps + 1, s.copies, s.observation_size},
      {s.steps, s.copies, s.action_size},
      {s.steps, s.copies},
      {s.steps, s.copies},
      {s.steps, s.copies},
      {s.steps, s.copies}};
  std::size_t at = 0;
  auto targets = fields(r);
  for (std::size_t i = 0; i < targets.size(); ++i) {
    auto t = torch::from_blob(const_cast<float*>(flat.data() + at), shapes[i], torch::kFloat);
    *targets[i] = t.clone();
    at += static_cast<std::size_t>(t.numel());
  }
  r.finished_return_sum = flat[at];
  r.finished_episodes = static_cast<std::int64_t>(flat[at + 1]);
  return r;
}

Rollout concatenate(const std::vector<Rollout>& rollouts) {
  DML_CHECK(!rollouts.empty(), "no rollouts to concatenate");
  Rollout out;
  for (std::size_t f = 0; f < 6; ++f) {
    std::vector<torch::Tensor> parts;
    for (const Rollout& r : rollouts) parts.push_back(*fields(const_cast<Rollout&>(r))[f]);
    *fields(out)[f] = torch::cat(parts, 1);
  }
  for (const Rollout& r : rollouts) {
    out.finished_return_sum += r.finished_return_sum;
    out.finished_episodes += r.finished_episodes;
  }
  return out;
}

}  // namespace distml::rl
