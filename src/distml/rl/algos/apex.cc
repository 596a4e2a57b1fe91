// Ape-X DQN (Horgan et al. 2018). Rank 0 is the learner, the last rank the prioritised replay,
// the ranks between are actors; with 2 ranks the replay's rank also runs the one actor (in a
// second thread).
//  1. Actor i of N explores with epsilon_i = epsilon^(1 + alpha i / (N - 1)), turns its steps
//     into n-step transitions, computes their initial priorities |TD error| with its own copy
//     of the network and sends them to the replay in groups of apex.actor_batch. With
//     apex.env_steps_per_update > 0 the actors together take at most that many steps per
//     learner update (after learning_starts), so that the replay ratio does not depend on
//     how fast this machine's actors run compared with its learner.
//  2. The replay stores them (sum-tree, p^alpha) and answers each of the learner's sample
//     requests with a stratified batch and importance weights (beta from the request), once it
//     holds apex.learning_starts transitions. It also counts the actors' environment steps.
//  3. The learner keeps one request ahead (the replay samples while it trains), trains a
//     double-DQN loss weighted by the importance weights, sends the new priorities back,
//     copies the target network every apex.target_update steps and sends its parameters to
//     the actors every apex.param_push steps.
//  4. At the end the learner stops the replay (after its last answer) and the actors; each
//     actor says goodbye to the replay after its last transitions.
#include <cmath>
#include <thread>

#include "distml/core/error.h"
#include "distml/rl/actor_roster.h"
#include "distml/rl/algos/algorithm.h"
#include "distml/rl/algos/apex_wire.h"
#include "distml/rl/algos/common.h"
#include "distml/rl/learner_inbox.h"
#include "distml/rl/parameter_sender.h"
#include "distml/rl/run_monitor.h"

