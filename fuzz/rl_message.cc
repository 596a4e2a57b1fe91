// Fuzzes what RL roles read from each other (rl/message.cc, rl/algos/apex_wire.h): a message
// header checked as the Ape-X replay checks an actor's (transitions or stop), the payload read
// into transitions of a prioritised replay, and a learner's priorities message (index bit
// patterns and priorities) applied to it. The input is the 40-byte header, then payload floats.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "distml/core/error.h"
#include "distml/rl/algos/apex_wire.h"
#include "distml/rl/message.h"
#include "distml/rl/prioritized_replay.h"

namespace rl = distml::rl;

namespace {

constexpr int kObs = 2, kAct = 1;
constexpr std::size_t kMost = 4;  // transitions per message

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  rl::HeaderWords header{};
  if (size < sizeof header) return 0;
  std::memcpy(header.data(), data, sizeof header);
  const std::uint8_t* body = data + sizeof header;
  const std::size_t body_bytes = size - sizeof header;
  rl::PrioritizedReplay replay(4, kObs, kAct, 0.6, 1);
  try {
    const std::size_t transition = rl::apex::transition_floats(kObs, kAct);
    rl::Message m = rl::decode_header(header, 3, rl::apex::transitions_or_stop(transition, kMost));
    // The payload receive: the floats that arrived, the rest left as allocated.
    if (!m.payload.empty())
      std::memcpy(m.payload.data(), body, std::min(body_bytes, m.payload.size() * sizeof(float)));
    if (m.kind == rl::MessageKind::stop) return 0;
    const std::size_t n = (m.payload.size() - rl::apex::kEpisodeFloats) / transition;
    rl::Transition t;
    for (std::size_t i = 0; i < n; ++i) {
      const float p = rl::apex::get_transition(m.payload, i, kObs, kAct, t);
      replay.add(t, p);  // Error for a priority that is negative or not finite
    }
    // A learner's priorities for a batch of 2: (index, index, priority) each, read from the
    // same payload as the replay reads them.
    if (m.payload.size() >= 6) {
      std::vector<std::uint64_t> indices;
      std::vector<float> priorities;
      for (std::size_t i = 0; i < 2; ++i) {
        indices.push_back(rl::apex::get_index(&m.payload[3 * i]));
        priorities.push_back(m.payload[3 * i + 2]);
      }
      replay.update_priorities(indices, priorities);
    }
  } catch (const distml::Error&) {  // CommError from the checks, Error from the replay
  }
  return 0;
}
