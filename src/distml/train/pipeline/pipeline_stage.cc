#include "distml/train/pipeline/pipeline_stage.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <thread>

#include "distml/core/clock.h"
#include "distml/core/error.h"
#include "distml/train/autocast_scope.h"
#include "distml/train/generator_state.h"
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
      link_(comm),
      rng_(generator_state()) {
  if (options_.micro_batches < 1)
    throw ConfigError(cat("parallel.micro_batches must be >= 1, got ", options_.micro_batches));
  if (options_.recompute && (options_.schedule == "pipedream" || decoupled()))
    throw ConfigError(cat("parallel.schedule = \"", options_.schedule,
                          "\" re-computes its forwards already; parallel.recompute is for "
                          "\"gpipe\" and \"1f1b\""));
  if (decoupled() && options_.micro_batches != 1)
    throw ConfigError(
        cat("parallel.schedule = \"ddg\" pipelines whole batches; "
            "parallel.micro_batches must be 1, got ",
            options_.micro_batches));
  if (!decoupled())
    stage_schedule(options_.schedule, stages_, stage_, 1);  // a ConfigError for an unknown name
  if (options_.schedule == "pipedream" || decoupled())
    versions_ = std::make_unique<WeightVersions>(tensors.parameters, options_.spectrain,
                                                 options_.log_weight_uses);
}

PipelineStage::~PipelineStage() = default;

double PipelineStage::step(const torch::Tensor& input, std::int64_t rows, const LossFn& loss,
                           const std::function<void(bool last)>& before_backward,
                           const std::function<void()>& update) {
  stats_ = {};
  if (decoupled()) return decoupled_step(input, rows, loss, before_backward, update);
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
  // 5. Every send done; the batch loss is the last stage's.
  end_step(false);
  double batch_loss = 0;
  for (const auto& f : flights) batch_loss += f.loss;
  return batch_loss;
}

// The ddg schedule, steps 1 to 3: this step's batch forward, the oldest held one's backward.
double PipelineStage::decoupled_step(const torch::Tensor& input, std::int64_t rows,
                                     const LossFn& loss,
                                     const std::function<void(bool)>& before_backward,
                                     const std::function<void()>& update) {
  InFlight& f = held_.emplace_back();
  f.micro = steps_++;
  f.count = rows;
  forward(f, input, rows, loss);
  const double batch_loss = f.loss;
  stats_.peak_micro_batches = static_cast<int>(held_.size());
  for (const auto& h : held_)
    stats_.peak_activation_bytes += h.input.numel() * h.input.element_size();
  if (std::ssize(held_) > stages_ - 1 - stage_) {  // the delay d = S - 1 - s has passed
    backward(held_.front(), true, rows, loss, before_backward, update);
    held_.pop_front();
  }
  end_step(false);
  return batch_loss;
}

void PipelineStage::drain(const std::function<void(bool)>& before_backward,
                          const std::function<void()>& update) {
  stats_ = {};
  for (; !held_.empty(); held_.pop_front())
    backward(held_.front(), true, held_.front().count, {}, before_backward, update);
  end_step(true);
}

int PipelineStage::tag(const InFlight& f) const { return decoupled() ? f.micro % 2 : f.micro; }

// Straggler experiments: an op that began at `compute_start` takes `slowdown` times as long.
void PipelineStage::straggle(Clock::time_point compute_start) const {
  if (options_.slowdown <= 1) return;
  const double extra = (options_.slowdown - 1) * seconds_since(compute_start);
  std::this_thread::sleep_for(std::chrono::duration<double>(extra));
}

// Waits until the step's sends have arrived (`all_sends`: ddg's delayed gradients too).
void PipelineStage::end_step(bool all_sends) {
  const auto wait_start = Clock::now();
  try {
    stats_.bytes_sent += link_.flush(all_sends);
  } catch (const CommError& e) {
    rethrow_naming(e, "waiting for its sends to its neighbours to arrive");
  }
  stats_.wait_seconds += seconds_since(wait_start);
}

