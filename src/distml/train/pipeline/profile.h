// What each layer costs, measured: the input of parallel.partition = "profile" and of
// `distml plan`'s cost model (cost_model.h).
//
// The measurement, step by step:
//  1. The layers run forward one at a time on one micro-batch, each on a detached copy of
//     the previous output, so that each layer's forward and backward can be timed alone.
//  2. The loss runs on the last output and back-propagates to it; its time joins the last
//     layer's backward. Then each layer back-propagates the gradient of its output, last to
//     first.
//  3. A momentum SGD update of each layer's parameters (on copies) is timed too, and one
//     copy of them (what a weight stash costs).
//     One warm-up pass, then `reps` timed ones; each time is the median of its layer's.
//  4. Nothing the run depends on moves: the gradients are cleared, and the buffers (BatchNorm
//     statistics) and the random generator (dropout) are put back.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/nn/layers.h"
#include "distml/nn/model_tensors.h"
#include "distml/train/pipeline/cost_model.h"

namespace distml::train::pipeline {

/// `layers` (with their `tensors`) measured on `input`, one micro-batch; `loss` maps the last
/// output to the scalar loss. With `bf16` each layer's forward runs under autocast, as
/// train.precision = "bf16" runs it, and the loss takes the output in float32.
std::vector<LayerCost> profile_layers(
    const std::vector<nn::Layer>& layers, const nn::ModelTensors& tensors,
    const torch::Tensor& input, const std::function<torch::Tensor(const torch::Tensor&)>& loss,
    int reps = 5, bool bf16 = false);

/// Collective over `comm`: every rank's measurements averaged, so that every rank plans the
/// same from them.
void average_over_ranks(std::vector<LayerCost>& costs, comm::Communicator& comm);
/// Collective over `comm`: rank 0's measurements on every rank (`costs` must have as many
/// layers everywhere).
void share_rank0s(std::vector<LayerCost>& costs, comm::Communicator& comm);

}  // namespace distml::train::pipeline
