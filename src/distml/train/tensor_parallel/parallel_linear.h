// Tensor (intra-layer) parallelism, Megatron style (Shoeybi et al. 2019): a pair of Linear
// layers split across the T ranks of a communicator so that each rank holds 1/T of both
// weight matrices, with one all-reduce in the forward and one in the backward per pair.
//
// The protocol, step by step, for y = B(act(A x)) with A: in -> hidden, B: hidden -> out:
//  1. A is split by output rows ("column-parallel"): rank r holds rows [r h/T, (r+1) h/T) of
//     A's weight and bias. Its input passes through copy_to_ranks(): the identity in the
//     forward, an all-reduce (sum) of the input's gradient in the backward, since every
//     rank's slice of A contributed a part of it.
//  2. Each rank computes its slice of A x and the element-wise activation on it: no
//     communication, because the activation needs no other rank's columns.
//  3. B is split by input columns ("row-parallel"): rank r holds columns [r h/T, (r+1) h/T)
//     of B's weight and multiplies them by its own slice of the hidden activations, giving a
//     partial sum of B's output; sum_over_ranks() all-reduces the partial sums in the forward
//     (the identity in the backward), and B's bias, replicated, is added once after it.
//  4. Every rank ends with the whole output, and in the backward the same whole output
//     gradient; the gradients of its slices are the slices of the dense layers' gradients.
// The hidden width must be a multiple of T.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "distml/comm/communicator.h"

namespace distml::train::tensor_parallel {

/// The identity forward; the gradient all-reduced (sum) over `comm` backward (1. above).
torch::Tensor copy_to_ranks(const torch::Tensor& x, comm::Communicator& comm);
/// The sum over `comm`'s ranks forward (an all-reduce); the identity backward (3. above).
torch::Tensor sum_over_ranks(const torch::Tensor& x, comm::Communicator& comm);

/// Rows [rank out/T, (rank+1) out/T) of a Linear(in, out): its slice of the output.
class ColumnParallelLinearImpl : public torch::nn::Module {
 public:
  /// Takes its slice of `dense` (weights copied), so that a split model starts where the
  /// dense one does.
  ColumnParallelLinearImpl(const torch::nn::Linear& dense, comm::Communicator& comm);
  /// [B, in] (the same on every rank) -> [B, out / T].
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight, bias;

 private:
  comm::Communicator& comm_;
};
TORCH_MODULE(ColumnParallelLinear);

/// Columns [rank in/T, (rank+1) in/T) of a Linear(in, out); its output summed over the ranks.
class RowParallelLinearImpl : public torch::nn::Module {
 public:
  RowParallelLinearImpl(const torch::nn::Linear& dense, comm::Communicator& comm);
  /// [B, in / T] (this rank's slice) -> [B, out] (the whole output, on every rank).
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight, bias;

 private:
  comm::Communicator& comm_;
};
TORCH_MODULE(RowParallelLinear);

/// The slice [rank n/T, (rank+1) n/T) of dimension `dim` (n must be a multiple of T).
torch::Tensor slice_for_rank(const torch::Tensor& t, std::int64_t dim, comm::Communicator& comm);

}  // namespace distml::train::tensor_parallel
