// IMPALA (Espeholt et al. 2018). Rank 0 is the learner, every other rank an actor.
//
//  1. An actor runs its K copies for T steps with the parameters it has (the behaviour
//     policy), sends the unroll (with the parameters' version) and starts the next unroll at
//     once. It waits only when impala.max_unrolls_ahead of its unrolls are sent but not yet
//     trained on (the learner's queue is bounded, as in the paper); each parameters message
//     says how many of the actor's unrolls the learner has consumed.
//  2. Before each unroll the actor takes whatever parameters have arrived (never waits).
//  3. The learner queues unrolls as they arrive, trains on batches of impala.batch_unrolls with
//     V-trace targets and policy gradient, and sends the new parameters to every actor whose
//     previous copy has been delivered. Policy lag = learner version - unroll version.
//  4. At the end the learner sends `stop`; each actor finishes its last send and answers
//     `stop` with its steps/s, which the learner waits for (dropping late unrolls).
// With impala.solo_unrolls > 0, each actor first runs that many unrolls without sending
// (the learner idle): its steps/s then is the "alone" rate of the decoupling measurement.
#include <thread>

#include "distml/core/error.h"
#include "distml/rl/actor_roster.h"
#include "distml/rl/algos/algorithm.h"
#include "distml/rl/algos/common.h"
#include "distml/rl/algos/impala_loss.h"
#include "distml/rl/learner_inbox.h"
#include "distml/rl/parameter_sender.h"
#include "distml/rl/policy_state.h"
#include "distml/rl/rollout.h"
#include "distml/rl/run_monitor.h"

