// The in-process engine: N ranks as threads of one process. Point-to-point is a rendezvous
// (the receiver copies straight from the sender's buffer); native collectives read the
// peers' buffers directly through shared memory. Used by unit tests at any world size and
// by `--engine local` runs.
#pragma once

#include <functional>
#include <memory>

#include "distml/comm/communicator.h"

namespace distml::comm::local {

struct Group;

/// One world of `size` ranks. Each rank's thread calls connect(rank) once.
class LocalWorld {
 public:
  explicit LocalWorld(int size);
  ~LocalWorld();
  int size() const { return size_; }
  /// Builds rank `rank`'s communicator; blocks in the start-up handshake like other engines.
  std::unique_ptr<Communicator> connect(int rank, const CommOptions& options = {});

 private:
  int size_;
  std::shared_ptr<Group> group_;
};

/// Runs fn(comm) on `size` threads, one rank each, and rethrows the first exception (after
/// all threads have finished).
void run_ranks(int size, const CommOptions& options, const std::function<void(Communicator&)>& fn);

}  // namespace distml::comm::local
