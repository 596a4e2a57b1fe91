// The Ape-X messages as flat floats (see message.h): what actors send the replay, what the
// replay sends the learner and what the learner sends back. Replay indices are 64-bit, so
// each travels as two floats holding its bit pattern (never used as numbers).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "distml/core/error.h"
#include "distml/rl/message.h"
#include "distml/rl/nstep.h"
#include "distml/rl/prioritized_replay.h"

namespace distml::rl::apex {

/// Training episodes an actor finished since its last message: return sum, count.
constexpr std::size_t kEpisodeFloats = 2;

inline void put_index(std::vector<float>& out, std::uint64_t index) {
  float halves[2];
  std::memcpy(halves, &index, sizeof index);
  out.insert(out.end(), halves, halves + 2);
}
inline std::uint64_t get_index(const float* at) {
  std::uint64_t index;
  std::memcpy(&index, at, sizeof index);
  return index;
}

/// Floats of one transition in a `transitions` message: s, a, R, discount, s', priority.
inline std::size_t transition_floats(int obs, int act) { return 2 * obs + act + 3; }

inline void put_transition(std::vector<float>& out, const Transition& t, float priority) {
  out.insert(out.end(), t.observation.begin(), t.observation.end());
  out.insert(out.end(), t.action.begin(), t.action.end());
  out.push_back(t.reward);
  out.push_back(t.discount);
  out.insert(out.end(), t.next_observation.begin(), t.next_observation.end());
  out.push_back(priority);
}

/// Reads transition `i` of a message body; returns its priority.
inline float get_transition(std::span<const float> body, std::size_t i, int obs, int act,
                            Transition& t) {
  const float* p = body.data() + i * transition_floats(obs, act);
  t.observation.assign(p, p + obs);
  t.action.assign(p + obs, p + obs + act);
  t.reward = p[obs + act];
  t.discount = p[obs + act + 1];
  t.next_observation.assign(p + obs + act + 2, p + 2 * obs + act + 2);
  return p[2 * obs + act + 2];
}

/// The replay's check of what an actor sends: stop, or transitions of kEpisodeFloats + k x
/// `transition` floats with k <= `most`.
inline SizeCheck transitions_or_stop(std::size_t transition, std::size_t most) {
  return [transition, most](MessageKind kind, std::uint64_t floats) {
    if (kind == MessageKind::stop && floats == 0) return;
    if (kind != MessageKind::transitions)
      throw CommError(cat("expected transitions, got a ", kind_name(kind), " message"));
    const std::uint64_t body = floats - kEpisodeFloats;
    if (floats < kEpisodeFloats || body % transition || body / transition > most)
      throw CommError(cat("a transitions message of ", floats, " floats; expected ", kEpisodeFloats,
                          " + k x ", transition, " with k <= ", most));
  };
}

/// Floats of one sampled transition in a `sample` message: index (2), weight, s, a, R,
/// discount, s'.
inline std::size_t sample_floats(int obs, int act) { return 2 * obs + act + 5; }

inline std::vector<float> pack_sample(const PrioritizedReplay::Batch& b, int obs, int act,
                                      double episode_sum, double episodes) {
  std::vector<float> out;
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
  out.push_back(static_cast<float>(episode_sum));
  out.push_back(static_cast<float>(episodes));
  return out;
}

}  // namespace distml::rl::apex
