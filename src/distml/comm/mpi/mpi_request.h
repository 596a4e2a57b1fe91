// Requests of the mpi engine: one point-to-point transfer, and the waiting of a native
// collective for its deadline. Private to comm/mpi/.
#pragma once

#include <mpi.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distml/comm/mpi/mpi_types.h"
#include "distml/comm/request.h"

namespace distml::comm::mpi {

/// An MPI_Isend or MPI_Irecv of `bytes` bytes. A receive that gets another byte count fails
/// with size_mismatch's CommError; a failed request rethrows the same error on every later
/// test() or wait_until(). Safe to test from several threads.
///
/// Destroying it before completion: a receive is cancelled (and, if it was already matched,
/// given a moment to finish); a send cannot be cancelled in Open MPI and is handed to the
/// runtime, which frees it once it completes. Either way MPI may still read the send buffer,
/// or write a matched receive buffer, after the destructor returns: keep the buffer alive or
/// let the process exit, as the Request contract says.
class TransferRequest final : public Request {
 public:
  /// Posts the transfer; throws CommError if MPI refuses it.
  TransferRequest(bool is_send, void* data, std::size_t bytes, int peer, int tag, MPI_Comm comm,
                  const CountLimits& limits);
  ~TransferRequest() override;

  bool test() override;
  bool wait_until(Deadline deadline) override { return poll_until(*this, deadline); }
  std::string describe() const override;

 private:
  std::string mismatch_error(MPI_Status& status) const;

  const bool is_send_;
  const std::size_t bytes_;
  const int peer_, tag_;
  CountedType type_;
  std::mutex mutex_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  bool done_ = false;
  std::string error_;
};

/// The requests of one native collective (one, or several for counts beyond `int`):
///   PendingCollective op("allreduce");
///   op.posted(MPI_Iallreduce(..., op.slot()));
///   op.wait(deadline);
/// wait() polls MPI_Test with poll_until's back-off; it throws CommError naming the operation
/// if one fails and TimeoutError "allreduce (mpi engine): not complete at the deadline" at
/// the deadline. Requests still incomplete when it is destroyed (after a failure or timeout)
/// go to the runtime, with what keep_alive() was given (count arrays MPI may still read).
class PendingCollective final : public Request {
 public:
  explicit PendingCollective(const char* what) : what_(what) {}
  ~PendingCollective() override;
  PendingCollective(const PendingCollective&) = delete;
  PendingCollective& operator=(const PendingCollective&) = delete;

  /// Where the next call stores its request.
  MPI_Request* slot();
  /// Checks the return code of the call that just filled slot(); throws CommError.
  void posted(int rc);
  void keep_alive(std::shared_ptr<void> data) { keep_alive_ = std::move(data); }
  /// Blocks until every request is complete; throws as described above.
  void wait(Deadline deadline);

  bool test() override;
  bool wait_until(Deadline deadline) override { return poll_until(*this, deadline); }
  std::string describe() const override { return what_; }

 private:
  const char* what_;
  std::vector<MPI_Request> requests_;
  std::size_t done_ = 0;  // requests_[0, done_) are complete
  std::shared_ptr<void> keep_alive_;
};

}  // namespace distml::comm::mpi
