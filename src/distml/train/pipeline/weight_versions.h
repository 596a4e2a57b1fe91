// The weights an asynchronous pipeline stage (the pipedream schedule) runs each micro-batch
// with. The stage updates its weights after every micro-batch's backward, so by the time a
// micro-batch comes back for its backward the weights have moved on by the updates of the
// micro-batches that returned in between.
//
// PipeDream's weight stashing (Narayanan et al. 2019), step by step:
//  1. Before a micro-batch's forward, the current weights are stashed under its number.
//  2. Before its backward (which re-computes the forward with autograd), the stash is put in
//     place of the weights, so the backward differentiates the function the forward computed.
//  3. After the backward the current weights come back and the stash is dropped; the update
//     then applies the gradient to the current weights.
// SpecTrain (Chen et al. 2018) instead predicts, at the forward, the weights the backward will
// meet `ahead` updates later from the momentum: W - ahead x lr x v (for momentum SGD the
// smoothed step per update is lr x v). The forward runs with the prediction; the backward with
// the current weights, which the prediction aimed at; nothing is stashed.
// With `log`, each micro-batch's passes are logged (the updates done before each, and a hash
// of the weights each ran with), so that tests can check which weights each pass saw.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

namespace distml::train::pipeline {

/// lr x the momentum of each parameter, in order (zeros before the first update).
using VelocityFn = std::function<std::vector<torch::Tensor>()>;

/// W - ahead x velocity, parameter by parameter: SpecTrain's prediction.
std::vector<torch::Tensor> predicted_weights(const std::vector<torch::Tensor>& weights,
                                             const std::vector<torch::Tensor>& velocity, int ahead);

class WeightVersions {
 public:
  /// `params` are the stage's; with `velocity`, SpecTrain predicts instead of stashing.
  WeightVersions(std::vector<torch::Tensor> params, VelocityFn velocity = {}, bool log = false);

  void before_forward(int micro, int ahead);  // 1. (or the prediction)
  void after_forward(int micro);              // SpecTrain: the current weights back
  void before_backward(int micro);            // 2.
  void after_backward(int micro);             // 3.
  /// The optimizer updated the weights.
  void updated() { ++version_; }

  struct Use {
    int micro;
    std::int64_t forward_version, backward_version;  // updates done before each pass
    std::uint64_t forward_hash, backward_hash;       // of the weights each pass ran with
  };
  /// With `log`: every micro-batch's passes, in the order their backwards ran.
  const std::vector<Use>& uses() const { return uses_; }

 private:
  void load(const std::vector<torch::Tensor>& weights);
  std::vector<torch::Tensor> copy() const;
  std::uint64_t hash() const;

  std::vector<torch::Tensor> params_;
  VelocityFn velocity_;
  bool log_;
  std::int64_t version_ = 0;
  std::map<int, std::vector<torch::Tensor>> stash_;  // by micro-batch
  std::map<int, Use> open_;                          // forwards whose backward is to come
  std::vector<torch::Tensor> current_;               // while a pass runs with other weights
  std::vector<Use> uses_;
};

}  // namespace distml::train::pipeline
