// The conformance test's reference: one process that computes, in float64, what a cell of the
// matrix must compute, written from the papers' and the docs' formulas with plain tensor
// arithmetic and autograd, not with distml's strategies, compressors or pipeline.
//
// It keeps every data-parallel replica's whole model and momentum. A step computes each
// replica's gradient on its rows, then hands each "unit" (a stage's parameters, or a tensor
// rank's slices of them: what one strategy instance keeps consistent over the replicas) to the
// strategy's rule: synchronous SGD (all-reduce, ZeRO, parameter server, hybrid), local SGD
// (post-local SGD's second phase), EASGD or gossip, each with its compressor (fp16, top-k and
// PowerSGD with error feedback). Pipedream and ddg change when each stage's gradient is taken
// and at which weights: they have their own loops.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "conformance_table.h"

namespace distml::train::conformance {

struct Setup {
  bool fasttext = false;               // else the mlp [6, 8, 8, 8, 3]
  torch::Tensor x, y;                  // the training rows: features (float64), labels
  std::vector<torch::Tensor> initial;  // the model's parameters in module order, float64
};

/// The model the run stands for after its kSteps steps (the replicas' consensus), parameters
/// in module order.
std::vector<torch::Tensor> reference_run(const Cell& c, const Setup& setup);

}  // namespace distml::train::conformance
