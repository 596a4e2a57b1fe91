// A3C (Mnih et al. 2016) across ranks. Rank 0 holds the parameters and the optimizer; every
// other rank is an actor-learner:
//  1. collect T steps from its K copies with its copy of the parameters (version v);
//  2. compute the actor-critic gradient on them (n-step returns) and send it, tagged v, with the
//     normalisation statistics it counted;
//  3. wait for rank 0's answer: the parameters (and shared statistics) after applying that
//     gradient (or `stop`).
// Rank 0 applies gradients in arrival order, so workers never wait for each other; a gradient
// from version v applied at version u is u - v updates stale (reported as policy lag).
#include <thread>

#include "distml/core/error.h"
#include "distml/rl/actor_roster.h"
#include "distml/rl/algos/algorithm.h"
#include "distml/rl/algos/common.h"
#include "distml/rl/policy_state.h"
#include "distml/rl/returns.h"
#include "distml/rl/rollout.h"
#include "distml/rl/run_monitor.h"

namespace distml::rl {
namespace {

constexpr std::size_t kEpisodeFloats = 2;  // finished return sum, finished episodes

// The actor-critic loss of a rollout under the current parameters.
torch::Tensor a3c_loss(ActorCriticImpl& net, const Rollout& r, const AlgoConfig& algo) {
  const auto steps = r.rewards.size(0), copies = r.rewards.size(1), n = steps * copies;
  const auto out = net.forward(r.observations.slice(0, 0, steps).reshape({n, -1}));
  const auto values = out.value.reshape({steps, copies});
  torch::Tensor bootstrap;
  {
    torch::NoGradGuard no_grad;
    bootstrap = net.forward(r.observations[steps]).value;
  }
  const Advantages a = gae(r.rewards, values.detach(), bootstrap, r.discounts, algo.lambda);
  const auto log_p = net.log_prob(out.policy, r.actions.reshape({n, -1}));
  const auto policy_loss = -(log_p * a.advantages.reshape({n})).mean();
  const auto value_loss = 0.5 * (a.returns - values).pow(2).mean();
  const auto entropy = net.entropy(out.policy).mean();
  return policy_loss + algo.value_coef * value_loss - algo.entropy * entropy;
}

void run_worker(const RlConfig& config, comm::Communicator& comm, Timeline* timeline) {
  Timeline::Lane* lane = lane_of(timeline, "actor");
  ActorCritic net = make_actor_critic(config);
  VectorEnv envs = make_actor_envs(config, comm.rank());
  Normalizer normalizer = make_normalizer(config);
  ActionSampler sampler(config.run.seed * 7919 + static_cast<std::uint64_t>(comm.rank()));
  MessageListener from_holder(comm, 0, Channel::from_learner,
                              exact_size(MessageKind::parameters, policy_floats(*net, &normalizer)));
  std::uint64_t version = 0;
  for (std::int64_t sent = 0;; ++sent) {
    if (comm.rank() == config.run.fault_actor && sent == config.run.fault_after) return;
    const Rollout r = [&] {
      Span collecting(lane, "rollout", "gradient", sent);
      return collect_rollout(*net, envs, normalizer, sampler, config.algo.unroll,
                             config.algo.gamma);
    }();
    std::vector<float> payload = [&] {
      Span computing(lane, "gradient", "gradient", sent);
      net->zero_grad();
      a3c_loss(*net, r, config.algo).backward();
      return flat_gradients(*net);
    }();
    put_doubles(payload, normalizer.take_pending());
    payload.push_back(static_cast<float>(r.finished_return_sum));
    payload.push_back(static_cast<float>(r.finished_episodes));
    send_message(comm, 0, Channel::to_learner,
                 Message{MessageKind::gradients, version,
                         static_cast<std::uint64_t>(config.algo.unroll * config.env.copies),
                         std::move(payload)});
    Span waiting(lane, "queue_wait");  // for the parameters after our gradient
    const Message answer = from_holder.take();
    if (answer.kind == MessageKind::stop) return;
    unpack_policy(answer.payload, *net, &normalizer);
    version = answer.version;
  }
}

RunResult run_holder(const RlConfig& config, comm::Communicator& comm, const RunHooks& hooks) {
  ActorCritic net = make_actor_critic(config);
  auto optimizer = make_optimizer(config, *net);
  Normalizer normalizer = make_normalizer(config);
  LearnerCounters counters = resume_if_asked(config, *net, *optimizer, &normalizer);
  const std::int64_t resumed_updates = counters.update;
  const std::size_t n_params = parameter_count(*net);
  const std::size_t n_stats = 2 * normalizer.packed_size();  // floats of a worker's statistics
  std::vector<int> workers;
  for (int r = 1; r < comm.size(); ++r) workers.push_back(r);
  ActorRoster roster(comm, workers, Channel::to_learner,
                     exact_size(MessageKind::gradients, n_params + n_stats + kEpisodeFloats), config,
                     hooks);
  // Evaluations run beside the gradient handler, on a snapshot: every worker waits for its
  // answer, so an evaluation inside the handler would stall them all.
  RunMonitor monitor(
      config, hooks, [&] { return greedy_snapshot(config, net, normalizer); },
      [&] { return save_learner_state({*net, *optimizer, &normalizer}, counters); },
      RunMonitor::Evaluations::beside);
  const std::int64_t steps_per_gradient = config.algo.unroll * config.env.copies;
  const std::int64_t total_updates = config.run.env_steps / steps_per_gradient;
  double lag_sum = 0;
  std::int64_t lag_max = 0;
  bool stopping = false;
  Timeline::Lane* lane = lane_of(hooks.timeline, "learner");
  auto on_gradient = [&](int rank, Message m) {
    Span updating(lane, "update", "rank", rank);
    if (stopping) {  // the run is over: answer the gradient with stop
      send_message(comm, rank, Channel::from_learner, Message{MessageKind::stop, 0, 0, {}});
      roster.remove(rank);
      return;
    }
    const std::int64_t lag = counters.update - static_cast<std::int64_t>(m.version);
    lag_sum += static_cast<double>(lag);
    lag_max = std::max(lag_max, lag);
    const std::span<const float> payload(m.payload);
    normalizer.merge_pending(
        get_doubles(payload.subspan(n_params, n_stats), normalizer.packed_size()));
    monitor.add_episodes(payload[n_params + n_stats],
                         static_cast<std::int64_t>(payload[n_params + n_stats + 1]));
    set_annealed_lr(*optimizer, config, counters.update, total_updates);
    load_flat_gradients(*net, payload.first(n_params));
    clip_gradients(*net, config.algo.max_grad_norm);
    optimizer->step();
    ++counters.update;
    counters.env_steps += static_cast<std::int64_t>(m.extra);
    send_message(comm, rank, Channel::from_learner,
                 Message{MessageKind::parameters, static_cast<std::uint64_t>(counters.update), 0,
                         pack_policy(*net, &normalizer)});
    stopping = monitor.after_update(counters.update, counters.env_steps,
                                    {{"policy_lag", lag}, {"lr", current_lr(*optimizer)}}) ||
               counters.env_steps >= config.run.env_steps;
  };
  while (!roster.live().empty())
    if (roster.poll(on_gradient) == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));

  RunResult result = monitor.finish(counters.update, counters.env_steps);
  const std::int64_t applied = counters.update - resumed_updates;
  result.report["policy_lag_mean"] = applied ? lag_sum / applied : 0.0;
  result.report["policy_lag_max"] = lag_max;
  result.report["actors"] = workers.size();
  result.report["actors_lost"] = roster.lost();
  return result;
}

}  // namespace

RunResult run_a3c(const RlConfig& config, comm::Communicator& comm, const RunHooks& hooks) {
  if (comm.size() < 2)
    throw UsageError("a3c needs at least 2 ranks (a parameter holder and a worker): --np 2+");
  prepare_rank(config);
  if (comm.size() == 2 && comm.rank() == 0)
    hooks.event({{"event", "note"},
                 {"message",
                  "a3c at 2 ranks has one worker, so nothing runs asynchronously (one worker "
                  "and its parameter holder take turns); use --np 3 or more"}});
  if (comm.rank() != 0) {
    run_worker(config, comm, hooks.timeline);
    return {};
  }
  return run_holder(config, comm, hooks);
}

}  // namespace distml::rl
