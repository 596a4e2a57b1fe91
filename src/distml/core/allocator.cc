#include "distml/core/allocator.h"

#include <cstdlib>
#include <cstring>

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace distml {

namespace {

bool user_set_malloc() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  return (tunables && std::strstr(tunables, "glibc.malloc.")) ||
         std::getenv("MALLOC_TRIM_THRESHOLD_") || std::getenv("MALLOC_MMAP_THRESHOLD_");
}

}  // namespace

void keep_freed_memory_for_reuse() {
#ifdef __GLIBC__
  if (user_set_malloc()) return;
  // Both, or the one left alone stays at its default, which is what churns (setting either
  // turns the adaptation off).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

void return_large_blocks_at_free(std::size_t bytes) {
#ifdef __GLIBC__
  if (!user_set_malloc()) mallopt(M_MMAP_THRESHOLD, static_cast<int>(bytes));
#endif
}

void give_freed_memory_back() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

}  // namespace distml
