// The Ape-X learner (apex_roles.h, steps 3 and 4).
#include <thread>

#include "distml/rl/algos/apex_roles.h"
#include "distml/rl/algos/common.h"
#include "distml/rl/parameter_sender.h"
#include "distml/rl/run_monitor.h"

namespace distml::rl::apex {

RunResult run_learner(const RlConfig& config, comm::Communicator& comm, const RunHooks& hooks,
                      const Roles& roles) {
  const ApexConfig& c = config.apex;
  const Layout layout = layout_of(config);
  auto agent = make_apex_learner(config);
  LearnerCounters counters = resume_if_asked(config, agent->networks(), agent->optimizer());
  agent->reset_targets();
  const std::int64_t resumed_env_steps = counters.env_steps;  // the replay counts from 0
  const std::size_t sample_floats = Sample::floats(layout, static_cast<std::size_t>(c.batch_size));
  MessageListener from_replay(comm, roles.replay, Channel::from_replay,
                              [&](MessageKind kind, std::uint64_t floats) {
                                if (kind == MessageKind::stop && floats == ReplayStats::kFloats)
                                  return;
                                exact_size(MessageKind::sample, sample_floats)(kind, floats);
                              });
  ParameterSender parameters(comm);
  auto push_parameters = [&] {
    const std::vector<float> flat = flat_parameters(agent->networks());
    for (int r : roles.actors)
      parameters.send(r, flat, static_cast<std::uint64_t>(counters.update));
  };
  if (!config.run.resume.empty()) push_parameters();
  auto beta = [&] {  // annealed linearly from apex.beta to 1 over the run's environment steps
    const double done =
        std::min(1.0, static_cast<double>(counters.env_steps) / config.run.env_steps);
    return c.beta + (1 - c.beta) * done;
  };
  auto request = [&] {
    send_message(comm, roles.replay, Channel::to_replay, SampleRequest{beta()}.pack());
  };
  RunMonitor monitor(
      config, hooks, [&] { return agent->greedy(); },
      [&] { return save_learner_state({agent->networks(), agent->optimizer()}, counters); });
  request();
  bool solved = false;
  std::uint64_t replay_size = 0;
  for (;;) {
    const Sample sample = Sample::unpack(from_replay.take(), layout);
    counters.env_steps = resumed_env_steps + sample.env_steps;
    replay_size = sample.replay_size;
    monitor.add_episodes(sample.episodes.return_sum, sample.episodes.count);
    if (solved || counters.env_steps >= config.run.env_steps) break;
    request();  // one ahead: the replay samples while this batch trains

    // Annealed over the env steps, as the importance exponent is: the learner's steps per env
    // step vary with the actors' pace.
    set_annealed_lr(agent->optimizer(), config, counters.env_steps, config.run.env_steps);
    const ApexLearnerAgent::Update update = agent->train(
        TransitionBatch::of(sample.batch, layout), torch::tensor(sample.batch.weights));
    ++counters.update;
    const auto p = update.priorities.contiguous();
    send_message(comm, roles.replay, Channel::to_replay,
                 Priorities{sample.batch.indices,
                            {p.data_ptr<float>(), p.data_ptr<float>() + p.numel()}}
                     .pack());
    if (counters.update % c.param_push == 0) push_parameters();
    nlohmann::json fields = update.fields;
    fields["replay_size"] = replay_size;
    fields["beta"] = beta();
    fields["lr"] = current_lr(agent->optimizer());
    solved = monitor.after_update(counters.update, counters.env_steps, fields);
  }

  // The replay has answered every request (the last one above); stop it, then the actors.
  send_message(comm, roles.replay, Channel::to_replay, Message{MessageKind::stop, 0, 0, {}});
  // A lost actor never takes its last parameters: give each at most run.actor_timeout_s.
  for (int r : roles.actors) {
    const auto since = Clock::now();
    while (!parameters.delivered(r) && seconds_since(since) < config.run.actor_timeout_s)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    send_message(comm, r, Channel::from_learner, Message{MessageKind::stop, 0, 0, {}});
  }
  // The replay's goodbye, after its actors' ones.
  const ReplayStats stats = ReplayStats::unpack(from_replay.take());
  RunResult result = monitor.finish(counters.update, counters.env_steps);
  result.report["actors"] = roles.actors.size();
  result.report.update(agent->exploration(static_cast<int>(roles.actors.size())));
  result.report["replay_size"] = replay_size;
  const double ops = stats.inserted + stats.sampled;
  result.report["replay_inserted"] = stats.inserted;
  result.report["replay_sampled"] = stats.sampled;
  result.report["replay_ops_per_sec"] = ops / std::max(stats.seconds, 1e-9);
  result.report["replay_busy_fraction"] = stats.busy_seconds / std::max(stats.seconds, 1e-9);
  result.report["replay_capacity_ops_per_sec"] = ops / std::max(stats.busy_seconds, 1e-9);
  return result;
}

}  // namespace distml::rl::apex
