// Memory that goes back to the system the moment it is freed, for the large buffers that ZeRO
// stage 3 allocates and frees within every step (gathered layers, gradient buckets).
//
// From malloc, a block under its mmap threshold (32 MiB, core/allocator.h) goes back to the
// heap, where the next allocations of other sizes fragment it: a layer's gradient bucket is a
// few bytes longer than its weight's gradient, so neither fits the hole the other left, and the
// heap grew by a bucket every layer of every step (a 16-layer MLP of 2048 wide, 17 MB a layer,
// with Adam at 4 ranks: 0.18 GB more resident after 10 steps). A mapping of its own is
// unmapped at free instead.
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>

namespace distml::train {

/// Where a block is large enough to map on its own.
inline constexpr std::size_t mapped_from_bytes = 8u << 20;

/// `bytes` for a tensor's storage: 8 MiB and more in a mapping of its own, faulted in at once
/// (MAP_POPULATE: one call, not one fault a page); less from LibTorch's allocator, since mapping
/// and unmapping cost more than their size suggests (the MNIST MLP's 3.2 MB layer mapped at
/// each gather took its steps from 57 to 21 a second) and small blocks fragment the heap little.
at::DataPtr allocate_returned_at_free(std::size_t bytes, c10::Device device);

/// An uninitialised 1-D tensor of `elements`, its storage from allocate_returned_at_free.
torch::Tensor empty_returned_at_free(std::int64_t elements, const torch::TensorOptions& options);

}  // namespace distml::train
