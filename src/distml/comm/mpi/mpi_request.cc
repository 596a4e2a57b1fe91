#include "distml/comm/mpi/mpi_request.h"

#include <thread>

#include "distml/comm/mpi/mpi_runtime.h"
#include "distml/core/error.h"

namespace distml::comm::mpi {
namespace {

// How long a destroyed receive that was already matched may take to finish its transfer
// before it is handed to the runtime.
constexpr Millis kCancelGrace{50};

// Frees a request that an MPI call left behind after failing (Open MPI usually frees it).
void drop_failed(MPI_Request& request) {
  if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);
  request = MPI_REQUEST_NULL;
}

bool is_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

}  // namespace

TransferRequest::TransferRequest(bool is_send, void* data, std::size_t bytes, int peer, int tag,
                                 MPI_Comm comm, const CountLimits& limits)
    : is_send_(is_send), bytes_(bytes), peer_(peer), tag_(tag), type_(MPI_BYTE, bytes, limits) {
  int rc = is_send ? MPI_Isend(data, type_.count(), type_.type(), peer, tag, comm, &request_)
                   : MPI_Irecv(data, type_.count(), type_.type(), peer, tag, comm, &request_);
  check(rc, describe());
  note_started();
}

TransferRequest::~TransferRequest() {
  if (done_ || request_ == MPI_REQUEST_NULL || is_finalized()) return;
  int flag = 0;
  int rc = MPI_Test(&request_, &flag, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS || flag) {
    drop_failed(request_);
    note_finished();
    return;
  }
  if (!is_send_) {
    // An unmatched receive completes as cancelled at once; a matched one finishes its data.
    MPI_Cancel(&request_);
    const auto until = Clock::now() + kCancelGrace;
    do {
      rc = MPI_Test(&request_, &flag, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS || flag) {
        drop_failed(request_);
        note_finished();
        return;
      }
      std::this_thread::yield();
    } while (Clock::now() < until);
  }
  abandon(request_);
}

std::string TransferRequest::describe() const {
  return describe_transfer(is_send_, peer_, tag_, bytes_);
}

bool TransferRequest::test() {
  std::lock_guard lock(mutex_);
  if (!error_.empty()) throw CommError(error_);
  if (done_) return true;
  int flag = 0;
  MPI_Status status;
  int rc = MPI_Test(&request_, &flag, &status);
  if (rc != MPI_SUCCESS) {
    drop_failed(request_);
    done_ = true;
    note_finished();
    int error_class = MPI_SUCCESS;
    MPI_Error_class(rc, &error_class);
    if (!is_send_ && error_class == MPI_ERR_TRUNCATE)
      error_ = cat("recv from rank ", peer_, " (tag ", tag_, "): expected ", bytes_,
                   " bytes but the message is longer (", error_string(rc),
                   ") - ranks passed different counts or dtypes to the same operation");
    else
      error_ = cat(describe(), " failed: ", error_string(rc));
    throw CommError(error_);
  }
  if (!flag) return false;
  done_ = true;
  note_finished();
  if (!is_send_) {
    if (std::string why = mismatch_error(status); !why.empty()) {
      error_ = std::move(why);
      throw CommError(error_);
    }
  }
  return true;
}

std::string TransferRequest::mismatch_error(MPI_Status& status) const {
  MPI_Count got = 0;
  if (type_.derived()) {
    if (int rc = MPI_Get_elements_x(&status, type_.type(), &got); rc != MPI_SUCCESS)
      return cat(describe(), ": MPI_Get_elements_x failed: ", error_string(rc));
  } else {
    int n = 0;
    if (int rc = MPI_Get_count(&status, MPI_BYTE, &n); rc != MPI_SUCCESS)
      return cat(describe(), ": MPI_Get_count failed: ", error_string(rc));
    got = n;
  }
  if (got == static_cast<MPI_Count>(bytes_)) return {};
  return size_mismatch(peer_, tag_, bytes_, static_cast<std::size_t>(got)).what();
}

PendingCollective::~PendingCollective() {
  if (is_finalized()) return;
  for (std::size_t i = done_; i < requests_.size(); ++i)
    if (requests_[i] != MPI_REQUEST_NULL) abandon(requests_[i], keep_alive_);
}

MPI_Request* PendingCollective::slot() {
  requests_.push_back(MPI_REQUEST_NULL);
  return &requests_.back();
}

void PendingCollective::posted(int rc) {
  if (rc != MPI_SUCCESS) {
    drop_failed(requests_.back());
    requests_.pop_back();
    throw CommError(cat(what_, " (mpi engine) could not start: ", error_string(rc)));
  }
  note_started();
}

bool PendingCollective::test() {
  for (; done_ < requests_.size(); ++done_) {
    MPI_Request& request = requests_[done_];
    int flag = 0;
    int rc = MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      drop_failed(request);
      note_finished();
      ++done_;
      throw CommError(cat(what_, " (mpi engine) failed: ", error_string(rc)));
    }
    if (!flag) return false;
    note_finished();
  }
  return true;
}

void PendingCollective::wait(Deadline deadline) {
  if (!poll_until(*this, deadline))
    throw TimeoutError(cat(what_, " (mpi engine): not complete at the deadline"));
}

}  // namespace distml::comm::mpi
