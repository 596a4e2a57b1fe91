// What every strategy does with whole replicas: start them from rank 0's model, average
// them, and find the optimizer state that travels with them.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/core/fnv1a.h"
#include "distml/nn/model_tensors.h"
#include "distml/train/strategies/flat_parameter.h"

namespace distml::train {

/// The parameters a strategy keeps consistent: those that require a gradient, in module order.
struct TrainableParameters {
  std::vector<std::string> names;
  std::vector<torch::Tensor> tensors;
};

/// Collective. The parameters that train (requiring gradients), once every rank is found to
/// have built a model with the same parameter names and shapes (CommError on every rank
/// otherwise).
TrainableParameters trainable_like_rank0(const nn::ModelTensors& model, comm::Communicator& comm);

/// Collective. trainable_like_rank0(), then copies rank 0's parameters and buffers to all.
TrainableParameters start_from_rank0(const nn::ModelTensors& model, comm::Communicator& comm);

/// Collective. Makes the buffers (BatchNorm running statistics) the same on every rank:
/// floating-point ones become their average over the ranks, counters take rank 0's value.
void agree_on_buffers(std::span<const torch::Tensor> buffers, comm::Communicator& comm);

/// Collective. The ranks whose `value` differs from rank 0's (none: the ranks agree).
std::vector<int> ranks_unlike_rank0(std::uint64_t value, comm::Communicator& comm);

/// Adds the tensor's bytes to a checksum.
void mix_into(Fnv1a& checksum, const torch::Tensor& t);

/// A checksum (FNV-1a) of the parameters and buffers.
std::uint64_t checksum(const nn::ModelTensors& model);

/// Collective. `value`, a checksum of this rank's replica; an InternalError naming a rank
/// whose value is not rank 0's (its replica is not bit for bit rank 0's).
std::uint64_t check_replicas_agree(std::uint64_t value, comm::Communicator& comm);
inline std::uint64_t check_replicas_agree(const nn::ModelTensors& model, comm::Communicator& comm) {
  return check_replicas_agree(checksum(model), comm);
}

/// Collective. Replaces each tensor by its average over the ranks (one all-reduce over a flat
/// copy; all tensors must share a dtype). Returns the payload bytes sent. With `distance`, also
/// stores there the consensus_distance() of the replicas to that average before it replaced
/// them (one more scalar all-reduce).
std::size_t average_across_ranks(std::span<const torch::Tensor> tensors, comm::Communicator& comm,
                                 double* distance = nullptr);

/// Collective. sqrt(mean over ranks of ||own - target||^2): how far the ranks' replicas `own`
/// (flat) are from the model `target` (their average, or EASGD's centre).
double consensus_distance(const torch::Tensor& own, const torch::Tensor& target,
                          comm::Communicator& comm);

/// The tensors, flattened and concatenated into one new contiguous tensor (one dtype).
torch::Tensor flat_copy(std::span<const torch::Tensor> tensors);

/// Copies `flat` (as flat_copy() lays it out) back into the tensors.
void copy_from_flat(const torch::Tensor& flat, std::span<const torch::Tensor> tensors);

/// The per-element tensors of one parameter's SGD, Adam or AdamW state (momentum; Adam's
/// moments), in a fixed order; what else it holds (Adam's step count) is the same for every
/// element. InternalError for a state of another kind.
std::vector<torch::Tensor*> element_state(torch::optim::OptimizerParamState& state);

/// The floating-point state tensors of `optimizer` (momentum buffers, Adam moments), in
/// parameter order, so that replicas can average them. Empty before the first step.
std::vector<torch::Tensor> optimizer_state_tensors(torch::optim::Optimizer& optimizer);

/// Tensors over the parameters' memory (no copy). UsageError naming `who` for a dtype other
/// than float32 or float64.
std::vector<torch::Tensor> tensors_over(const std::vector<FlatParameter>& params, const char* who);

/// All-reduce bytes of a set of tensors, for the stats.
std::size_t payload_bytes(std::span<const torch::Tensor> tensors);

}  // namespace distml::train
