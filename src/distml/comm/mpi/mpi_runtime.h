// The process-wide side of MPI, which the library itself makes process-wide: initialisation
// (once, with a timeout), finalisation at exit, error codes, and requests whose owner gave
// up on them. Private to comm/mpi/.
//
// Finalisation at exit, step by step:
//  1. connect_engine registers an exit handler before it starts MPI_Init_thread.
//  2. At exit, if distml did not initialise MPI, or MPI_Init never completed (a timeout),
//     nothing happens.
//  3. Otherwise the handler tests the abandoned requests (those whose owner timed out or was
//     destroyed first) for up to kExitDrain, and waits that long for requests still owned
//     elsewhere.
//  4. If every operation has completed, it calls MPI_Finalize. If some are still pending,
//     a peer may never arrive, and MPI_Finalize (which waits for every rank) could hang: the
//     handler says so on stderr and ends the process with exit code 1 without it, so that
//     mpirun stops the whole job at once (a rank still in MPI_Finalize would otherwise wait
//     for the job to notice) - which is right, since a timeout is a failure.
// MPI_Finalize runs on the exiting thread, not necessarily the helper thread that called
// MPI_Init_thread; with MPI_THREAD_MULTIPLE Open MPI allows this.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <string_view>

#include "distml/comm/types.h"

namespace distml::comm::mpi {

/// How long the exit handler waits for pending operations before giving up on MPI_Finalize.
inline constexpr Millis kExitDrain{2'000};

/// Initialises MPI once per process with MPI_THREAD_MULTIPLE, on a helper thread so that a
/// rank that never starts gives TimeoutError instead of a hang. A later call after a timeout
/// waits again for the same initialisation. Checks the thread level and MPI_TAG_UB. Unless
/// the environment already chooses one, it sets Open MPI's nonblocking all-reduce algorithm
/// to reduce-scatter + allgather first (libnbc's default is 2x slower from 64 KiB up).
void ensure_initialised(Millis timeout);

/// MPI's text for an error code: "MPI_ERR_TRUNCATE: message truncated".
std::string error_string(int rc);

/// Throws CommError "what: <MPI's message>" unless rc is MPI_SUCCESS.
void check(int rc, std::string_view what);

/// Counts started and finished operations, so that the exit handler knows whether any is
/// still pending. Every posted MPI request is counted once each way.
void note_started();
void note_finished();

/// Takes over an incomplete request whose owner is giving up on it (timeout, destruction).
/// It is tested again whenever another one is abandoned and at exit, and freed once complete.
/// `keep_alive` holds what MPI may still read or write (count arrays, a new communicator).
void abandon(MPI_Request request, std::shared_ptr<void> keep_alive = {});

}  // namespace distml::comm::mpi
