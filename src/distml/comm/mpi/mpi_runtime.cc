#include "distml/comm/mpi/mpi_runtime.h"

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/core/error.h"

namespace distml::comm::mpi {
namespace {

enum class Phase { idle, running, ready, failed };

struct InitState {
  std::mutex mutex;
  std::condition_variable cv;
  Phase phase = Phase::idle;
  bool by_us = false;  // distml called MPI_Init_thread (and so owns MPI_Finalize)
  int rc = MPI_SUCCESS;
  int provided = MPI_THREAD_SINGLE;
  bool tags_checked = false;
};

// Never destroyed: the detached init thread may still write to it while the process exits.
InitState& init_state() {
  static auto* state = new InitState;
  return *state;
}

struct Abandoned {
  MPI_Request request;
  std::shared_ptr<void> keep_alive;
};

struct PendingOps {
  std::atomic<std::int64_t> count{0};
  std::mutex mutex;
  std::vector<Abandoned> abandoned;
};

PendingOps& pending_ops() {
  static auto* ops = new PendingOps;
  return *ops;
}

// Tests each abandoned request once and drops those that have finished (or failed).
void reap_abandoned() {
  auto& ops = pending_ops();
  std::lock_guard lock(ops.mutex);
  std::erase_if(ops.abandoned, [](Abandoned& a) {
    int flag = 0;
    int rc = MPI_Test(&a.request, &flag, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS && !flag) return false;
    if (rc != MPI_SUCCESS && a.request != MPI_REQUEST_NULL) MPI_Request_free(&a.request);
    note_finished();
    return true;
  });
}

void finalize_at_exit() {
  auto& s = init_state();
  {
    std::lock_guard lock(s.mutex);
    if (!s.by_us) return;
    if (s.phase == Phase::running) {
      std::fprintf(stderr,
                   "distml mpi engine: MPI_Init never completed; exiting without "
                   "MPI_Finalize\n");
      return;
    }
    if (s.phase != Phase::ready) return;
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  const auto until = Clock::now() + kExitDrain;
  for (;;) {
    reap_abandoned();
    const auto left = pending_ops().count.load();
    if (left <= 0) break;
    if (Clock::now() >= until) {
      std::fprintf(stderr,
                   "distml mpi engine: %lld MPI operation(s) still pending at exit after a "
                   "failure; skipping MPI_Finalize, which would wait for ranks that may never "
                   "arrive, and exiting with code 1 so that mpirun ends the job at once\n",
                   static_cast<long long>(left));
      std::fflush(stdout);
      std::_Exit(1);
    }
    std::this_thread::sleep_for(Millis(1));
  }
  MPI_Finalize();
}

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "an unknown thread level";
  }
}

// User tags go up to Communicator::kMaxTag; the collective channel's own tags are far lower.
void check_tag_bound() {
  void* value = nullptr;
  int flag = 0;
  check(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &flag),
        "MPI_Comm_get_attr(MPI_TAG_UB)");
  if (!flag || value == nullptr) throw CommError("the MPI library does not report MPI_TAG_UB");
  const int bound = *static_cast<int*>(value);
  if (bound < Communicator::kMaxTag)
    throw CommError(cat("the MPI library allows tags up to ", bound,
                        " (MPI_TAG_UB), but distml needs tags up to ", Communicator::kMaxTag));
}

}  // namespace

void ensure_initialised(Millis timeout) {
  auto& s = init_state();
  std::unique_lock lock(s.mutex);
  if (s.phase == Phase::idle) {
    int finalized = 0, initialised = 0;
    MPI_Finalized(&finalized);
    if (finalized)
      throw CommError("MPI has already been finalised in this process and cannot be restarted");
    MPI_Initialized(&initialised);
    if (initialised) {  // someone else's MPI: use it, leave its finalisation to them
      check(MPI_Query_thread(&s.provided), "MPI_Query_thread");
      s.phase = Phase::ready;
    } else {
      // Open MPI's nonblocking all-reduce (libnbc) picks reduce-then-broadcast for in-place
      // buffers or fewer than 4 ranks: measured here 1.8-2.5x slower than MPI_Allreduce from
      // 64 KiB up. Reduce-scatter + allgather (Rabenseifner) matches it. A value set by the
      // user (mpirun --mca, or the environment) wins; every rank must see the same one.
      setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", /*overwrite=*/0);
      s.by_us = true;
      s.phase = Phase::running;
      std::atexit(finalize_at_exit);
      std::thread([&s] {
        int provided = MPI_THREAD_SINGLE;
        int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
        {
          std::lock_guard done(s.mutex);
          s.rc = rc;
          s.provided = provided;
          s.phase = rc == MPI_SUCCESS ? Phase::ready : Phase::failed;
        }
        s.cv.notify_all();
      }).detach();
    }
  }
  if (!s.cv.wait_for(lock, timeout, [&] { return s.phase != Phase::running; }))
    throw TimeoutError(cat("MPI_Init did not complete within ", timeout.count(),
                           " ms: not every rank of the mpirun job started"));
  if (s.phase == Phase::failed)
    throw CommError(cat("MPI_Init_thread failed: ", error_string(s.rc)));
  if (s.provided < MPI_THREAD_MULTIPLE)
    throw CommError(cat("the MPI library provides only ", thread_level_name(s.provided),
                        ", but distml needs MPI_THREAD_MULTIPLE (point-to-point calls from user "
                        "threads run while a worker thread runs collectives)"));
  if (!s.tags_checked) {
    check_tag_bound();
    s.tags_checked = true;
  }
}

std::string error_string(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) return cat("MPI error code ", rc);
  return std::string(text, static_cast<std::size_t>(length));
}

void check(int rc, std::string_view what) {
  if (rc != MPI_SUCCESS) throw CommError(cat(what, ": ", error_string(rc)));
}

void note_started() { pending_ops().count.fetch_add(1, std::memory_order_relaxed); }
void note_finished() { pending_ops().count.fetch_sub(1, std::memory_order_relaxed); }

void abandon(MPI_Request request, std::shared_ptr<void> keep_alive) {
  if (request != MPI_REQUEST_NULL) {
    auto& ops = pending_ops();
    std::lock_guard lock(ops.mutex);
    ops.abandoned.push_back({request, std::move(keep_alive)});
  }
  reap_abandoned();
}

}  // namespace distml::comm::mpi