namespace distml::rl {
namespace {

// The replay's goodbye: transitions inserted, sampled, seconds running, seconds in the buffer.
constexpr std::uint64_t kReplayStatsFloats = 4;

struct Roles {
  int replay;
  std::vector<int> actors;
};

Roles roles_of(int world) {
  Roles r{world - 1, {}};
  if (world == 2) r.actors = {1};
  for (int rank = 1; rank < world - 1; ++rank) r.actors.push_back(rank);
  return r;
}

struct Sizes {
  int obs, act;
  std::size_t transition, sample;
};

Sizes sizes_of(const RlConfig& config) {
  auto env = make_env(config.env.name);
  const int obs = env->observation_space().size(), act = env->action_space().size();
  return {obs, act, apex::transition_floats(obs, act), apex::sample_floats(obs, act)};
}

// ---- Actor ---------------------------------------------------------------------------------

double actor_epsilon(const ApexConfig& c, int index, int actors) {
  const double spread = actors > 1 ? c.epsilon_alpha * index / (actors - 1) : 0.0;
  return std::pow(c.epsilon, 1 + spread);
}

void run_actor(const RlConfig& config, comm::Communicator& comm, int index, int actors,
               int replay) {
  const ApexConfig& c = config.apex;
  const Sizes s = sizes_of(config);
  QNetwork net = make_q_network(config);
  VectorEnv envs = make_actor_envs(config, comm.rank());
  ActionSampler sampler(config.run.seed * 7919 + static_cast<std::uint64_t>(comm.rank()));
  LearnerInbox learner(comm, *net);
  const double epsilon = actor_epsilon(c, index, actors);
  std::vector<NStepWindow> windows(envs.copies(),
                                   NStepWindow(static_cast<int>(c.n_step), config.algo.gamma));
  std::vector<Transition> ready;
  std::optional<PendingSend> in_flight;
  std::int64_t steps = 0, steps_unsent = 0, sent = 0;
  torch::NoGradGuard no_grad;
  // With apex.env_steps_per_update, this actor's share of the steps the learner's progress
  // allows (parameters arrive every param_push updates, hence the look-ahead).
  // Steps an actor holds before they reach the replay: the n-step windows and a batch.
  const double held_back = static_cast<double>(envs.copies() * c.n_step + c.actor_batch);
  auto throttled = [&] {
    if (c.env_steps_per_update <= 0) return false;
    const double allowed =
        (c.learning_starts + (learner.version() + c.param_push) * c.env_steps_per_update) /
            static_cast<double>(actors) +
        held_back;
    return static_cast<double>(steps) >= allowed;
  };
  // Sends the ready transitions with initial priorities |R + discount max_a Q(s', a) - Q(s, a)|
  // under this actor's network.
  auto send_ready = [&] {
    std::vector<float> obs, next, act, reward, discount;
    for (const Transition& t : ready) {
      obs.insert(obs.end(), t.observation.begin(), t.observation.end());
      next.insert(next.end(), t.next_observation.begin(), t.next_observation.end());
      act.push_back(t.action[0]);
      reward.push_back(t.reward);
      discount.push_back(t.discount);
    }
    const auto q_taken = net->forward(as_tensor(obs, s.obs))
                             .gather(1, as_tensor(act, 1).to(torch::kLong))
                             .squeeze(1);
    const auto target =
        torch::tensor(reward) +
        torch::tensor(discount) * std::get<0>(net->forward(as_tensor(next, s.obs)).max(1));
    const auto priority = (target - q_taken).abs().contiguous();
    std::vector<float> payload;
    for (std::size_t i = 0; i < ready.size(); ++i)
      apex::put_transition(payload, ready[i], priority.data_ptr<float>()[i]);
    const VectorEnv::Finished finished = envs.take_finished();
    double return_sum = 0;
    for (double r : finished.returns) return_sum += r;
    payload.push_back(static_cast<float>(return_sum));
    payload.push_back(static_cast<float>(finished.returns.size()));
    if (in_flight) learner.wait_for(*in_flight, replay);
    in_flight.emplace(comm, replay, Channel::to_replay,
                      Message{MessageKind::transitions, 0, static_cast<std::uint64_t>(steps_unsent),
                              std::move(payload)});
    ready.clear();
    steps_unsent = 0;
    ++sent;
  };
  for (learner.poll(); !learner.stopped(); learner.poll()) {
    if (throttled()) {  // hand over what we have, then wait for the learner to catch up
      if (!ready.empty()) send_ready();
      learner.wait_until([&] { return !throttled(); },
                         "no new parameters from the learner (rank 0)");
      continue;
    }
    const std::vector<float> before = envs.observations();
    const auto q = net->forward(as_tensor(before, s.obs));
    const std::vector<float> actions = sampler.epsilon_greedy(q, epsilon);
    const VectorEnv::Step& step = envs.step(actions);
    steps += envs.copies();
    steps_unsent += envs.copies();
    for (int k = 0; k < envs.copies(); ++k)
      windows[k].add(std::span(before).subspan(k * s.obs, s.obs),
                     std::span(actions).subspan(k * s.act, s.act), step.rewards[k],
                     step.terminated[k], step.terminated[k] || step.truncated[k],
                     std::span(step.final_observations).subspan(k * s.obs, s.obs), ready);
    if (static_cast<std::int64_t>(ready.size()) < c.actor_batch) continue;
    if (comm.rank() == config.run.fault_actor && sent == config.run.fault_after) {
      if (in_flight) in_flight->wait();
      return;  // fault injection: vanish without a goodbye
    }
    send_ready();
  }
  if (in_flight) in_flight->wait();  // the replay receives until our goodbye
  send_message(comm, replay, Channel::to_replay, Message{MessageKind::stop, 0, 0, {}});
}

// ---- Replay --------------------------------------------------------------------------------

void run_replay(const RlConfig& config, comm::Communicator& comm, const RunHooks& hooks,
                const std::vector<int>& actors) {
  const ApexConfig& c = config.apex;
  const Sizes s = sizes_of(config);
  PrioritizedReplay replay(static_cast<std::size_t>(c.capacity), s.obs, s.act, c.alpha,
                           config.run.seed ^ 0xa9e7ULL);
  // One step can complete a transition in every copy's window at once, n_step at an episode end.
  const std::size_t most =
      static_cast<std::size_t>(c.actor_batch - 1 + config.env.copies * c.n_step);
  const SizeCheck transitions_or_stop = apex::transitions_or_stop(s.transition, most);
  ActorRoster roster(comm, actors, Channel::to_replay, transitions_or_stop, config, hooks);
  const std::uint64_t priorities_floats = static_cast<std::uint64_t>(c.batch_size) * 3;
  MessageListener from_learner(
      comm, 0, Channel::to_replay, [&](MessageKind kind, std::uint64_t floats) {
        const bool ok = (kind == MessageKind::sample_request && floats == 1) ||
                        (kind == MessageKind::priorities && floats == priorities_floats) ||
                        (kind == MessageKind::stop && floats == 0);
        if (!ok)
          throw CommError(
              cat("unexpected ", kind_name(kind), " of ", floats, " floats from the learner"));
      });
  std::int64_t env_steps = 0;
  double episode_sum = 0, episodes = 0;
  std::vector<double> requests;  // beta of each unanswered request
  bool learner_done = false;
  auto learner_heard = Clock::now();
  Transition t;
  // Replay work, for its throughput: transitions inserted and sampled, time inside the buffer.
  double inserted = 0, sampled = 0, busy_s = 0;
  const auto started = Clock::now();
  auto on_actor = [&](int rank, Message m) {
    if (m.kind == MessageKind::stop) {
      roster.remove(rank);
      return;
    }
    env_steps += static_cast<std::int64_t>(m.extra);
    const std::size_t n = (m.payload.size() - apex::kEpisodeFloats) / s.transition;
    const auto since = Clock::now();
    for (std::size_t i = 0; i < n; ++i) {
      const float p = apex::get_transition(m.payload, i, s.obs, s.act, t);
      if (!std::isfinite(p) || p < 0)
        throw CommError(cat("actor rank ", rank, " sent a transition with priority ", p,
                            " (its network diverged?)"));
      replay.add(t, p);
    }
    busy_s += seconds_since(since);
    inserted += static_cast<double>(n);
    episode_sum += m.payload[m.payload.size() - 2];
    episodes += m.payload.back();
  };
  std::optional<PendingSend> sample_in_flight;
  while (!(learner_done && requests.empty() && !sample_in_flight && roster.live().empty())) {
    int handled = roster.poll(on_actor);
    if (!learner_done && seconds_since(learner_heard) > config.run.timeout_s)
      throw TimeoutError(cat("the replay (rank ", comm.rank(),
                             ") heard nothing from the learner "
                             "(rank 0) for ",
                             config.run.timeout_s, " s"));
    while (!learner_done && from_learner.ready()) {
      learner_heard = Clock::now();
      ++handled;
      Message m = from_learner.take();
      if (m.kind == MessageKind::sample_request) {
        requests.push_back(m.payload[0]);
      } else if (m.kind == MessageKind::priorities) {
        std::vector<std::uint64_t> indices;
        std::vector<float> priorities;
        for (std::size_t i = 0; i < static_cast<std::size_t>(c.batch_size); ++i) {
          indices.push_back(apex::get_index(&m.payload[3 * i]));
          priorities.push_back(m.payload[3 * i + 2]);
          if (!std::isfinite(priorities.back()))
            throw CommError(cat("the learner (rank 0) sent priority ", priorities.back(),
                                " (its loss diverged?)"));
        }
        const auto since = Clock::now();
        replay.update_priorities(indices, priorities);
        busy_s += seconds_since(since);
      } else {
        learner_done = true;
      }
    }
    // One sample in flight at a time, sent without blocking: the replay must keep receiving
    // (the learner's priorities, the actors' transitions) while the learner is busy.
    if (sample_in_flight && sample_in_flight->done()) sample_in_flight.reset();
    if (!sample_in_flight && !requests.empty() &&
        replay.size() >= static_cast<std::size_t>(c.learning_starts)) {
      const auto since = Clock::now();
      const auto batch = replay.sample(static_cast<std::size_t>(c.batch_size), requests.front());
      busy_s += seconds_since(since);
      sampled += static_cast<double>(c.batch_size);
      requests.erase(requests.begin());
      sample_in_flight.emplace(
          comm, 0, Channel::from_replay,
          Message{MessageKind::sample, replay.size(), static_cast<std::uint64_t>(env_steps),
                  apex::pack_sample(batch, s.obs, s.act, episode_sum, episodes)});
      episode_sum = episodes = 0;
      ++handled;
    }
    if (handled == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  send_message(comm, 0, Channel::from_replay,
               Message{MessageKind::stop,
                       0,
                       0,
                       {static_cast<float>(inserted), static_cast<float>(sampled),
                        static_cast<float>(seconds_since(started)), static_cast<float>(busy_s)}});
}

// ---- Learner -------------------------------------------------------------------------------

Policy greedy_q_policy(QNetwork net) {
  return [net](const torch::Tensor& observation) mutable {
    return std::vector<float>{
        static_cast<float>(net->forward(observation).argmax(-1).item<std::int64_t>())};
  };
}

RunResult run_learner(const RlConfig& config, comm::Communicator& comm, const RunHooks& hooks,
                      const Roles& roles) {
  const ApexConfig& c = config.apex;
  const Sizes s = sizes_of(config);
  QNetwork online = make_q_network(config);
  QNetwork target = make_q_network(config);
  auto optimizer = make_optimizer(config, *online);
  LearnerCounters counters = resume_if_asked(config, *online, *optimizer);
  load_flat_parameters(*target, flat_parameters(*online));
  const std::int64_t resumed_env_steps = counters.env_steps;  // the replay counts from 0
  const auto batch = static_cast<std::size_t>(c.batch_size);
  const std::uint64_t sample_floats = batch * s.sample + apex::kEpisodeFloats;
  MessageListener from_replay(comm, roles.replay, Channel::from_replay,
                              [&](MessageKind kind, std::uint64_t floats) {
                                if (kind == MessageKind::stop && floats == kReplayStatsFloats)
                                  return;
                                exact_size(MessageKind::sample, sample_floats)(kind, floats);
                              });
  ParameterSender parameters(comm);
  auto push_parameters = [&] {
    const std::vector<float> flat = flat_parameters(*online);
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
    send_message(comm, roles.replay, Channel::to_replay,
                 Message{MessageKind::sample_request, 0, 0, {static_cast<float>(beta())}});
  };
  RunMonitor monitor(config, hooks);
  auto state = [&] { return save_learner_state({*online, *optimizer}, counters); };
  request();
  bool solved = false;
  std::size_t replay_size = 0;
  for (;;) {
    Message m = from_replay.take();
    counters.env_steps = resumed_env_steps + static_cast<std::int64_t>(m.extra);
    replay_size = m.version;
    monitor.add_episodes(m.payload[m.payload.size() - 2],
                         static_cast<std::int64_t>(m.payload.back()));
    if (solved || counters.env_steps >= config.run.env_steps) break;
    request();  // one ahead: the replay samples while this batch trains

    std::vector<float> weights, obs, act, reward, discount, next, priorities_out;
    std::vector<std::uint64_t> indices;
    for (std::size_t i = 0; i < batch; ++i) {
      const float* p = m.payload.data() + i * s.sample;
      indices.push_back(apex::get_index(p));
      weights.push_back(p[2]);
      obs.insert(obs.end(), p + 3, p + 3 + s.obs);
      act.push_back(p[3 + s.obs]);
      reward.push_back(p[3 + s.obs + s.act]);
      discount.push_back(p[4 + s.obs + s.act]);
      next.insert(next.end(), p + 5 + s.obs + s.act, p + 5 + 2 * s.obs + s.act);
    }
    // Double DQN: the online network picks the next action, the target network values it.
    const auto next_obs = as_tensor(next, s.obs);
    torch::Tensor y;
    {
      torch::NoGradGuard no_grad;
      const auto best = online->forward(next_obs).argmax(1, /*keepdim=*/true);
      y = torch::tensor(reward) +
          torch::tensor(discount) * target->forward(next_obs).gather(1, best).squeeze(1);
    }
    const auto q = online->forward(as_tensor(obs, s.obs))
                       .gather(1, as_tensor(act, 1).to(torch::kLong))
                       .squeeze(1);
    const auto td = y - q;
    const auto loss =
        (torch::tensor(weights) *
         torch::nn::functional::huber_loss(
             q, y, torch::nn::functional::HuberLossFuncOptions().reduction(torch::kNone)))
            .mean();
    optimizer->zero_grad();
    loss.backward();
    clip_gradients(*online, config.algo.max_grad_norm);
    optimizer->step();
    ++counters.update;
    const auto new_priorities = td.detach().abs().contiguous();
    for (std::size_t i = 0; i < batch; ++i) {
      apex::put_index(priorities_out, indices[i]);
      priorities_out.push_back(new_priorities.data_ptr<float>()[i]);
    }
    send_message(comm, roles.replay, Channel::to_replay,
                 Message{MessageKind::priorities, 0, 0, std::move(priorities_out)});
    if (counters.update % c.target_update == 0)
      load_flat_parameters(*target, flat_parameters(*online));
    if (counters.update % c.param_push == 0) push_parameters();
    solved = monitor.after_update(
        counters.update, counters.env_steps, greedy_q_policy(online), state,
        {{"loss", loss.item<double>()}, {"replay_size", replay_size}, {"beta", beta()}});
  }

  // The replay has answered every request (the last one is `m` above); stop it, then the actors.
  send_message(comm, roles.replay, Channel::to_replay, Message{MessageKind::stop, 0, 0, {}});
  // A lost actor never takes its last parameters: give each at most run.actor_timeout_s.
  for (int r : roles.actors) {
    const auto since = Clock::now();
    while (!parameters.delivered(r) && seconds_since(since) < config.run.actor_timeout_s)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    send_message(comm, r, Channel::from_learner, Message{MessageKind::stop, 0, 0, {}});
  }
  const Message stats = from_replay.take();  // the replay's goodbye, after its actors' ones
  RunResult result =
      monitor.finish(counters.update, counters.env_steps, greedy_q_policy(online), state);
  result.report["actors"] = roles.actors.size();
  std::vector<double> epsilons;
  for (std::size_t i = 0; i < roles.actors.size(); ++i)
    epsilons.push_back(
        actor_epsilon(c, static_cast<int>(i), static_cast<int>(roles.actors.size())));
  result.report["actor_epsilons"] = epsilons;
  result.report["replay_size"] = replay_size;
  const double ops = stats.payload[0] + stats.payload[1];
  result.report["replay_inserted"] = stats.payload[0];
  result.report["replay_sampled"] = stats.payload[1];
  result.report["replay_ops_per_sec"] = ops / std::max(stats.payload[2], 1e-9f);
  result.report["replay_busy_fraction"] = stats.payload[3] / std::max(stats.payload[2], 1e-9f);
  result.report["replay_capacity_ops_per_sec"] = ops / std::max(stats.payload[3], 1e-9f);
  return result;
}

}  // namespace

RunResult run_apex(const RlConfig& config, comm::Communicator& comm, const RunHooks& hooks) {
  if (comm.size() < 2)
    throw UsageError("apex needs at least 2 ranks (a learner and a replay with actors): --np 2+");
  if (comm.size() == 2 && comm.engine_name() == "gloo")
    throw UsageError(
        "apex at --np 2 runs its actor beside the replay on rank 1, which needs messages from a "
        "rank to itself; the gloo engine has none: use --np 3 or more, or the mpi or local engine");
  prepare_rank(config);
  const Roles roles = roles_of(comm.size());
  const int actors = static_cast<int>(roles.actors.size());
  if (comm.rank() == 0) return run_learner(config, comm, hooks, roles);
  if (comm.rank() == roles.replay && comm.size() > 2) {
    run_replay(config, comm, hooks, roles.actors);
    return {};
  }
  if (comm.rank() != roles.replay) {
    run_actor(config, comm, comm.rank() - 1, actors, roles.replay);
    return {};
  }
  // Two ranks: the replay and the one actor share rank 1.
  std::exception_ptr actor_error;
  std::thread actor([&] {
    try {
      run_actor(config, comm, 0, 1, roles.replay);
    } catch (...) {
      actor_error = std::current_exception();
    }
  });
  try {
    run_replay(config, comm, hooks, roles.actors);
  } catch (...) {
    actor.detach();  // it fails on its own timeout; the process is ending
    throw;
  }
  actor.join();
  if (actor_error) std::rethrow_exception(actor_error);
  return {};
}

}  // namespace distml::rl
