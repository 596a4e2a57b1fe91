// Fuzzes what RL roles read from each other (rl/message.cc, rl/algos/apex_messages.cc): a message
// header checked as the Ape-X replay checks an actor's (transitions or stop), the payload read
// as transitions into a prioritised replay, and the same payload read as a learner's priorities
// message and applied to it. The input is the 40-byte header, then payload floats.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "distml/core/error.h"
#include "distml/rl/algos/apex_messages.h"
#include "distml/rl/message.h"
#include "distml/rl/prioritized_replay.h"

namespace rl = distml::rl;

namespace {

constexpr rl::apex::Layout kLayout{2, 1};
constexpr std::size_t kMost = 4;  // transitions per message

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  rl::HeaderWords header{};
  if (size < sizeof header) return 0;
  std::memcpy(header.data(), data, sizeof header);
  const std::uint8_t* body = data + sizeof header;
  const std::size_t body_bytes = size - sizeof header;
  rl::PrioritizedReplay replay(4, kLayout.observation_size, kLayout.action_size, 0.6, 1);
  try {
    rl::Message m =
        rl::decode_header(header, 3, rl::apex::Transitions::check(kLayout, kMost));
    // The payload receive: the floats that arrived, the rest left as allocated.
    if (!m.payload.empty())
      std::memcpy(m.payload.data(), body, std::min(body_bytes, m.payload.size() * sizeof(float)));
    if (m.kind == rl::MessageKind::stop) return 0;
    const rl::apex::Transitions t = rl::apex::Transitions::unpack(m, kLayout);
    for (std::size_t i = 0; i < t.items.size(); ++i) replay.add(t.items[i], t.priorities[i]);
    // The same floats as a learner's priorities message, whole triples only (its size is
    // checked before the payload is read).
    m.kind = rl::MessageKind::priorities;
    m.payload.resize(m.payload.size() / 3 * 3);
    const rl::apex::Priorities p = rl::apex::Priorities::unpack(m);
    replay.update_priorities(p.indices, p.priorities);
  } catch (const distml::Error&) {  // CommError from the checks, Error from the replay
  }
  return 0;
}
