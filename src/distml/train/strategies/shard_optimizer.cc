#include "distml/train/strategies/shard_optimizer.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include "distml/core/error.h"
#include "distml/train/strategies/replicas.h"

namespace distml::train {
namespace {

namespace optim = torch::optim;

template <class Optim, class Options>
std::unique_ptr<optim::Optimizer> make_like(const optim::OptimizerOptions& options,
                                            std::vector<torch::Tensor> params) {
  return std::make_unique<Optim>(std::move(params), static_cast<const Options&>(options));
}

// An optimizer of the same kind and options as `like`, over `params`. Only optimizers that
// update element by element qualify: on a slice of a tensor they do what they would do on it.
std::unique_ptr<optim::Optimizer> optimizer_like(const optim::Optimizer& like,
                                                 std::vector<torch::Tensor> params) {
  if (like.param_groups().size() != 1)
    throw UsageError(cat("zero: the optimizer must have one parameter group, it has ",
                         like.param_groups().size()));
  const auto& options = like.param_groups()[0].options();
  if (dynamic_cast<const optim::SGD*>(&like))
    return make_like<optim::SGD, optim::SGDOptions>(options, std::move(params));
  if (dynamic_cast<const optim::Adam*>(&like))
    return make_like<optim::Adam, optim::AdamOptions>(options, std::move(params));
  if (dynamic_cast<const optim::AdamW*>(&like))
    return make_like<optim::AdamW, optim::AdamWOptions>(options, std::move(params));
  throw UsageError("zero: can shard the state of sgd, adam and adamw only");
}

// Where LibTorch's optimizers keep a parameter's state.
std::string key_of(const torch::Tensor& param) {
  return c10::guts::to_string(param.unsafeGetTensorImpl());
}

// The state Adam's (AdamW's) first step starts from: step 0, zero moments.
template <class State, class Options, class Zeros>
State first_adam_state(const optim::OptimizerOptions& options, const Zeros& zeros) {
  State state;
  state.step(0);
  state.exp_avg(zeros());
  state.exp_avg_sq(zeros());
  if (static_cast<const Options&>(options).amsgrad()) state.max_exp_avg_sq(zeros());
  return state;
}

}  // namespace

ShardOptimizer::ShardOptimizer(const optim::Optimizer& like, const torch::Tensor& shard,
                               std::size_t chunk_bytes)
    : shard_(shard) {
  // SGD makes no temporary of its parameter's size but with weight decay or Nesterov: one
  // chunk, whose momentum its first step makes as one block.
  const bool adam =
      dynamic_cast<const optim::Adam*>(&like) || dynamic_cast<const optim::AdamW*>(&like);
  const std::int64_t chunk =
      !adam ? std::max<std::int64_t>(1, shard.numel())
            : std::max<std::int64_t>(1,
                                     static_cast<std::int64_t>(chunk_bytes / shard.element_size()));
  const auto values = shard.detach();
  const auto& grads = shard.grad();
  for (std::int64_t at = 0; at < shard.numel(); at += chunk) {
    const std::int64_t n = std::min(chunk, shard.numel() - at);
    auto c = values.narrow(0, at, n).detach().requires_grad_(true);
    c.mutable_grad() = grads.narrow(0, at, n);
    chunks_.push_back(std::move(c));
  }
  optimizer_ = optimizer_like(like, chunks_);
}

void ShardOptimizer::step(const optim::Optimizer& like) {
  optimizer_->param_groups()[0].set_options(like.param_groups()[0].options().clone());
  if (optimizer_->state().empty()) start_adam_state();
  optimizer_->step();
}

// What Adam's and AdamW's first step would make for each chunk (step 0, zero moments), made
// here as one tensor per kind instead: chunk-sized pieces, held for the whole run in malloc's
// heap between what each step allocates and frees, kept the heap from shrinking (4 ranks of the
// 16-layer MLP of docs/benchmarks.md held 50-170 MB more than with one block).
void ShardOptimizer::start_adam_state() {
  const auto zeros = [&] { return torch::zeros({shard_.numel()}, shard_.options()); };
  const auto& options = optimizer_->param_groups()[0].options();
  if (dynamic_cast<optim::Adam*>(optimizer_.get())) {
    auto state = first_adam_state<optim::AdamParamState, optim::AdamOptions>(options, zeros);
    set_whole_state(state);
  } else if (dynamic_cast<optim::AdamW*>(optimizer_.get())) {
    auto state = first_adam_state<optim::AdamWParamState, optim::AdamWOptions>(options, zeros);
    set_whole_state(state);
  }
}

std::unique_ptr<optim::OptimizerParamState> ShardOptimizer::whole_state() const {
  const auto& states = optimizer_->state();
  if (states.empty()) return nullptr;
  auto whole = states.at(key_of(chunks_.front()))->clone();
  const auto into = element_state(*whole);
  for (std::size_t k = 0; k < into.size(); ++k) {
    std::vector<torch::Tensor> parts;
    for (const auto& c : chunks_) parts.push_back(*element_state(*states.at(key_of(c)))[k]);
    *into[k] = torch::cat(parts);
  }
  return whole;
}

void ShardOptimizer::set_whole_state(optim::OptimizerParamState& whole) {
  const auto from = element_state(whole);
  std::int64_t at = 0;
  for (const auto& c : chunks_) {  // each chunk's state: views of `whole`'s
    auto part = whole.clone();
    const auto into = element_state(*part);
    for (std::size_t k = 0; k < into.size(); ++k) *into[k] = from[k]->narrow(0, at, c.numel());
    optimizer_->state()[key_of(c)] = std::move(part);
    at += c.numel();
  }
}

std::string ShardOptimizer::save() const {
  auto whole = optimizer_like(*optimizer_, {shard_});
  if (auto state = whole_state()) whole->state()[key_of(shard_)] = std::move(state);
  torch::serialize::OutputArchive archive;
  whole->save(archive);
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

void ShardOptimizer::load(const std::string& bytes) {
  if (auto whole = read_whole_state(*optimizer_, bytes, shard_.numel(), shard_.options()))
    set_whole_state(*whole);
}

std::size_t ShardOptimizer::state_bytes() const {
  return payload_bytes(optimizer_state_tensors(*optimizer_));
}

std::unique_ptr<optim::OptimizerParamState> ShardOptimizer::read_whole_state(
    const optim::Optimizer& like, const std::string& bytes, std::int64_t elements,
    const torch::TensorOptions& options) {
  auto whole = optimizer_like(like, {torch::zeros({elements}, options)});
  torch::serialize::InputArchive archive;
  archive.load_from(bytes.data(), bytes.size());
  whole->load(archive);
  auto& states = whole->state();
  return states.empty() ? nullptr : std::move(states.begin()->second);
}

}  // namespace distml::train
