#include "distml/train/pipeline/pipeline_stage.h"

#include <algorithm>
#include <optional>

#include "distml/core/clock.h"
#include "distml/core/error.h"
#include "distml/train/checkpoint_contents.h"
#include "distml/train/pipeline/schedule.h"

namespace distml::train::pipeline {

struct PipelineStage::InFlight {
  int micro = 0;
  std::int64_t begin = 0, count = 0;  // its rows of the batch
  torch::Tensor input;   // on stages after the first: a leaf that requires its gradient
  torch::Tensor output;  // the layers' output, or on the last stage the weighted loss (with
                         // recompute: only from the backward's second forward)
  double loss = 0;       // the last stage: the weighted loss
  std::string rng;       // with recompute: the generator before the forward
  int ahead = 0;         // pipedream: this stage's updates between its forward and backward
};

void accumulate(StageStats& totals, const StageStats& step) {
  totals.compute_seconds += step.compute_seconds;
  totals.wait_seconds += step.wait_seconds;
  totals.bytes_sent += step.bytes_sent;
  totals.peak_micro_batches = std::max(totals.peak_micro_batches, step.peak_micro_batches);
  totals.peak_activation_bytes = std::max(totals.peak_activation_bytes, step.peak_activation_bytes);
}

PipelineStage::PipelineStage(comm::Communicator& comm, std::vector<nn::Layer> layers,
                             const nn::ModelTensors& tensors, PipelineOptions options)
    : comm_(comm),
      layers_(std::move(layers)),
      buffers_(tensors.buffers),
      options_(std::move(options)),
      stage_(comm.rank()),
      stages_(comm.size()),
      link_(comm) {
  if (options_.micro_batches < 1)
    throw ConfigError(cat("parallel.micro_batches must be >= 1, got ", options_.micro_batches));
  if (options_.recompute && options_.schedule != "gpipe")
    throw ConfigError("parallel.recompute is gpipe's: set parallel.schedule = \"gpipe\"");
  stage_schedule(options_.schedule, stages_, stage_, 1);  // a ConfigError for an unknown name
  if (options_.schedule == "pipedream")
    versions_ = std::make_unique<WeightVersions>(tensors.parameters, options_.spectrain,
                                                 options_.log_weight_uses);
}

double PipelineStage::step(const torch::Tensor& input, std::int64_t rows, const LossFn& loss,
                           const std::function<void(bool last)>& before_backward,
                           const std::function<void()>& update) {
  stats_ = {};
  // 1. The micro-batches.
  const int m = static_cast<int>(std::min<std::int64_t>(options_.micro_batches, rows));
  std::vector<InFlight> flights(m);
  for (int i = 0, begin = 0; i < m; ++i) {
    flights[i].micro = i;
    flights[i].begin = begin;
    flights[i].count = rows / m + (i < rows % m ? 1 : 0);
    begin += static_cast<int>(flights[i].count);
  }
  const auto steps = stage_schedule(options_.schedule, stages_, stage_, m);
  // Pipedream: how many of this stage's updates come between each forward and its backward.
  for (int done = 0; const auto& s : steps) {
    auto& f = flights[s.micro];
    if (s.forward)
      f.ahead = -done;
    else
      f.ahead += done++;
  }
  int held = 0, backwards_left = m;
  std::int64_t held_bytes = 0;
  auto bytes_of = [](const InFlight& f) {
    std::int64_t b = 0;
    for (const auto* t : {&f.input, &f.output})
      if (t->defined()) b += t->numel() * t->element_size();
    return b;
  };
  for (const auto& s : steps) {
    InFlight& f = flights[s.micro];
    if (s.forward) {
      forward(f, input, rows, loss);
      ++held;
      held_bytes += bytes_of(f);
      if (held > stats_.peak_micro_batches) stats_.peak_micro_batches = held;
      stats_.peak_activation_bytes = std::max(stats_.peak_activation_bytes, held_bytes);
    } else {
      held_bytes -= bytes_of(f);
      backward(f, --backwards_left == 0, rows, loss, before_backward, update);
      --held;
    }
  }
  // 5. Every send done; the batch loss from the last stage.
  const auto wait_start = Clock::now();
  double batch_loss = 0;
  if (is_last())
    for (const auto& f : flights) batch_loss += f.loss;
  try {
    stats_.bytes_sent = link_.flush();
    comm_.broadcast(comm::Buffer{&batch_loss, 1, comm::DType::f64}, stages_ - 1);
  } catch (const CommError& e) {
    rethrow_naming(e, "waiting for the other stages to end the step");
  }
  stats_.wait_seconds += seconds_since(wait_start);
  return batch_loss;
}

// A neighbour's tensor.
torch::Tensor PipelineStage::receive(int peer, int micro, const char* what) {
  const auto wait_start = Clock::now();
  try {
    auto t = link_.recv(peer, micro);
    stats_.wait_seconds += seconds_since(wait_start);
    return t;
  } catch (const CommError& e) {
    rethrow_naming(e, cat("waiting for the ", what, " of micro-batch ", micro, " from stage ", peer,
                          " (rank ", options_.world_rank(peer), ")"));
  }
}

void PipelineStage::rethrow_naming(const CommError& e, const std::string& waiting) const {
  pipeline::rethrow_naming(e, stage_, options_.world_rank(stage_), waiting);
}

// 2. Forward.
void PipelineStage::forward(InFlight& f, const torch::Tensor& input, std::int64_t rows,
                            const LossFn& loss) {
  if (stage_ == 0) {
    f.input = input.narrow(0, f.begin, f.count);
  } else {
    f.input = receive(stage_ - 1, f.micro, "activations").requires_grad_(true);
  }
  const auto start = Clock::now();
  std::optional<torch::NoGradGuard> no_grad;
  if (recomputes()) {
    f.rng = generator_state();
    no_grad.emplace();
  }
  if (versions_) versions_->before_forward(f.micro, f.ahead);
  auto out = compute(f, rows, loss);
  if (versions_) versions_->after_forward(f.micro);
  if (is_last()) {
    // The batch's mean loss, whatever each micro-batch's weight in the gradient.
    f.loss = out.item<double>() * (versions_ ? static_cast<double>(f.count) / rows : 1.0);
  } else {
    link_.send(out, stage_ + 1, f.micro);
  }
  if (!recomputes()) f.output = out;
  stats_.compute_seconds += seconds_since(start);
}

// The stage's layers on the micro-batch's input; on the last stage, its weighted loss (its
// mean loss under pipedream, where it is an update of its own).
torch::Tensor PipelineStage::compute(const InFlight& f, std::int64_t rows, const LossFn& loss) {
  auto out = nn::run_layers(layers_, f.input);
  if (!is_last()) return out;
  const auto mean = loss(out, f.begin, f.count);
  return versions_ ? mean : mean * (static_cast<double>(f.count) / static_cast<double>(rows));
}

// 3. Backward.
void PipelineStage::backward(InFlight& f, bool last, std::int64_t rows, const LossFn& loss,
                             const std::function<void(bool)>& before_backward,
                             const std::function<void()>& update) {
  torch::Tensor grad;
  if (!is_last()) grad = receive(stage_ + 1, f.micro, "gradients");
  const auto start = Clock::now();
  if (versions_) versions_->before_backward(f.micro);
  std::vector<torch::Tensor> kept;  // with recompute: the buffers before the second forward
  if (recomputes()) {
    for (const auto& b : buffers_) kept.push_back(b.detach().clone());
    const std::string now = generator_state();
    set_generator_state(f.rng);
    f.output = compute(f, rows, loss);
    set_generator_state(now);
  }
  before_backward(last || versions_);  // under pipedream every backward ends an update
  if (is_last())
    f.output.backward();
  else if (f.output.requires_grad())  // not so only on a first stage without parameters
    torch::autograd::backward({f.output}, {grad});
  if (recomputes()) {  // after the backward, which checks that its inputs are unchanged
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < buffers_.size(); ++i) buffers_[i].copy_(kept[i]);
  }
  if (versions_) versions_->after_backward(f.micro);
  stats_.compute_seconds += seconds_since(start);
  if (stage_ > 0) {
    const auto& g = f.input.grad();
    link_.send(g.defined() ? g : torch::zeros_like(f.input), stage_ - 1, f.micro);
  }
  f.input = f.output = torch::Tensor();
  if (versions_) {
    update();
    versions_->updated();
  }
}

}  // namespace distml::train::pipeline
