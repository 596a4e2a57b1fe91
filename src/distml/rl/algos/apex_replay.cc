// The Ape-X replay (apex_roles.h, step 2).
#include <optional>
#include <thread>

#include "distml/rl/actor_roster.h"
#include "distml/rl/algos/apex_roles.h"

namespace distml::rl::apex {

void run_replay(const RlConfig& config, comm::Communicator& comm, const RunHooks& hooks,
                const Roles& roles) {
  const ApexConfig& c = config.apex;
  const Layout layout = layout_of(config);
  PrioritizedReplay replay(static_cast<std::size_t>(c.capacity), layout.observation_size,
                           layout.action_size, c.alpha, config.run.seed ^ 0xa9e7ULL);
  // One step can complete a transition in every copy's window at once, n_step at an episode end.
  const auto most = static_cast<std::size_t>(c.actor_batch - 1 + config.env.copies * c.n_step);
  ActorRoster roster(comm, roles.actors, Channel::to_replay, Transitions::check(layout, most),
                     config, hooks);
  const std::size_t priorities_floats = Priorities::floats(static_cast<std::size_t>(c.batch_size));
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
  Episodes episodes;  // since the last sample
  std::vector<double> requests;  // beta of each unanswered request
  bool learner_done = false;
  auto learner_heard = Clock::now();
  ReplayStats stats;  // transitions inserted and sampled, time inside the buffer
  const auto started = Clock::now();
  auto on_actor = [&](int rank, Message m) {
    if (m.kind == MessageKind::stop) {
      roster.remove(rank);
      return;
    }
    Transitions t;
    try {
      t = Transitions::unpack(m, layout);
    } catch (const CommError& e) {
      throw CommError(cat("actor rank ", rank, ": ", e.what()));
    }
    env_steps += t.env_steps;
    const auto since = Clock::now();
    for (std::size_t i = 0; i < t.items.size(); ++i) replay.add(t.items[i], t.priorities[i]);
    stats.busy_seconds += seconds_since(since);
    stats.inserted += static_cast<double>(t.items.size());
    episodes.return_sum += t.episodes.return_sum;
    episodes.count += t.episodes.count;
  };
  std::optional<PendingSend> sample_in_flight;
  while (!(learner_done && requests.empty() && !sample_in_flight && roster.live().empty())) {
    int handled = roster.poll(on_actor);
    if (!learner_done && seconds_since(learner_heard) > config.run.timeout_s)
      throw TimeoutError(cat("the replay (rank ", comm.rank(),
                             ") heard nothing from the learner (rank 0) for ",
                             config.run.timeout_s, " s"));
    while (!learner_done && from_learner.ready()) {
      learner_heard = Clock::now();
      ++handled;
      const Message m = from_learner.take();
      if (m.kind == MessageKind::sample_request) {
        requests.push_back(SampleRequest::unpack(m).beta);
      } else if (m.kind == MessageKind::priorities) {
        const Priorities p = Priorities::unpack(m);
        const auto since = Clock::now();
        replay.update_priorities(p.indices, p.priorities);
        stats.busy_seconds += seconds_since(since);
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
      Sample s{replay.sample(static_cast<std::size_t>(c.batch_size), requests.front()),
               replay.size(), env_steps, episodes};
      stats.busy_seconds += seconds_since(since);
      stats.sampled += static_cast<double>(c.batch_size);
      requests.erase(requests.begin());
      sample_in_flight.emplace(comm, 0, Channel::from_replay, s.pack(layout));
      episodes = {};
      ++handled;
    }
    if (handled == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  stats.seconds = seconds_since(started);
  send_message(comm, 0, Channel::from_replay, stats.pack());
}

}  // namespace distml::rl::apex