namespace distml::rl {
namespace {

constexpr std::uint64_t kActorStatsFloats = 2;  // steps/s alone, steps/s with the learner

SizeCheck unroll_or_stop(std::uint64_t unroll_floats) {
  return [unroll_floats](MessageKind kind, std::uint64_t floats) {
    if (kind == MessageKind::stop && floats == kActorStatsFloats) return;
    if (kind != MessageKind::unroll)
      throw CommError(cat("expected an unroll, got a ", kind_name(kind), " message"));
    if (floats != unroll_floats)
      throw CommError(cat("an unroll of ", floats, " floats, expected ", unroll_floats));
  };
}

void run_actor(const RlConfig& config, comm::Communicator& comm, Timeline* timeline) {
  Timeline::Lane* lane = lane_of(timeline, "actor");
  ActorCritic net = make_actor_critic(config);
  VectorEnv envs = make_actor_envs(config, comm.rank());
  Normalizer normalizer = make_normalizer(config);
  ActionSampler sampler(config.run.seed * 7919 + static_cast<std::uint64_t>(comm.rank()));
  LearnerInbox learner(comm, *net, &normalizer);
  const auto& algo = config.algo;

  const auto solo_start = Clock::now();
  for (std::int64_t i = 0; i < config.impala.solo_unrolls; ++i)
    collect_rollout(*net, envs, normalizer, sampler, algo.unroll, algo.gamma);
  const double solo_s = seconds_since(solo_start);
  const double solo_rate =
      solo_s > 0 ? config.impala.solo_unrolls * algo.unroll * config.env.copies / solo_s : 0;

  std::optional<PendingSend> in_flight;
  std::int64_t sent = 0, steps = 0;
  auto queued = [&] { return sent - static_cast<std::int64_t>(learner.counter()); };
  const auto start = Clock::now();
  for (learner.poll(); !learner.stopped(); learner.poll()) {
    if (comm.rank() == config.run.fault_actor && sent == config.run.fault_after) {
      if (in_flight) in_flight->wait();
      return;  // fault injection: vanish without a goodbye
    }
    const std::uint64_t behaviour_version = learner.version();
    Rollout r = [&] {
      Span collecting(lane, "rollout", "unroll", sent);
      return collect_rollout(*net, envs, normalizer, sampler, algo.unroll, algo.gamma);
    }();
    steps += algo.unroll * config.env.copies;
    {
      Span waiting(lane, "queue_wait");  // the previous send, and room in the learner's queue
      if (in_flight) learner.wait_for(*in_flight, 0);
      learner.wait_until([&] { return queued() < config.impala.max_unrolls_ahead; },
                         "the learner (rank 0) used none of its queued unrolls");
    }
    if (learner.stopped()) break;
    std::vector<float> payload = pack(r);
    put_doubles(payload, normalizer.take_pending());
    in_flight.emplace(comm, 0, Channel::to_learner,
                      Message{MessageKind::unroll, behaviour_version,
                              static_cast<std::uint64_t>(algo.unroll * config.env.copies),
                              std::move(payload)});
    ++sent;
  }
  // The learner sends nothing after `stop`; it keeps receiving until our goodbye.
  if (in_flight) in_flight->wait();
  const double rate = steps / std::max(seconds_since(start), 1e-9);
  send_message(comm, 0, Channel::to_learner,
               Message{MessageKind::stop,
                       learner.version(),
                       0,
                       {static_cast<float>(solo_rate), static_cast<float>(rate)}});
}

struct Unroll {
  Rollout rollout;
  std::uint64_t version;
  int actor;
};

RunResult run_learner(const RlConfig& config, comm::Communicator& comm, const RunHooks& hooks) {
  ActorCritic net = make_actor_critic(config);
  auto optimizer = make_optimizer(config, *net);
  Normalizer normalizer = make_normalizer(config);
  LearnerCounters counters = resume_if_asked(config, *net, *optimizer, &normalizer);
  const RolloutShape shape = shape_of(make_actor_envs(config, 0), config.algo.unroll);
  const std::size_t n_stats = 2 * normalizer.packed_size();  // floats of an actor's statistics
  std::vector<int> actors;
  for (int r = 1; r < comm.size(); ++r) actors.push_back(r);
  ActorRoster roster(comm, actors, Channel::to_learner, unroll_or_stop(shape.floats() + n_stats),
                     config, hooks);
  ParameterSender parameters(comm);
  std::map<int, std::uint64_t> consumed, consumed_told;  // per actor: unrolls trained on
  // Sends the parameters to every actor that has taken its previous copy, when they are newer
  // or it has credit to learn about.
  std::int64_t sent_version = -1;
  auto push_parameters = [&] {
    std::vector<float> flat;
    for (int r : roster.live()) {
      if (sent_version == counters.update && consumed_told[r] == consumed[r]) continue;
      if (!parameters.delivered(r)) continue;  // the actor is behind
      if (flat.empty()) flat = pack_policy(*net, &normalizer);
      parameters.send(r, flat, static_cast<std::uint64_t>(counters.update), consumed[r]);
      consumed_told[r] = consumed[r];
    }
    if (!flat.empty()) sent_version = counters.update;
  };
  if (!config.run.resume.empty()) push_parameters();

  RunMonitor monitor(
      config, hooks, [&] { return greedy_policy(net, normalizer); },
      [&] { return save_learner_state({*net, *optimizer, &normalizer}, counters); });
  std::deque<Unroll> queue;
  std::map<int, std::array<float, 2>> actor_rates;
  auto on_message = [&](int rank, Message m) {
    if (m.kind == MessageKind::stop) {  // an actor's goodbye (only after our stop)
      actor_rates[rank] = {m.payload[0], m.payload[1]};
      roster.remove(rank);
      return;
    }
    counters.env_steps += static_cast<std::int64_t>(m.extra);
    const std::span<const float> payload(m.payload);
    normalizer.merge_pending(get_doubles(payload.subspan(shape.floats()), normalizer.packed_size()));
    queue.push_back({unpack(payload.first(shape.floats()), shape), m.version, rank});
  };
  double lag_sum = 0;
  std::int64_t lag_max = 0, lag_count = 0;
  const std::int64_t batch = config.impala.batch_unrolls;
  // The learning rate anneals over the env steps trained on, as TorchBeast's IMPALA does.
  const std::int64_t steps_per_update = batch * config.algo.unroll * config.env.copies;
  bool solved = false;
  Timeline::Lane* lane = lane_of(hooks.timeline, "learner");
  std::optional<Clock::time_point> waiting_since;  // for a batch of unrolls
  while (counters.env_steps < config.run.env_steps && !solved) {
    if (static_cast<std::int64_t>(queue.size()) < batch && lane && !waiting_since)
      waiting_since = Clock::now();
    if (roster.poll(on_message) == 0 && static_cast<std::int64_t>(queue.size()) < batch) {
      push_parameters();  // credit that could not be told before
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    if (static_cast<std::int64_t>(queue.size()) < batch) continue;
    if (waiting_since) lane->add("queue_wait", *waiting_since, Clock::now());
    waiting_since.reset();
    Span updating(lane, "update", "update", counters.update);
    std::vector<Rollout> parts;
    for (std::int64_t i = 0; i < batch; ++i) {
      const std::int64_t lag = counters.update - static_cast<std::int64_t>(queue.front().version);
      lag_sum += static_cast<double>(lag);
      lag_max = std::max(lag_max, lag);
      ++lag_count;
      monitor.add_episodes(queue.front().rollout.finished_return_sum,
                           queue.front().rollout.finished_episodes);
      ++consumed[queue.front().actor];
      parts.push_back(std::move(queue.front().rollout));
      queue.pop_front();
    }
    const Rollout b = concatenate(parts);
    VTraceLoss loss = vtrace_loss(*net, b, config);
    optimizer->zero_grad();
    loss.total.backward();
    clip_gradients(*net, config.algo.max_grad_norm);
    set_annealed_lr(*optimizer, config, counters.update * steps_per_update, config.run.env_steps);
    optimizer->step();
    ++counters.update;
    push_parameters();
    solved = monitor.after_update(counters.update, counters.env_steps,
                                  {{"policy_loss", loss.policy},
                                   {"baseline_loss", loss.baseline},
                                   {"entropy", loss.entropy},
                                   {"mean_rho", loss.mean_rho},
                                   {"policy_lag", lag_count ? lag_sum / lag_count : 0.0},
                                   {"queued_unrolls", queue.size()},
                                   {"lr", current_lr(*optimizer)}});
  }

  // Stop every live actor, then wait for each goodbye (late unrolls are dropped).
  for (int r : roster.live()) {
    while (roster.is_live(r) && !parameters.delivered(r))
      if (roster.poll(on_message) == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (roster.is_live(r))
      send_message(comm, r, Channel::from_learner, Message{MessageKind::stop, 0, 0, {}});
  }
  while (!roster.live().empty())
    if (roster.poll(on_message) == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));

  RunResult result = monitor.finish(counters.update, counters.env_steps);
  double alone = 0, with_learner = 0;
  for (const auto& [rank, rates] : actor_rates) {
    alone += rates[0] / actor_rates.size();
    with_learner += rates[1] / actor_rates.size();
  }
  result.report["policy_lag_mean"] = lag_count ? lag_sum / lag_count : 0.0;
  result.report["policy_lag_max"] = lag_max;
  result.report["actors"] = actors.size();
  result.report["actors_lost"] = roster.lost();
  result.report["actor_steps_per_sec"] = with_learner;
  if (config.impala.solo_unrolls > 0) {
    result.report["actor_steps_per_sec_alone"] = alone;
    result.report["decoupling_ratio"] = alone > 0 ? with_learner / alone : 0.0;
  }
  return result;
}

}  // namespace

RunResult run_impala(const RlConfig& config, comm::Communicator& comm, const RunHooks& hooks) {
  if (comm.size() < 2)
    throw UsageError("impala needs at least 2 ranks (a learner and an actor): use --np 2 or more");
  prepare_rank(config);
  if (comm.rank() != 0) {
    run_actor(config, comm, hooks.timeline);
    return {};
  }
  return run_learner(config, comm, hooks);
}

}  // namespace distml::rl
