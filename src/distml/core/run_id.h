// A run's id: one per run, shared by its ranks and kept across its restarts, so that what a
// run writes (its checkpoints, train/checkpoint_owner.h) can be told from another run's.
#pragma once

#include <cstddef>
#include <string>

namespace distml {

/// The variable that carries a run's id to its ranks and restarts (distml launch sets it).
inline constexpr const char* kRunIdVar = "DISTML_RUN_ID";

/// The longest run id.
inline constexpr std::size_t kRunIdBytes = 16;

/// This process's run: $DISTML_RUN_ID when set, else a new random id that is then set, so
/// that the processes this one starts (ranks, restarts) belong to the same run. UsageError
/// when the variable is not 1-16 letters, digits, '-', '_' or '.'.
std::string this_run_id();

}  // namespace distml
