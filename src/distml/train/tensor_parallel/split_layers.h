// A stage's layers with their Linear pairs split across the tensor-parallel ranks
// (parallel_linear.h): what `parallel.tensor = T` trains on each rank.
//
// The split, step by step:
//  1. Two consecutive layers whose Linear can be split (nn::Layer::affine), the second
//     without an input transform of its own, form a pair: the first runs column-parallel and
//     its element-wise activation on this rank's slice, the second row-parallel, so the pair
//     costs one all-reduce forward and one backward. The mlp {784, 256, 128, 10} pairs
//     linears.0 with linears.1 and leaves linears.2 whole; LeNet-5 pairs fc1 with fc2.
//  2. Every other layer stays whole on every rank: the same input and the same output
//     gradient reach it on each, so its gradients, and the replicas' updates, agree.
//  3. The slices start as slices of the whole model, which every rank builds from the same
//     seed, so no weights travel at the start.
//  4. gather_into_whole() puts the slices back together in the whole model's Linear layers,
//     so that evaluation, export and the replica check see one model.
#pragma once

#include <vector>

#include "distml/comm/communicator.h"
#include "distml/nn/layers.h"
#include "distml/nn/model_tensors.h"
#include "distml/train/tensor_parallel/parallel_linear.h"

namespace distml::train::tensor_parallel {

class SplitLayers {
 public:
  /// `layers` and their `tensors` (nn::select_modules()) are split over `comm`'s ranks (a
  /// stage without a pair runs whole on each). ConfigError when a pair's hidden width does not
  /// divide by T.
  SplitLayers(const std::vector<nn::Layer>& layers, const nn::ModelTensors& tensors,
              comm::Communicator& comm);

  /// The layers this rank runs: pairs split, the rest whole.
  const std::vector<nn::Layer>& layers() const { return layers_; }
  /// What this rank trains: its slices, the row-parallel biases and the whole layers' tensors.
  const nn::ModelTensors& tensors() const { return tensors_; }

  /// Collective over the tensor ranks: the whole model's split Linear layers get the
  /// slices' current values (step 4 above).
  void gather_into_whole();
  /// The reverse, after the whole model was loaded (a resumed checkpoint): each rank takes
  /// its slices of the whole model's split Linear layers again.
  void slice_from_whole();

 private:
  struct Pair {
    torch::nn::Linear first, second;  // the whole model's
    ColumnParallelLinear column;
    RowParallelLinear row;
  };
  comm::Communicator& comm_;
  std::vector<Pair> pairs_;
  std::vector<nn::Layer> layers_;
  nn::ModelTensors tensors_;
};

/// How many pairs SplitLayers would split in `layers`.
int splittable_pairs(const std::vector<nn::Layer>& layers);

}  // namespace distml::train::tensor_parallel
