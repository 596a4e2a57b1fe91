// glibc's malloc, set for a training loop. By default it gives freed memory back to the system
// (blocks above the mmap threshold are unmapped at free, the heap's free top is trimmed) and
// adapts both thresholds to the frees it has seen. A training step allocates and frees the same
// tensors every step, so whether a run reused them or faulted in fresh pages every step depended
// on where the thresholds had settled: lenet5 at 2 ranks ran either with ~0 page faults a step
// or with ~2 000 and at a fifth of the speed, run by run (docs/benchmarks.md).
#pragma once

#include <cstddef>

namespace distml {

/// Fixed thresholds instead of adaptive ones: blocks up to 32 MiB (the largest threshold glibc
/// accepts) come from the heap, and up to 256 MiB of freed heap stays in the process for the
/// next step. Leaves the allocator alone where the user set it (GLIBC_TUNABLES naming
/// glibc.malloc, MALLOC_TRIM_THRESHOLD_ or MALLOC_MMAP_THRESHOLD_) and where the C library is
/// not glibc. Call it once, early: main, or when the Python module loads.
void keep_freed_memory_for_reuse();

/// Blocks of `bytes` and more mapped on their own, unmapped at free, from now on (where the user
/// left the allocator alone). For ZeRO stage 3, whose large blocks (a layer's gradient) live
/// for part of a step: in the heap, the other sizes allocated between them split their holes,
/// so the heap grows a block a layer and stays grown.
void return_large_blocks_at_free(std::size_t bytes);

/// Gives the heap's free memory back to the system now (malloc_trim; nothing where the C
/// library is not glibc): for one-off moments after which the process holds much less than
/// before (ZeRO stage 3 once its parameters are sharded), not for every step.
void give_freed_memory_back();

}  // namespace distml
