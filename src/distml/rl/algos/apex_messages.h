// The messages of Ape-X (DQN and DPG) between its roles, each a struct with the one pack() that
// writes it and the one unpack() that reads it, so that the layout lives in one place. A
// message's header fields (message.h) get their meaning here: which count travels as `version`
// and which as `extra` is named by the struct's fields. Floats only, no torch: the replay and the
// fuzz target read them too.
//
//   actor   -> replay   Transitions     n-step transitions with initial priorities
//   learner -> replay   SampleRequest   one batch wanted, with the importance exponent beta
//   replay  -> learner  Sample          a prioritised batch with importance weights
//   learner -> replay   Priorities      the batch's new priorities
//   replay  -> learner  ReplayStats     the replay's goodbye (kind stop)
// Replay indices are 64-bit; each travels as two floats holding its bit pattern.
#pragma once

#include <cstdint>
#include <vector>

#include "distml/rl/message.h"
#include "distml/rl/nstep.h"
#include "distml/rl/prioritized_replay.h"

namespace distml::rl::apex {

/// The sizes every message's layout depends on.
struct Layout {
  int observation_size = 0, action_size = 0;
  /// Floats of one transition in Transitions: s, a, R, discount, s', priority.
  std::size_t transition_floats() const;
  /// Floats of one sampled transition in Sample: index (2), weight, s, a, R, discount, s'.
  std::size_t sample_floats() const;
};

/// Training episodes that ended since the sender's last message.
struct Episodes {
  double return_sum = 0;
  std::int64_t count = 0;
};

/// Actor -> replay (kind transitions; extra: the actor's environment steps since its last one).
struct Transitions {
  std::vector<Transition> items;
  std::vector<float> priorities;  // one per item, >= 0
  std::int64_t env_steps = 0;
  Episodes episodes;

  Message pack(const Layout& layout) const;
  /// Throws CommError for a priority that is negative or not finite (the sender's network
  /// diverged).
  static Transitions unpack(const Message& m, const Layout& layout);
  /// What the replay accepts from an actor: stop, or transitions of at most `most` items.
  static SizeCheck check(const Layout& layout, std::size_t most);
};

/// Learner -> replay (kind sample_request).
struct SampleRequest {
  double beta = 0;
  Message pack() const;
  static SampleRequest unpack(const Message& m);
};

/// Replay -> learner (kind sample; version: the replay's size, extra: every actor's environment
/// steps so far).
struct Sample {
  PrioritizedReplay::Batch batch;
  std::uint64_t replay_size = 0;
  std::int64_t env_steps = 0;
  Episodes episodes;  // since the previous sample

  Message pack(const Layout& layout) const;
  static Sample unpack(const Message& m, const Layout& layout);
  /// Floats of a sample of `batch_size` transitions.
  static std::size_t floats(const Layout& layout, std::size_t batch_size);
};

/// Learner -> replay (kind priorities): new priorities of a sampled batch.
struct Priorities {
  std::vector<std::uint64_t> indices;
  std::vector<float> priorities;

  Message pack() const;
  /// Throws CommError for a priority that is not finite (the learner's loss diverged).
  static Priorities unpack(const Message& m);
  static std::size_t floats(std::size_t batch_size) { return 3 * batch_size; }
};

/// Replay -> learner at the end (kind stop): what the replay did, for its throughput.
struct ReplayStats {
  double inserted = 0, sampled = 0;  // transitions
  double seconds = 0;                // running
  double busy_seconds = 0;           // inside the buffer
  Message pack() const;
  static ReplayStats unpack(const Message& m);
  static constexpr std::size_t kFloats = 4;
};

}  // namespace distml::rl::apex
