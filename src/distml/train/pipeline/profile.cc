#include "distml/train/pipeline/profile.h"

#include <algorithm>

#include "distml/core/clock.h"
#include "distml/core/median.h"
#include "distml/train/autocast_scope.h"
#include "distml/train/generator_state.h"

namespace distml::train::pipeline {
namespace {

double bytes_of(const torch::Tensor& t) {
  return static_cast<double>(t.numel() * t.element_size());
}

}  // namespace

std::vector<LayerCost> profile_layers(
    const std::vector<nn::Layer>& layers, const nn::ModelTensors& tensors,
    const torch::Tensor& input, const std::function<torch::Tensor(const torch::Tensor&)>& loss,
    int reps, bool bf16) {
  const std::size_t n = layers.size();
  std::vector<LayerCost> costs(n);
  std::vector<std::vector<double>> forward(n), backward(n), update(n), copying(n);
  // 3. Copies to update: the parameters, and a momentum buffer per parameter.
  std::vector<std::vector<std::pair<torch::Tensor, torch::Tensor>>> copies(n);
  for (std::size_t l = 0; l < n; ++l)
    for (const auto& p : nn::select_modules(tensors, layers[l].modules).parameters)
      copies[l].emplace_back(p.detach().clone(), torch::zeros_like(p));
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
      {
        const AutocastScope autocast(bf16);
        outputs[l] = layers[l].forward(inputs[l]);
      }
      if (rep > 0) forward[l].push_back(seconds_since(start));
      x = outputs[l];
    }
    // 2. The loss, then backward, last layer first.
    auto start = Clock::now();
    auto last = outputs.back().detach();
    if (bf16 && last.is_floating_point()) last = last.to(torch::kFloat32);
    last.requires_grad_(true);
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
    for (std::size_t l = 0; l < n; ++l) {
      torch::NoGradGuard no_grad;
      start = Clock::now();
      for (auto& [param, momentum] : copies[l]) {
        momentum.mul_(0.9).add_(param);  // stands in for the gradient: the same memory traffic
        param.add_(momentum, -1e-3);
      }
      if (rep > 0) update[l].push_back(seconds_since(start));
      start = Clock::now();
      for (auto& [param, momentum] : copies[l]) momentum.copy_(param);
      if (rep > 0) copying[l].push_back(seconds_since(start));
    }
    if (rep == reps)
      for (std::size_t l = 0; l < n; ++l) costs[l].output_bytes = bytes_of(outputs[l]);
  }
  for (std::size_t l = 0; l < n; ++l) {
    costs[l].forward_s = median(forward[l]);
    costs[l].backward_s = median(backward[l]);
    costs[l].update_s = median(update[l]);
    costs[l].copy_s = median(copying[l]);
    for (const auto& p : nn::select_modules(tensors, layers[l].modules).parameters)
      costs[l].parameter_bytes += bytes_of(p);
  }
  torch::NoGradGuard no_grad;
  for (const auto& p : tensors.parameters) p.mutable_grad() = torch::Tensor();
  for (std::size_t i = 0; i < buffers.size(); ++i) tensors.buffers[i].copy_(buffers[i]);
  set_generator_state(rng);
  return costs;
}

namespace {

std::vector<double> flat(const std::vector<LayerCost>& costs) {
  std::vector<double> out;
  for (const auto& c : costs)
    out.insert(out.end(), {c.forward_s, c.backward_s, c.output_bytes, c.parameter_bytes, c.update_s,
                           c.copy_s});
  return out;
}

void unflat(const std::vector<double>& v, std::vector<LayerCost>& costs) {
  constexpr std::size_t k = 6;  // fields of a LayerCost
  for (std::size_t i = 0; i < costs.size(); ++i)
    costs[i] = {v[k * i], v[k * i + 1], v[k * i + 2], v[k * i + 3], v[k * i + 4], v[k * i + 5]};
}

}  // namespace

void average_over_ranks(std::vector<LayerCost>& costs, comm::Communicator& comm) {
  auto v = flat(costs);
  comm.allreduce(comm::Buffer{v.data(), v.size(), comm::DType::f64}, {.op = comm::ReduceOp::avg});
  unflat(v, costs);
}

void share_rank0s(std::vector<LayerCost>& costs, comm::Communicator& comm) {
  auto v = flat(costs);
  comm.broadcast(comm::Buffer{v.data(), v.size(), comm::DType::f64}, 0);
  unflat(v, costs);
}

}  // namespace distml::train::pipeline
