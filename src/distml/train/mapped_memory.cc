#include "distml/train/mapped_memory.h"

#include <c10/core/CPUAllocator.h>
#include <sys/mman.h>

#include "distml/core/error.h"

namespace distml::train {
namespace {

struct Mapping {
  void* base;
  std::size_t bytes;
};

void unmap(void* context) {
  auto* m = static_cast<Mapping*>(context);
  munmap(m->base, m->bytes);
  delete m;
}

}  // namespace

at::DataPtr allocate_returned_at_free(std::size_t bytes, c10::Device device) {
  if (bytes < mapped_from_bytes) return c10::GetCPUAllocator()->allocate(bytes);
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (base == MAP_FAILED) throw Error(cat("cannot map ", bytes, " bytes of memory"));
  return at::DataPtr(base, new Mapping{base, bytes}, &unmap, device);
}

torch::Tensor empty_returned_at_free(std::int64_t elements, const torch::TensorOptions& options) {
  auto t = torch::empty({elements}, options);
  auto& storage = *t.storage().unsafeGetStorageImpl();
  storage.set_data_ptr_noswap(
      allocate_returned_at_free(static_cast<std::size_t>(elements) * t.element_size(), t.device()));
  return t;
}

}  // namespace distml::train
