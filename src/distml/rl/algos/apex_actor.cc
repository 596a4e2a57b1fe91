// An Ape-X actor (apex_roles.h, step 1).
#include <optional>

#include "distml/rl/algos/apex_roles.h"
#include "distml/rl/algos/common.h"
#include "distml/rl/learner_inbox.h"

namespace distml::rl::apex {

void run_actor(const RlConfig& config, comm::Communicator& comm, int index, const Roles& roles) {
  const ApexConfig& c = config.apex;
  const Layout layout = layout_of(config);
  const int actors = static_cast<int>(roles.actors.size());
  auto agent = make_apex_actor(config, index, actors,
                               config.run.seed * 7919 + static_cast<std::uint64_t>(comm.rank()));
  VectorEnv envs = make_actor_envs(config, comm.rank());
  LearnerInbox learner(comm, agent->networks());
  std::vector<NStepWindow> windows(envs.copies(),
                                   NStepWindow(static_cast<int>(c.n_step), config.algo.gamma));
  Transitions ready;
  std::optional<PendingSend> in_flight;
  std::int64_t steps = 0, sent = 0;
  // With apex.env_steps_per_update, this actor's share of the steps the learner's progress
  // allows (parameters arrive every param_push updates, hence the look-ahead), plus the steps
  // an actor holds before they reach the replay: the n-step windows and a batch.
  const double held_back = static_cast<double>(envs.copies() * c.n_step + c.actor_batch);
  auto throttled = [&] {
    if (c.env_steps_per_update <= 0) return false;
    const double allowed =
        (c.learning_starts + (learner.version() + c.param_push) * c.env_steps_per_update) /
            static_cast<double>(actors) +
        held_back;
    return static_cast<double>(steps) >= allowed;
  };
  auto send_ready = [&] {
    const auto p = agent->priorities(TransitionBatch::of(ready.items, layout)).contiguous();
    ready.priorities.assign(p.data_ptr<float>(), p.data_ptr<float>() + p.numel());
    const VectorEnv::Finished finished = envs.take_finished();
    for (double r : finished.returns) ready.episodes.return_sum += r;
    ready.episodes.count = static_cast<std::int64_t>(finished.returns.size());
    if (in_flight) learner.wait_for(*in_flight, roles.replay);
    in_flight.emplace(comm, roles.replay, Channel::to_replay, ready.pack(layout));
    ready = {};
    ++sent;
  };
  torch::NoGradGuard no_grad;
  for (learner.poll(); !learner.stopped(); learner.poll()) {
    if (throttled()) {  // hand over what we have, then wait for the learner to catch up
      if (!ready.items.empty()) send_ready();
      learner.wait_until([&] { return !throttled(); },
                         "no new parameters from the learner (rank 0)");
      continue;
    }
    const std::vector<float> before = envs.observations();
    const std::vector<float> actions = agent->explore(as_tensor(before, layout.observation_size));
    const VectorEnv::Step& step = envs.step(actions);
    steps += envs.copies();
    ready.env_steps += envs.copies();
    const auto obs = static_cast<std::size_t>(layout.observation_size);
    const auto act = static_cast<std::size_t>(layout.action_size);
    for (std::size_t k = 0; k < static_cast<std::size_t>(envs.copies()); ++k)
      windows[k].add(std::span(before).subspan(k * obs, obs),
                     std::span(actions).subspan(k * act, act), step.rewards[k],
                     step.terminated[k], step.terminated[k] || step.truncated[k],
                     std::span(step.final_observations).subspan(k * obs, obs), ready.items);
    if (static_cast<std::int64_t>(ready.items.size()) < c.actor_batch) continue;
    if (comm.rank() == config.run.fault_actor && sent == config.run.fault_after) {
      if (in_flight) in_flight->wait();
      return;  // fault injection: vanish without a goodbye
    }
    send_ready();
  }
  if (in_flight) in_flight->wait();  // the replay receives until our goodbye
  send_message(comm, roles.replay, Channel::to_replay, Message{MessageKind::stop, 0, 0, {}});
}

}  // namespace distml::rl::apex
