// keep_freed_memory_for_reuse against what glibc does by default with a training step's memory:
// twenty 1 MiB blocks allocated, written and freed, step after step. By default the first
// step's frees raise the mmap threshold to ~1 MiB and the trim threshold to twice that, so the
// blocks come from the heap, whose 20 MiB free top is then above the trim threshold and goes
// back to the system at every step's end: the next step faults all 5 120 of its pages in again.
// With the thresholds fixed the heap keeps them and a step faults in none (a few for the
// bookkeeping at most: the bound of 100 is 2% of the churn).
#include <sys/resource.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "distml/core/allocator.h"

namespace distml {
namespace {

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

void step() {
  std::vector<void*> blocks;
  for (int i = 0; i < 20; ++i) {
    blocks.push_back(std::malloc(1 << 20));
    std::memset(blocks.back(), i, 1 << 20);
    asm volatile("" : : "r"(blocks.back()) : "memory");  // written: not optimised away
  }
  for (void* b : blocks) std::free(b);
}

TEST(Allocator, AStepReusesThePreviousStepsMemory) {
  keep_freed_memory_for_reuse();
  step();
  step();
  const long before = minor_faults();
  for (int i = 0; i < 5; ++i) step();
  EXPECT_LT((minor_faults() - before) / 5, 100);
}

}  // namespace
}  // namespace distml
