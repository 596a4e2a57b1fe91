// Typed messages between the roles of an RL run (learner, actors, replay). A message is a
// fixed header (magic, kind, version, payload size) and then its payload of floats, on one
// channel per direction between two ranks, so the messages of a channel arrive in the order
// they were sent. The receiver validates the kind and the size before it takes the payload:
// a message of the wrong size is an error naming the sender, never a silent truncation.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "distml/comm/communicator.h"

namespace distml::rl {

enum class MessageKind : std::uint32_t {
  parameters = 1,   // flat policy parameters; version = the learner's update count
  unroll = 2,       // an actor's T-step trajectory of K copies (IMPALA)
  gradients = 3,    // flat gradients computed from parameters `version` (A3C)
  transitions = 4,  // n-step transitions with initial priorities (Ape-X)
  sample_request = 5,
  sample = 6,      // a prioritised batch (Ape-X)
  priorities = 7,  // updated priorities of a sampled batch (Ape-X)
  stop = 8,        // the run is over (from the learner), or "I stopped" (to it)
};
std::string_view kind_name(MessageKind kind);

struct Message {
  MessageKind kind{};
  std::uint64_t version = 0;
  std::uint64_t extra = 0;  // a per-kind counter, e.g. the sender's environment steps
  std::vector<float> payload;
};

/// Channels are pairs of tags; each (sender, receiver, channel) carries one ordered stream.
enum class Channel : int { to_learner = 0, from_learner = 1, to_replay = 2, from_replay = 3 };

/// Throws CommError when `floats` is not a size the receiver accepts for `kind`; the message
/// is given "from rank R" context by the caller.
using SizeCheck = std::function<void(MessageKind kind, std::uint64_t floats)>;

/// A message's fixed header as it travels: magic, kind, version, extra, payload floats.
using HeaderWords = std::array<std::int64_t, 5>;

/// The message a header from rank `src` announces, its payload sized (zeros) for the receive.
/// CommError naming `src` for a foreign magic, an unknown kind, a negative size or a size
/// `check` refuses; nothing is allocated before `check` accepts the size.
Message decode_header(const HeaderWords& words, int src, const SizeCheck& check);

/// Sends a message and returns when both parts are handed over (blocking, with the
/// communicator's timeout).
void send_message(comm::Communicator& comm, int dst, Channel channel, const Message& message);

/// A message on its way out: owns its buffers until both parts completed.
class PendingSend {
 public:
  PendingSend(comm::Communicator& comm, int dst, Channel channel, Message message);
  /// An undelivered message's memory is kept to the end of the process: the engine may still
  /// read it (the run is failing or ending; MPI cannot take a send back).
  ~PendingSend();
  PendingSend(PendingSend&&) = default;
  PendingSend& operator=(PendingSend&&) = default;
  /// True once delivered; never blocks. Throws CommError if the send failed.
  bool done();
  /// Blocks until delivered (communicator's timeout).
  void wait();

 private:
  struct Parts;
  std::shared_ptr<Parts> parts_;
};

/// Listens for messages from one rank on one channel: a header receive is always posted, so
/// the sender never waits for the receiver to look.
class MessageListener {
 public:
  MessageListener(comm::Communicator& comm, int src, Channel channel, SizeCheck check);
  int source() const { return src_; }
  /// True when a header has arrived; never blocks.
  bool ready();
  /// The next message (blocks for the header if none is ready, then for the payload, each with
  /// the communicator's timeout); validates it and posts the next header receive.
  Message take();

 private:
  struct Header;
  void post();

  comm::Communicator& comm_;
  int src_;
  Channel channel_;
  SizeCheck check_;
  std::shared_ptr<Header> header_;  // shared with the posted receive
  comm::Work pending_;
};

/// Waits for `send` to rank `dst` to be delivered while handing each message of `listener` to
/// `on_message`, so that two ranks sending large messages to each other never wait for each
/// other. TimeoutError naming `dst` when it is not delivered within `timeout`.
void wait_serving(PendingSend& send, int dst, MessageListener& listener,
                  const std::function<void(Message)>& on_message, comm::Millis timeout);

/// A SizeCheck accepting `kind` with exactly `floats` payload floats and `stop` with none.
SizeCheck exact_size(MessageKind kind, std::uint64_t floats);

}  // namespace distml::rl
