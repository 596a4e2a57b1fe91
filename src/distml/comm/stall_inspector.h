// The stall inspector: when this rank has waited in one collective for `warn_after`, it asks
// every peer where it is and logs which ranks it waits for, in which operation; then again at
// twice the wait, four times, ... until the operation ends or its timeout ends the job. It
// also asks once just before the timeout (`last_ask`), so that the timeout's error names the
// ranks it waited for however the two durations compare.
//
// The protocol, on the collective channel under its own tag, from one thread per
// communicator (every engine allows point-to-point from a second thread):
//  1. Each rank keeps a receive posted from every peer for a Status (the operation it is in
//     or last left, and whether it asks for an answer).
//  2. A stalled rank sends its Status, with `ask` set, to every peer.
//  3. A rank's inspector answers an asking Status with its own, whatever its main thread
//     does: computing, waiting in the same operation, or in an earlier one.
//  4. One second after asking, the stalled rank logs every peer that is not in its operation:
//     "rank 1: no answer (stopped, or its process hangs)" or "rank 2: in allreduce #527" or
//     "rank 2: computing since #527 ended 61 s ago".
// Nothing is sent while no operation stalls.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "distml/comm/engine.h"

namespace distml::comm {

class StallInspector {
 public:
  /// Starts the inspector's thread; `log` receives each report (from that thread). The asks
  /// come after `warn_after`, twice that, four times, ..., and after `last_ask`.
  StallInspector(Engine& engine, Millis warn_after, Millis last_ask,
                 std::function<void(const std::string&)> log);
  ~StallInspector();
  StallInspector(const StallInspector&) = delete;
  StallInspector& operator=(const StallInspector&) = delete;

  /// The calling rank enters operation `seq`, described as `what` ("allreduce #5 (...)").
  void entered(std::uint64_t seq, std::string what);
  /// ... and has left it.
  void left();
  /// The last report while the current operation stalls ("" when it has not): the
  /// diagnosis its timeout ends the job with.
  std::string last_report();

  /// What travels: 16 bytes.
  struct Status {
    std::uint64_t seq = 0;     // the operation it is in, or the next one it will enter
    std::uint32_t flags = 0;   // kInOperation | kAsks
    std::uint32_t for_ms = 0;  // how long it has been in, or out of, an operation
  };
  static constexpr std::uint32_t kInOperation = 1, kAsks = 2;
  /// One line about `peer` for a rank stalled in operation `seq`, given the peer's answer
  /// (nullptr: none came); "" when the peer is in that operation or past it.
  static std::string describe_peer(int peer, const Status* answer, std::uint64_t seq);

 private:
  void loop();
  Status own_status(bool ask);
  void send_to(int peer, const Status& s);

  Engine& engine_;
  const Millis warn_after_;
  const Millis last_ask_;
  const std::function<void(const std::string&)> log_;

  std::mutex mutex_;  // guards the fields below, shared with the rank's queue thread
  bool in_op_ = false;
  std::uint64_t seq_ = 0;
  std::string what_;
  Clock::time_point since_ = Clock::now();  // entered the operation, or left the last one
  std::string report_;                      // the current operation's last report

  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::vector<Status> inbox_;  // the posted receives' buffers, one per peer
  std::vector<RequestPtr> recvs_;
  struct Outgoing {
    std::unique_ptr<Status> status;  // its buffer, kept until the send completes
    RequestPtr request;
  };
  std::vector<Outgoing> sends_;
  std::thread thread_;
};

}  // namespace distml::comm
