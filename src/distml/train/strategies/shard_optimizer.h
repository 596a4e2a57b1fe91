// The optimizer a ZeRO rank steps over its shard: the trainer's kind (SGD, Adam or AdamW) and
// options, over one flat tensor, stepped chunk by chunk. A step over the whole shard would
// make temporaries of its size: Adam's denominator and its square root, twice a quarter of the
// model at 4 ranks, on top of the state ZeRO set out to cut. Over chunks of kChunkBytes they
// are a few MiB, and from the heap (below malloc's mmap threshold), so that steps reuse them.
// These optimizers update element by element, so a chunk follows the trajectory the whole
// tensor would.
//
// The state is saved and loaded as one optimizer over the whole shard would save it, so
// checkpoints do not depend on the chunks, and a resume on another number of ranks reads each
// saved shard's state as one tensor per kind (element_state, replicas.h).
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace distml::train {

class ShardOptimizer {
 public:
  static constexpr std::size_t kChunkBytes = std::size_t{4} << 20;

  /// Of `like`'s kind, over `shard` and the gradient in its .grad(), both of which must stay
  /// the same tensors (written in place), in chunks of `chunk_bytes`. UsageError unless `like`
  /// is an SGD, Adam or AdamW with one parameter group.
  ShardOptimizer(const torch::optim::Optimizer& like, const torch::Tensor& shard,
                 std::size_t chunk_bytes = kChunkBytes);

  /// One step, with `like`'s current options (so that the learning-rate schedule reaches it).
  void step(const torch::optim::Optimizer& like);
  /// The state, as one optimizer over the whole shard saves it.
  std::string save() const;
  /// What save() wrote, for a shard of this size.
  void load(const std::string& bytes);
  /// The state over the whole shard (per-element tensors of its size); null before a step.
  std::unique_ptr<torch::optim::OptimizerParamState> whole_state() const;
  /// Replaces the state with `whole`, over the whole shard (the chunks' states become views
  /// of its tensors).
  void set_whole_state(torch::optim::OptimizerParamState& whole);
  /// Bytes of per-element state held.
  std::size_t state_bytes() const;

  /// The state in `bytes` (as save() writes it) of a shard of `elements`, `like`'s kind; null
  /// where it has none (no step taken; SGD without momentum).
  static std::unique_ptr<torch::optim::OptimizerParamState> read_whole_state(
      const torch::optim::Optimizer& like, const std::string& bytes, std::int64_t elements,
      const torch::TensorOptions& options);

 private:
  void start_adam_state();

  torch::Tensor shard_;
  std::vector<torch::Tensor> chunks_;  // views of the shard, their .grad() views of its
  std::unique_ptr<torch::optim::Optimizer> optimizer_;  // over the chunks
};

}  // namespace distml::train
