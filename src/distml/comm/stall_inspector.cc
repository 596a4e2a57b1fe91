#include "distml/comm/stall_inspector.h"

#include <algorithm>
#include <cstdio>

#include "distml/comm/protocol_tags.h"

namespace distml::comm {
namespace {

constexpr int kStallTag = protocol_tag::kStall;
constexpr Millis kTick{100};
constexpr Millis kAnswerWait{1000};

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

StallInspector::StallInspector(Engine& engine, Millis warn_after, Millis last_ask,
                               std::function<void(const std::string&)> log)
    : engine_(engine),
      warn_after_(warn_after),
      last_ask_(last_ask),
      log_(std::move(log)),
      inbox_(engine.size()),
      recvs_(engine.size()) {
  for (int peer = 0; peer < engine_.size(); ++peer)
    if (peer != engine_.rank())
      recvs_[peer] =
          engine_.irecv(Channel::collective, &inbox_[peer], sizeof(Status), peer, kStallTag);
  thread_ = std::thread([this] { loop(); });
}

StallInspector::~StallInspector() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

void StallInspector::entered(std::uint64_t seq, std::string what) {
  std::lock_guard lock(mutex_);
  in_op_ = true;
  seq_ = seq;
  what_ = std::move(what);
  since_ = Clock::now();
}

std::string StallInspector::last_report() {
  std::lock_guard lock(mutex_);
  return report_;
}

void StallInspector::left() {
  std::lock_guard lock(mutex_);
  in_op_ = false;
  report_.clear();
  ++seq_;
  since_ = Clock::now();
}

StallInspector::Status StallInspector::own_status(bool ask) {
  std::lock_guard lock(mutex_);
  const auto ms = std::chrono::duration_cast<Millis>(Clock::now() - since_).count();
  return {seq_, (in_op_ ? kInOperation : 0) | (ask ? kAsks : 0),
          static_cast<std::uint32_t>(std::min<long long>(ms, 0xffffffffLL))};
}

void StallInspector::send_to(int peer, const Status& s) {
  auto status = std::make_unique<Status>(s);
  auto request = engine_.isend(Channel::collective, status.get(), sizeof(Status), peer, kStallTag);
  sends_.push_back({std::move(status), std::move(request)});
}

std::string StallInspector::describe_peer(int peer, const Status* answer, std::uint64_t seq) {
  if (!answer) return cat("rank ", peer, " (no answer: stopped, or its process hangs)");
  const bool in_op = answer->flags & kInOperation;
  if (answer->seq > seq || (answer->seq == seq && in_op)) return "";
  const long long s = answer->for_ms / 1000;
  if (in_op) return cat("rank ", peer, " (in operation #", answer->seq, " for ", s, " s)");
  return cat("rank ", peer, " (outside any operation for ", s, " s; its next is #", answer->seq,
             ")");
}

// Each tick: answer and record what peers sent; when stalled past the next warning, ask them
// all, and a second later log who is missing. Failures of these messages are ignored: a peer
// that went away is reported as not answering, and the job's own timeout ends it.
void StallInspector::loop() {
  const int p = engine_.size(), me = engine_.rank();
  std::vector<Status> answers(p);
  std::vector<bool> answered(p, false);
  std::uint64_t asked_seq = 0;
  auto asked_at = Clock::time_point::max();
  auto next_warning = Clock::time_point::max();
  int warnings = 0;
  std::uint64_t stalled_seq = ~std::uint64_t{0};

  std::unique_lock lock(mutex_);
  while (!stop_cv_.wait_for(lock, kTick, [&] { return stop_; })) {
    const bool in_op = in_op_;
    const std::uint64_t seq = seq_;
    const auto since = since_;
    const std::string what = what_;
    lock.unlock();

    for (int peer = 0; peer < p; ++peer) {
      if (peer == me || !recvs_[peer]) continue;
      bool done = false;
      try {
        done = recvs_[peer]->test();
      } catch (const CommError&) {
        recvs_[peer].reset();  // the peer is gone: it stays unanswered
        continue;
      }
      if (!done) continue;
      const Status got = inbox_[peer];
      if (got.flags & kAsks) send_to(peer, own_status(false));
      if (asked_at != Clock::time_point::max()) {
        answers[peer] = got;
        answered[peer] = true;
      }
      recvs_[peer] =
          engine_.irecv(Channel::collective, &inbox_[peer], sizeof(Status), peer, kStallTag);
    }
    std::erase_if(sends_, [](Outgoing& s) {
      try {
        return s.request->test();
      } catch (const CommError&) {
        return true;
      }
    });

    const auto now = Clock::now();
    if (!in_op || seq != stalled_seq) {  // a new operation (or none): its warnings start over
      stalled_seq = in_op ? seq : ~std::uint64_t{0};
      warnings = 0;
      next_warning = in_op ? since + std::min(warn_after_, last_ask_) : Clock::time_point::max();
      asked_at = Clock::time_point::max();
    }
    if (in_op && now >= next_warning && asked_at == Clock::time_point::max()) {
      std::fill(answered.begin(), answered.end(), false);
      for (int peer = 0; peer < p; ++peer)
        if (peer != me) send_to(peer, own_status(true));
      asked_at = now;
      asked_seq = seq;
    }
    if (asked_at != Clock::time_point::max() && now - asked_at >= kAnswerWait) {
      std::string waits;
      for (int peer = 0; peer < p; ++peer) {
        if (peer == me) continue;
        const auto line = describe_peer(peer, answered[peer] ? &answers[peer] : nullptr, asked_seq);
        if (!line.empty()) waits += cat(waits.empty() ? "" : "; ", line);
      }
      char waited[32];
      std::snprintf(waited, sizeof waited, "%.0f", seconds(now - since));
      const std::string report =
          cat("stall: rank ", me, " has waited ", waited, " s in ", what, "; waiting for ",
              waits.empty() ? "no rank (every rank is in it: one may be slow inside)" : waits);
      log_(report);
      {
        std::lock_guard report_lock(mutex_);
        if (in_op_ && seq_ == asked_seq) report_ = report;
      }
      ++warnings;
      next_warning = since + warn_after_ * (1 << std::min(warnings, 20));
      if (since + last_ask_ > now) next_warning = std::min(next_warning, since + last_ask_);
      asked_at = Clock::time_point::max();
    }
    lock.lock();
  }
}

}  // namespace distml::comm
