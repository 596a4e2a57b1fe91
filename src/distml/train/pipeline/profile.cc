#include "distml/train/pipeline/profile.h"

#include <algorithm>

#include "distml/core/clock.h"
#include "distml/train/checkpoint_contents.h"

namespace distml::train::pipeline {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double bytes_of(const torch::Tensor& t) {
  return static_cast<double>(t.numel() * t.element_size());
}

}  // namespace

std::vector<LayerCost> profile_layers(
    const std::vector<nn::Layer>& layers, const nn::ModelTensors& tensors,
    const torch::Tensor& input, const std::function<torch::Tensor(const torch::Tensor&)>& loss,
    int reps) {
  const std::size_t n = layers.size();
  std::vector<LayerCost> costs(n);
  std::vector<std::vector<double>> forward(n), backward(n);
  // 4. What the passes would move.
  const std::string rng = generator_state();
  std::vector<torch::Tensor> buffers;
  for (const auto& b : tensors.buffers) buffers.push_back(b.detach().clone());

  for (int rep = 0; rep <= reps; ++rep) {  // rep 0 warms up
    // 1. Forward, layer by layer.
    std::vector<torch::Tensor> inputs(n), outputs(n);
    torch::Tensor x = input;
    for (std::size_t l = 0; l < n; ++l) {
      inputs[l] = l == 0 ? x : x.detach().requires_grad_(true);
      const auto start = Clock::now();
      outputs[l] = layers[l].forward(inputs[l]);
      if (rep > 0) forward[l].push_back(seconds_since(start));
      x = outputs[l];
    }
    // 2. The loss, then backward, last layer first.
    auto start = Clock::now();
    auto last = outputs.back().detach().requires_grad_(true);
    loss(last).backward();
    double loss_s = seconds_since(start);
    torch::Tensor grad = last.grad();
    for (std::size_t l = n; l-- > 0;) {
      start = Clock::now();
      // A layer with nothing to train before it and no parameters (a flatten) has no backward.
      if (outputs[l].requires_grad()) outputs[l].backward(grad);
      if (rep > 0) backward[l].push_back(seconds_since(start) + (l + 1 == n ? loss_s : 0));
      grad = inputs[l].grad();
    }
    if (rep == reps)
      for (std::size_t l = 0; l < n; ++l) costs[l].output_bytes = bytes_of(outputs[l]);
  }
  for (std::size_t l = 0; l < n; ++l) {
    costs[l].forward_s = median(forward[l]);
    costs[l].backward_s = median(backward[l]);
    for (const auto& p : nn::select_modules(tensors, layers[l].modules).parameters)
      costs[l].parameter_bytes += bytes_of(p);
  }
  torch::NoGradGuard no_grad;
  for (const auto& p : tensors.parameters) p.mutable_grad() = torch::Tensor();
  for (std::size_t i = 0; i < buffers.size(); ++i) tensors.buffers[i].copy_(buffers[i]);
  set_generator_state(rng);
  return costs;
}

void average_over_ranks(std::vector<LayerCost>& costs, comm::Communicator& comm) {
  std::vector<double> flat;
  for (const auto& c : costs)
    flat.insert(flat.end(), {c.forward_s, c.backward_s, c.output_bytes, c.parameter_bytes});
  comm.allreduce(comm::Buffer{flat.data(), flat.size(), comm::DType::f64},
                 {.op = comm::ReduceOp::avg});
  for (std::size_t i = 0; i < costs.size(); ++i)
    costs[i] = {flat[4 * i], flat[4 * i + 1], flat[4 * i + 2], flat[4 * i + 3]};
}

}  // namespace distml::train::pipeline
