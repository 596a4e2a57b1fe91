#include "distml/rl/algos/apex_messages.h"

#include <cmath>
#include <cstring>
#include <span>

#include "distml/core/error.h"

namespace distml::rl::apex {
namespace {

constexpr std::size_t kEpisodeFloats = 2;  // Episodes: return sum, count

void put_index(std::vector<float>& out, std::uint64_t index) {
  float halves[2];
  std::memcpy(halves, &index, sizeof index);
  out.insert(out.end(), halves, halves + 2);
}

std::uint64_t get_index(const float* at) {
  std::uint64_t index;
  std::memcpy(&index, at, sizeof index);
  return index;
}

void put_episodes(std::vector<float>& out, const Episodes& e) {
  out.push_back(static_cast<float>(e.return_sum));
  out.push_back(static_cast<float>(e.count));
}

// CommError unless the sum is finite and the count a whole number of episodes.
Episodes get_episodes(const std::vector<float>& payload) {
  const std::size_t n = payload.size();
  const float sum = payload[n - 2], count = payload[n - 1];
  if (!std::isfinite(sum) || !(count >= 0 && count <= 1e9f && count == std::floor(count)))
    throw CommError(cat("episode statistics (return sum ", sum, ", count ", count,
                        ") that are no sum and count of episodes"));
  return {sum, static_cast<std::int64_t>(count)};
}

// Reads floats in order from a payload whose size the receiver has checked.
struct Reader {
  const float* at;
  float next() { return *at++; }
  void into(std::vector<float>& out, std::size_t count) {
    out.insert(out.end(), at, at + count);
    at += count;
  }
};

void expect_kind(const Message& m, MessageKind kind) {
  DML_CHECK(m.kind == kind, "an Ape-X ", kind_name(kind), " read from a ", kind_name(m.kind));
}

}  // namespace

std::size_t Layout::transition_floats() const {
  return 2 * observation_size + action_size + 3;
}

std::size_t Layout::sample_floats() const { return 2 * observation_size + action_size + 5; }

Message Transitions::pack(const Layout& layout) const {
  DML_CHECK_EQ(items.size(), priorities.size(), "priorities per transition");
  std::vector<float> out;
  out.reserve(items.size() * layout.transition_floats() + kEpisodeFloats);
  for (std::size_t i = 0; i < items.size(); ++i) {
    const Transition& t = items[i];
    out.insert(out.end(), t.observation.begin(), t.observation.end());
    out.insert(out.end(), t.action.begin(), t.action.end());
    out.push_back(t.reward);
    out.push_back(t.discount);
    out.insert(out.end(), t.next_observation.begin(), t.next_observation.end());
    out.push_back(priorities[i]);
  }
  put_episodes(out, episodes);
  return {MessageKind::transitions, 0, static_cast<std::uint64_t>(env_steps), std::move(out)};
}

Transitions Transitions::unpack(const Message& m, const Layout& layout) {
  expect_kind(m, MessageKind::transitions);
  const std::size_t n = (m.payload.size() - kEpisodeFloats) / layout.transition_floats();
  Transitions t;
  t.items.resize(n);
  Reader r{m.payload.data()};
  for (Transition& item : t.items) {
    r.into(item.observation, layout.observation_size);
    r.into(item.action, layout.action_size);
    item.reward = r.next();
    item.discount = r.next();
    r.into(item.next_observation, layout.observation_size);
    const float p = r.next();
    if (!std::isfinite(p) || p < 0)
      throw CommError(cat("a transition with priority ", p, " (the actor's network diverged?)"));
    t.priorities.push_back(p);
  }
  t.env_steps = static_cast<std::int64_t>(m.extra);
  t.episodes = get_episodes(m.payload);
  return t;
}

SizeCheck Transitions::check(const Layout& layout, std::size_t most) {
  const std::size_t transition = layout.transition_floats();
  return [transition, most](MessageKind kind, std::uint64_t floats) {
    if (kind == MessageKind::stop && floats == 0) return;
    if (kind != MessageKind::transitions)
      throw CommError(cat("expected transitions, got a ", kind_name(kind), " message"));
    const std::uint64_t body = floats - kEpisodeFloats;
    if (floats < kEpisodeFloats || body % transition || body / transition > most)
      throw CommError(cat("a transitions message of ", floats, " floats; expected ",
                          kEpisodeFloats, " + k x ", transition, " with k <= ", most));
  };
}

Message SampleRequest::pack() const {
  return {MessageKind::sample_request, 0, 0, {static_cast<float>(beta)}};
}

SampleRequest SampleRequest::unpack(const Message& m) {
  expect_kind(m, MessageKind::sample_request);
  DML_CHECK_EQ(m.payload.size(), 1u, "floats of a sample request");
  return {m.payload[0]};
}

std::size_t Sample::floats(const Layout& layout, std::size_t batch_size) {
  return batch_size * layout.sample_floats() + kEpisodeFloats;
}

Message Sample::pack(const Layout& layout) const {
  const std::size_t obs = layout.observation_size, act = layout.action_size;
  const PrioritizedReplay::Batch& b = batch;
  std::vector<float> out;
  out.reserve(floats(layout, b.indices.size()));
  for (std::size_t i = 0; i < b.indices.size(); ++i) {
    put_index(out, b.indices[i]);
    out.push_back(b.weights[i]);
    out.insert(out.end(), b.observations.begin() + i * obs, b.observations.begin() + (i + 1) * obs);
    out.insert(out.end(), b.actions.begin() + i * act, b.actions.begin() + (i + 1) * act);
    out.push_back(b.rewards[i]);
    out.push_back(b.discounts[i]);
    out.insert(out.end(), b.next_observations.begin() + i * obs,
               b.next_observations.begin() + (i + 1) * obs);
  }
  put_episodes(out, episodes);
  return {MessageKind::sample, replay_size, static_cast<std::uint64_t>(env_steps), std::move(out)};
}

Sample Sample::unpack(const Message& m, const Layout& layout) {
  expect_kind(m, MessageKind::sample);
  const std::size_t n = (m.payload.size() - kEpisodeFloats) / layout.sample_floats();
  Sample s;
  PrioritizedReplay::Batch& b = s.batch;
  Reader r{m.payload.data()};
  for (std::size_t i = 0; i < n; ++i) {
    b.indices.push_back(get_index(r.at));
    r.at += 2;
    b.weights.push_back(r.next());
    r.into(b.observations, layout.observation_size);
    r.into(b.actions, layout.action_size);
    b.rewards.push_back(r.next());
    b.discounts.push_back(r.next());
    r.into(b.next_observations, layout.observation_size);
  }
  s.replay_size = m.version;
  s.env_steps = static_cast<std::int64_t>(m.extra);
  s.episodes = get_episodes(m.payload);
  return s;
}

Message Priorities::pack() const {
  DML_CHECK_EQ(indices.size(), priorities.size(), "priorities per index");
  std::vector<float> out;
  out.reserve(floats(indices.size()));
  for (std::size_t i = 0; i < indices.size(); ++i) {
    put_index(out, indices[i]);
    out.push_back(priorities[i]);
  }
  return {MessageKind::priorities, 0, 0, std::move(out)};
}

Priorities Priorities::unpack(const Message& m) {
  expect_kind(m, MessageKind::priorities);
  DML_CHECK(m.payload.size() % 3 == 0, "a priorities payload of whole (index, priority) triples");
  Priorities p;
  for (std::size_t i = 0; i < m.payload.size(); i += 3) {
    p.indices.push_back(get_index(&m.payload[i]));
    p.priorities.push_back(m.payload[i + 2]);
    if (!std::isfinite(p.priorities.back()))
      throw CommError(cat("a priority of ", p.priorities.back(), " (the learner's loss diverged?)"));
  }
  return p;
}

Message ReplayStats::pack() const {
  return {MessageKind::stop,
          0,
          0,
          {static_cast<float>(inserted), static_cast<float>(sampled), static_cast<float>(seconds),
           static_cast<float>(busy_seconds)}};
}

ReplayStats ReplayStats::unpack(const Message& m) {
  expect_kind(m, MessageKind::stop);
  DML_CHECK_EQ(m.payload.size(), kFloats, "floats of the replay's statistics");
  return {m.payload[0], m.payload[1], m.payload[2], m.payload[3]};
}

}  // namespace distml::rl::apex
