#include "distml/rl/message.h"

#include <array>
#include <chrono>
#include <mutex>
#include <thread>

#include "distml/core/clock.h"
#include "distml/core/error.h"

namespace distml::rl {
namespace {

constexpr std::int64_t kMagic = 0x444d4c524cLL;  // "DMLRL"
constexpr int kTagBase = 0x7000;

int header_tag(Channel c) { return kTagBase + 2 * static_cast<int>(c); }
int payload_tag(Channel c) { return header_tag(c) + 1; }

HeaderWords header_of(const Message& m) {
  return {kMagic, static_cast<std::int64_t>(m.kind), static_cast<std::int64_t>(m.version),
          static_cast<std::int64_t>(m.extra), static_cast<std::int64_t>(m.payload.size())};
}

}  // namespace

std::string_view kind_name(MessageKind kind) {
  switch (kind) {
    case MessageKind::parameters: return "parameters";
    case MessageKind::unroll: return "unroll";
    case MessageKind::gradients: return "gradients";
    case MessageKind::transitions: return "transitions";
    case MessageKind::sample_request: return "sample request";
    case MessageKind::sample: return "sample";
    case MessageKind::priorities: return "priorities";
    case MessageKind::stop: return "stop";
  }
  return "unknown";
}

Message decode_header(const HeaderWords& h, int src, const SizeCheck& check) {
  if (h[0] != kMagic)
    throw CommError(cat("rank ", src, " sent something that is not a distml RL message"));
  const auto kind = static_cast<MessageKind>(h[1]);
  if (kind_name(kind) == "unknown")
    throw CommError(cat("rank ", src, " sent a message of unknown kind ", h[1]));
  if (h[4] < 0)
    throw CommError(cat("rank ", src, " sent a ", kind_name(kind), " of negative size"));
  try {
    check(kind, static_cast<std::uint64_t>(h[4]));
  } catch (const CommError& e) {
    throw CommError(cat("rank ", src, ": ", e.what()));
  }
  return {kind, static_cast<std::uint64_t>(h[2]), static_cast<std::uint64_t>(h[3]),
          std::vector<float>(static_cast<std::size_t>(h[4]))};
}

void send_message(comm::Communicator& comm, int dst, Channel channel, const Message& message) {
  const HeaderWords header = header_of(message);
  comm.send(comm::cview(header), dst, header_tag(channel));
  if (!message.payload.empty()) comm.send(comm::cview(message.payload), dst, payload_tag(channel));
}

struct PendingSend::Parts {
  HeaderWords header;
  Message message;
  comm::Work header_work, payload_work;
};

PendingSend::PendingSend(comm::Communicator& comm, int dst, Channel channel, Message message)
    : parts_(std::make_shared<Parts>()) {
  parts_->message = std::move(message);
  parts_->header = header_of(parts_->message);
  parts_->header_work = comm.isend(comm::cview(parts_->header), dst, header_tag(channel));
  if (!parts_->message.payload.empty())
    parts_->payload_work =
        comm.isend(comm::cview(parts_->message.payload), dst, payload_tag(channel));
}

PendingSend::~PendingSend() {
  if (!parts_ || (parts_->header_work.test() && parts_->payload_work.test())) return;
  static std::mutex mutex;
  static auto* kept = new std::vector<std::shared_ptr<Parts>>;  // never freed, on purpose
  std::lock_guard lock(mutex);
  kept->push_back(std::move(parts_));
}

bool PendingSend::done() {
  if (!parts_->header_work.test() || !parts_->payload_work.test()) return false;
  wait();  // rethrows a failure
  return true;
}

void PendingSend::wait() {
  parts_->header_work.wait();
  parts_->payload_work.wait();
}

struct MessageListener::Header {
  HeaderWords words{};
};

MessageListener::MessageListener(comm::Communicator& comm, int src, Channel channel,
                                 SizeCheck check)
    : comm_(comm), src_(src), channel_(channel), check_(std::move(check)) {
  post();
}

void MessageListener::post() {
  header_ = std::make_shared<Header>();
  pending_ = comm_.irecv(comm::view(header_->words), src_, header_tag(channel_));
}

bool MessageListener::ready() { return pending_.test(); }

Message MessageListener::take() {
  pending_.wait();
  Message m = decode_header(header_->words, src_, check_);
  if (!m.payload.empty()) comm_.recv(comm::view(m.payload), src_, payload_tag(channel_));
  post();
  return m;
}

void wait_serving(PendingSend& send, int dst, MessageListener& listener,
                  const std::function<void(Message)>& on_message, comm::Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!send.done()) {
    if (Clock::now() > deadline)
      throw TimeoutError(
          cat("rank ", dst, " did not take a message within ", timeout.count() / 1000.0, " s"));
    if (listener.ready())
      on_message(listener.take());
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

SizeCheck exact_size(MessageKind kind, std::uint64_t floats) {
  return [kind, floats](MessageKind got, std::uint64_t size) {
    if (got == MessageKind::stop && size == 0) return;
    if (got != kind)
      throw CommError(cat("expected a ", kind_name(kind), " message, got a ", kind_name(got)));
    if (size != floats)
      throw CommError(
          cat("a ", kind_name(kind), " message of ", size, " floats, expected ", floats));
  };
}

}  // namespace distml::rl