// A neighbour's tensor for `f`.
torch::Tensor PipelineStage::receive(int peer, const InFlight& f, const char* what) {
  const auto wait_start = Clock::now();
  try {
    auto t = link_.recv(peer, tag(f));
    stats_.wait_seconds += seconds_since(wait_start);
    return t;
  } catch (const CommError& e) {
    rethrow_naming(
        e, cat("waiting for the ", what, " of ", decoupled() ? "batch " : "micro-batch ", f.micro,
               " from stage ", peer, " (rank ", options_.world_rank(peer), ")"));
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
    // ddg holds it into later steps, and the caller's batch may reuse its memory by then.
    if (decoupled()) f.input = f.input.clone();
  } else {
    f.input = receive(stage_ - 1, f, "activations").requires_grad_(true);
  }
  const auto start = Clock::now();
  std::optional<torch::NoGradGuard> no_grad;
  if (recomputes()) {
    f.rng = rng_;
    no_grad.emplace();
  }
  if (versions_) versions_->before_forward(f.micro, f.ahead);
  torch::Tensor out;
  {
    std::optional<DrawingFrom> own;
    if (options_.own_random_stream) own.emplace(rng_);
    out = compute(f, rows, loss);
  }
  if (versions_) versions_->after_forward(f.micro);
  straggle(start);
  if (is_last()) {
    // The batch's mean loss, whatever each micro-batch's weight in the gradient.
    f.loss = out.item<double>() * (versions_ ? static_cast<double>(f.count) / rows : 1.0);
  } else {
    link_.send(out, stage_ + 1, tag(f));
  }
  if (!recomputes()) f.output = out;
  stats_.compute_seconds += seconds_since(start);
}

// The stage's layers on the micro-batch's input; on the last stage, its weighted loss (its
// mean loss under pipedream, where it is an update of its own).
torch::Tensor PipelineStage::compute(const InFlight& f, std::int64_t rows, const LossFn& loss) {
  auto out = in_precision(options_.bf16, [&] { return nn::run_layers(layers_, f.input); });
  if (!is_last()) return out;
  const auto mean = loss(out, f.begin, f.count);
  return versions_ ? mean : mean * (static_cast<double>(f.count) / static_cast<double>(rows));
}

// 3. Backward.
void PipelineStage::backward(InFlight& f, bool last, std::int64_t rows, const LossFn& loss,
                             const std::function<void(bool)>& before_backward,
                             const std::function<void()>& update) {
  torch::Tensor grad;
  if (!is_last()) grad = receive(stage_ + 1, f, "gradients");
  const auto start = Clock::now();
  // Before the stashed weights are put in: a strategy that looks at the parameters here
  // (gossip sends them) must see the current ones. Under pipedream every backward ends an
  // update.
  before_backward(last || versions_);
  if (versions_) versions_->before_backward(f.micro);
  std::vector<torch::Tensor> kept;  // with recompute: the buffers before the second forward
  if (recomputes()) {
    for (const auto& b : buffers_) kept.push_back(b.detach().clone());
    std::optional<DrawingFrom> replay;  // the forward's masks again; the stage's stream stays
    if (options_.own_random_stream) replay.emplace(f.rng);
    f.output = compute(f, rows, loss);
  }
  if (is_last())
    f.output.backward();
  else if (f.output.requires_grad())  // not so only on a first stage without parameters
    torch::autograd::backward({f.output}, {grad});
  if (recomputes()) {  // after the backward, which checks that its inputs are unchanged
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < buffers_.size(); ++i) buffers_[i].copy_(kept[i]);
  }
  if (versions_) versions_->after_backward(f.micro);
  straggle(start);
  stats_.compute_seconds += seconds_since(start);
  if (stage_ > 0) {
    const auto& g = f.input.grad();
    link_.send(g.defined() ? g : torch::zeros_like(f.input), stage_ - 1, tag(f), decoupled());
  }
  f.input = f.output = torch::Tensor();
  if (versions_) {
    update();
    versions_->updated();
  }
}

}  // namespace distml::train::pipeline
