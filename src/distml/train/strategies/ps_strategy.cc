#include "distml/train/strategies/ps_strategy.h"

#include <cstring>
#include <sstream>

#include "distml/core/clock.h"
#include "distml/core/error.h"
#include "distml/train/strategies/replicas.h"
#include "distml/train/tensor_buffer.h"

namespace distml::train {

// A bucket's exchange with its server.
struct PsStrategy::Exchange {
  torch::Tensor fresh;   // the pulled parameters
  torch::Tensor packed;  // the compressed push in flight
  bool pushed = false;
  comm::Work push_work, pull_work;
};

PsStrategy::PsStrategy(comm::Communicator& world, PsStrategyOptions options)
    : world_(world), options_(std::move(options)) {
  if (options_.servers < 1 || options_.servers >= world.size())
    throw ConfigError(cat("strategy.servers = ", options_.servers,
                          " must leave at least one of the ", world.size(),
                          " ranks a worker (1 to ", world.size() - 1, ")"));
  layout_.workers = world.size() - options_.servers;
  layout_.servers = options_.servers;
  workers_ = world.split(trains() ? 0 : -1, world.rank());
}

// Pushes and pulls in flight own their buffers: wait before freeing them.
PsStrategy::~PsStrategy() {
  for (auto& e : exchanges_)
    for (auto* work : {&e.push_work, &e.pull_work}) {
      try {
        work->wait();
      } catch (const std::exception&) {  // already reported by whoever saw it first
      }
    }
}

void PsStrategy::setup(const nn::ModelTensors& model) {
  auto trainable = start_from_rank0(model, world_);  // 1.
  std::vector<std::size_t> bytes, elements;
  for (auto& p : trainable.tensors) {
    bytes.push_back(p.numel() * p.element_size());
    elements.push_back(p.numel());
  }
  layout_ = ps::Layout::plan(bytes, elements, layout_.workers, layout_.servers,
                             options_.first_bucket_bytes, options_.bucket_bytes);
  params_ = trainable.tensors;
  if (options_.compress.name != "none") {
    std::vector<compress::BucketLayout> layouts;
    for (const auto& bucket : layout_.buckets) {
      std::vector<torch::Tensor> tensors;
      for (std::size_t p : bucket) tensors.push_back(params_[p]);
      layouts.push_back(compress::layout_of(tensors, options_.compress));
    }
    compressor_ = compress::make_compressor(options_.compress, layouts);
  }
  if (!trains()) {
    server_ = std::make_unique<ps::Server>(world_, layout_, trainable.tensors, options_.server,
                                           compressor_.get());
    return;
  }
  exchanges_.resize(layout_.buckets.size());
  for (std::size_t b = 0; b < layout_.buckets.size(); ++b)
    exchanges_[b].fresh =
        torch::empty({static_cast<std::int64_t>(layout_.elements[b])},
                     trainable.tensors[layout_.buckets[b][0]].options().requires_grad(false));
  headers_.resize(layout_.servers);
  header_work_.resize(layout_.servers);
  buckets_ = std::make_unique<GradientBuckets>(std::move(trainable), BucketPlan{layout_.buckets}, 1,
                                               [this](std::size_t b) { push(b); });  // 2.
}

void PsStrategy::push(std::size_t index) {
  Exchange& e = exchanges_[index];
  const int server = layout_.server_rank(index);
  const auto& grads = buckets_->flat(index);
  e.push_work.wait();  // last step's push of these gradients has left
  const torch::Tensor& sent =
      compressor_ ? (e.packed = compressor_->pack(grads, index, clock_ + 1, world_.rank()).bytes)
                  : grads;
  e.push_work = world_.isend(buffer_of(sent), server, ps::push_tag(index));
  e.pull_work = world_.irecv(buffer_of(e.fresh), server, ps::pull_tag(index));
  e.pushed = true;
  stats_.bytes_sent += sent.numel() * sent.element_size();
  last_push_ = Clock::now();
  if (pushes_this_step_++ == 0) first_push_ = last_push_;
  if (pushes_this_step_ < exchanges_.size()) ++early_pushes_;  // later buckets still pending
}

void PsStrategy::before_optimizer_step() {
  backward_end_ = last_push_;  // pushes that complete_unused() starts are not overlapped
  buckets_->complete_unused(options_.find_unused_parameters);
}

// 3. The header tells each server which step this is and its learning rate; then the pull.
void PsStrategy::optimizer_step(torch::optim::Optimizer& optimizer) {
  const double lr = optimizer.param_groups().front().options().get_lr();
  for (int s = 0; s < layout_.servers; ++s) {
    if (layout_.server_bytes[s] == 0) continue;  // holds no bucket: no steps to hear about
    header_work_[s].wait();
    headers_[s] = {static_cast<double>(clock_), lr};
    header_work_[s] = world_.isend(comm::ConstBuffer{headers_[s].data(), 2, comm::DType::f64},
                                   layout_.workers + s, ps::kStepTag);
  }
  ++clock_;
  const auto wait_start = Clock::now();
  wait_for_parameters();
  stats_.exposed_seconds = seconds_since(wait_start);
  stats_.comm_seconds = seconds_since(first_push_);
  stats_.overlapped_seconds = std::max(0.0, seconds_between(first_push_, backward_end_));
  stats_.early_launches = early_pushes_;
  early_pushes_ = pushes_this_step_ = 0;
  buckets_->reset();
}

void PsStrategy::wait_for_parameters() {
  for (std::size_t index = 0; index < exchanges_.size(); ++index) {
    Exchange& e = exchanges_[index];
    if (!e.pushed) continue;
    try {
      e.pull_work.wait();
    } catch (const TimeoutError& err) {
      throw TimeoutError(cat("parameter server rank ", layout_.server_rank(index),
                             " sent no parameters: ", err.what()));
    }
    e.pushed = false;
    buckets_->copy_to_params(index, e.fresh);
  }
}

// 5. Every worker asks for the current parameters; the servers answer once all have.
void PsStrategy::reconcile(torch::optim::Optimizer& /*optimizer*/) {
  ps::tell_servers(world_, layout_, ps::kSync);
  for (std::size_t index = 0; index < exchanges_.size(); ++index) {
    Exchange& e = exchanges_[index];
    e.pull_work = world_.irecv(buffer_of(e.fresh), layout_.server_rank(index), ps::pull_tag(index));
    e.pushed = true;
  }
  wait_for_parameters();
}

void PsStrategy::load_state(const std::string& state) {
  saved_state_ = state;
  if (!compressor_ || state.empty()) return;
  torch::serialize::InputArchive archive;
  archive.load_from(state.data(), state.size());
  c10::IValue own;
  if (archive.try_read("compressor", own)) compressor_->load_state(own.toStringRef());
}

// 7. Each worker keeps its compressor's state (residuals); worker 0 also collects every
// server's optimizer state (the sync before it has settled them).
std::string PsStrategy::save_state() {
  torch::serialize::OutputArchive archive;
  if (compressor_) archive.write("compressor", compressor_->save_state());
  if (world_.rank() != 0) {
    std::ostringstream out;
    archive.save_to(out);
    return out.str();
  }
  const auto states = ps::collect_server_states(world_, layout_);
  for (std::size_t s = 0; s < states.size(); ++s) {  // as uint8 tensors, as checkpoints have them
    const auto bytes = torch::empty({static_cast<std::int64_t>(states[s].size())}, torch::kUInt8);
    std::memcpy(bytes.data_ptr(), states[s].data(), states[s].size());
    archive.write(cat("server_", s), bytes);
  }
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

// 7. Worker 0 hands each server the checkpoint's parameters and its optimizer state.
void PsStrategy::resumed_at(std::int64_t) {
  if (world_.rank() == 0) {
    const auto flat = flat_copy(params_);
    torch::serialize::InputArchive archive;
    if (!saved_state_.empty()) archive.load_from(saved_state_.data(), saved_state_.size());
    std::vector<std::string> states;
    for (int s = 0; s < layout_.servers; ++s) {
      torch::Tensor bytes = torch::empty({0}, torch::kUInt8);
      if (!saved_state_.empty()) archive.read(cat("server_", s), bytes);
      states.push_back(bytes.numel() == 0 ? std::string()
                                          : std::string(static_cast<const char*>(bytes.data_ptr()),
                                                        static_cast<std::size_t>(bytes.numel())));
    }
    ps::send_resume(world_, layout_, buffer_of(flat), states);
  } else if (!trains()) {
    auto flat = flat_copy(params_);
    const std::string state = ps::receive_resume(world_, layout_, buffer_of(flat));
    copy_from_flat(flat, params_);
    server_->load_state(state);
  }
}

// 6. Stop, then the servers' counts reach every rank.
void PsStrategy::finish() {
  for (auto& work : header_work_) work.wait();
  ps::tell_servers(world_, layout_, ps::kStop);
  summed_ = ps::sum_reports({}, world_);
}

void PsStrategy::serve() {
  server_->run();
  stats_.bytes_sent = server_->bytes_sent();
  summed_ = ps::sum_reports(server_->report(), world_);
}

nlohmann::json PsStrategy::report() const {
  // The histogram without its empty tail.
  std::vector<std::int64_t> histogram = summed_.staleness;
  while (!histogram.empty() && histogram.back() == 0) histogram.pop_back();
  return {{"workers", layout_.workers},           {"servers", layout_.servers},
          {"server_bytes", layout_.server_bytes}, {"server_updates", summed_.updates},
          {"staleness_histogram", histogram},     {"max_clock_gap", summed_.max_clock_gap}};
}

}  // namespace distml::train
