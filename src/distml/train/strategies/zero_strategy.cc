#include "distml/train/strategies/zero_strategy.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "distml/core/allocator.h"
#include "distml/core/clock.h"
#include "distml/core/error.h"
#include "distml/train/bucket_planner.h"
#include "distml/train/mapped_memory.h"
#include "distml/train/strategies/replicas.h"
#include "distml/train/tensor_buffer.h"

namespace distml::train {
namespace {

// The elements a bucket holds before its padding: the gradients and the flag.
std::int64_t used_elements(const GradientBuckets& buckets, std::size_t index) {
  const auto& b = buckets.buckets()[index];
  if (b.params.empty()) return 0;
  return b.offsets.back() + buckets.params()[b.params.back()].numel() + (b.flag_at >= 0 ? 1 : 0);
}

}  // namespace

// Where a bucket's blocks lie: each rank owns block `rank` of every bucket.
struct ZeroStrategy::Shard {
  std::int64_t block = 0;         // elements / N, padding included
  std::int64_t shard_offset = 0;  // where this rank's block lies in shard_
  comm::Work work;
};

// Stage 3, a layer of a model sharded as it was built: its parameters are views of `flat`,
// whose storage is released, laid out as the layer's bucket will be; `block` is this rank's.
struct ZeroStrategy::BuiltLayer {
  std::vector<torch::Tensor> params;
  std::vector<std::int64_t> offsets;
  std::int64_t elements = 0;
  torch::Tensor flat, block;
};

ZeroStrategy::ZeroStrategy(comm::Communicator& comm, ZeroStrategyOptions options)
    : comm_(comm), options_(options) {
  if (options_.stage < 1 || options_.stage > 3)
    throw UsageError(cat("zero: stage must be 1, 2 or 3, got ", options_.stage));
}

// A bucket's flat tensor belongs to its collective until that finishes: wait before freeing.
ZeroStrategy::~ZeroStrategy() {
  if (model_) model_->run_forward_with({});  // the model may outlive the strategy
  for (auto& s : shards_) {
    try {
      s.work.wait();
    } catch (const std::exception&) {  // already reported by whoever saw it first
    }
  }
}

nn::LayerBuilt ZeroStrategy::on_layer_built() {
  if (options_.stage != 3) return {};
  // Each layer's first storage goes back to the system as soon as the layer moves.
  return_large_blocks_at_free(mapped_from_bytes);
  return [this](const nn::ModelTensors& layer) { keep_block_of(layer); };
}

// The layout is the bucket's (gradient_buckets.h): the parameters one after the other, padded
// to N equal blocks; start_layers() checks that the two agree.
void ZeroStrategy::keep_block_of(const nn::ModelTensors& layer) {
  torch::NoGradGuard no_grad;
  BuiltLayer built;
  for (const auto& p : layer.parameters) {
    if (!p.requires_grad()) continue;
    built.params.push_back(p);
    built.offsets.push_back(built.elements);
    built.elements += p.numel();
    mix_into(built_checksum_, p);
  }
  if (built.params.empty()) return;
  const std::int64_t block = (built.elements + comm_.size() - 1) / comm_.size();
  built.elements = block * comm_.size();
  built.flat = move_into_flat(built.params, built.offsets, built.elements);
  built.block = built.flat.narrow(0, comm_.rank() * block, block).clone();
  release_storage(built.flat);
  built_.push_back(std::move(built));
}

// No rank holds a whole model to send: every rank drew the same weights from train.seed, which
// the checksum of the values as built confirms.
TrainableParameters ZeroStrategy::check_built_alike(const nn::ModelTensors& model) {
  auto trainable = trainable_like_rank0(model, comm_);
  if (const auto unlike = ranks_unlike_rank0(built_checksum_.value(), comm_); !unlike.empty())
    throw CommError(cat("rank ", unlike[0],
                        " built other initial weights than rank 0 from the same shapes: the "
                        "ranks must build the same model"));
  torch::NoGradGuard no_grad;
  for (const auto& b : model.buffers) comm_.broadcast(buffer_of(b), 0);
  return trainable;
}

void ZeroStrategy::attach(nn::Model& model) {
  if (options_.stage != 3) return;
  model_ = model;
  layers_ = model.layers();
}

// Stage 3: one bucket per layer with trainable parameters, the last layer first (the order
// backward produces them).
BucketPlan ZeroStrategy::layer_plan(const TrainableParameters& trainable) {
  if (!model_) throw UsageError("zero stage 3: attach() the model before setup()");
  BucketPlan plan;
  unit_of_layer_.assign(layers_.size(), -1);
  std::vector<char> placed(trainable.names.size(), 0);
  for (auto layer = layers_.rbegin(); layer != layers_.rend(); ++layer) {
    std::vector<std::size_t> members;
    for (std::size_t k = 0; k < trainable.names.size(); ++k)
      if (!placed[k] && nn::owned_by(trainable.names[k], layer->modules)) {
        members.push_back(k);
        placed[k] = 1;
      }
    if (members.empty()) continue;
    unit_of_layer_[layers_.size() - 1 - static_cast<std::size_t>(layer - layers_.rbegin())] =
        static_cast<int>(plan.buckets.size());
    plan.buckets.push_back(std::move(members));
  }
  for (std::size_t k = 0; k < placed.size(); ++k)
    if (!placed[k])
      throw ConfigError(cat("zero stage 3 gathers parameters layer by layer, and parameter '",
                            trainable.names[k], "' of model '", model_->name(),
                            "' belongs to none of its layers"));
  return plan;
}

// A layer sharded as built becomes `unit`, its block the unit's in the shard.
void ZeroStrategy::take_built(ZeroLayers::Unit& unit) {
  const auto same = [](const torch::Tensor& a, const torch::Tensor& b) {
    return a.unsafeGetTensorImpl() == b.unsafeGetTensorImpl();
  };
  auto built = std::find_if(built_.begin(), built_.end(), [&](const BuiltLayer& b) {
    return same(b.params.front(), unit.params.front());
  });
  DML_CHECK(built != built_.end() && built->params.size() == unit.params.size() &&
                std::equal(unit.params.begin(), unit.params.end(), built->params.begin(), same) &&
                built->offsets == unit.offsets && built->elements == unit.elements,
            "a layer sharded as built is laid out as its bucket");
  unit.flat = built->flat;
  torch::NoGradGuard no_grad;
  shard_.narrow(0, unit.shard_offset, built->block.numel()).copy_(built->block);
}

// Stage 3: the parameters move into per-layer storage, and the model's forward runs here.
void ZeroStrategy::start_layers() {
  const auto& buckets = buckets_->buckets();
  std::vector<ZeroLayers::Unit> units;
  for (std::size_t index = 0; index < buckets.size(); ++index) {
    ZeroLayers::Unit unit{.params = {},
                          .offsets = buckets[index].offsets,
                          .elements = buckets[index].elements,
                          .shard_offset = shards_[index].shard_offset};
    for (std::size_t k : buckets[index].params) unit.params.push_back(buckets_->params()[k]);
    if (!built_.empty()) take_built(unit);
    units.push_back(std::move(unit));
  }
  built_.clear();
  gathered_ = std::make_unique<ZeroLayers>(
      comm_, std::move(layers_), std::move(unit_of_layer_), std::move(units), shard_,
      [this] { load_shard_from_model(); }, options_.prefetch);
  model_->run_forward_with([this](const torch::Tensor& x) { return gathered_->forward(x); });
  // Autograd's gradients too: their memory goes back at free (mapped_memory.h says why).
  return_large_blocks_at_free(mapped_from_bytes);
}

void ZeroStrategy::setup(const nn::ModelTensors& model) {
  // 1. Same shapes everywhere, rank 0's values everywhere, then buckets and blocks.
  auto trainable = built_.empty() ? start_from_rank0(model, comm_) : check_built_alike(model);
  for (auto& p : trainable.tensors)
    if (p.scalar_type() != trainable.tensors[0].scalar_type())
      throw UsageError("zero: all parameters must have one dtype");
  std::vector<std::size_t> bytes;
  for (auto& p : trainable.tensors) bytes.push_back(p.numel() * p.element_size());
  const auto& o = options_.buckets;
  const bool by_layer = options_.stage == 3;
  const auto plan =
      by_layer ? layer_plan(trainable) : plan_buckets(bytes, o.first_bucket_bytes, o.bucket_bytes);
  auto options = trainable.tensors.empty() ? torch::TensorOptions()
                                           : trainable.tensors[0].options().requires_grad(false);
  // 2. Hooks: each bucket padded to N equal blocks.
  buckets_ = std::make_unique<GradientBuckets>(
      std::move(trainable), plan, comm_.size(), [this](std::size_t) { launch_ready_buckets(); },
      /*flags=*/!o.find_unused_parameters && !by_layer);
  std::int64_t shard_size = 0;
  for (const auto& b : buckets_->buckets()) {
    Shard s;
    s.block = b.elements / comm_.size();
    s.shard_offset = shard_size;
    shard_size += s.block;
    shards_.push_back(std::move(s));
  }
  shard_ = torch::zeros({shard_size}, options).set_requires_grad(true);
  shard_.mutable_grad() = torch::zeros({shard_size}, options);
  if (by_layer) start_layers();
}

void ZeroStrategy::before_backward(bool sync) { buckets_->set_sync(sync); }

// 2. In plan order only, so that all ranks issue the same collectives in the same order.
void ZeroStrategy::launch_ready_buckets() {
  const auto& buckets = buckets_->buckets();
  std::size_t launched = 0;
  while (next_launch_ < buckets.size() && buckets[next_launch_].pending == 0) {
    const std::size_t index = next_launch_++;
    if (gathered_) settle_before(index);
    last_launch_ = Clock::now();
    if (index == 0) first_launch_ = last_launch_;
    Shard& s = shards_[index];
    auto& flat = buckets_->flat(index);
    if (options_.stage == 1) {
      s.work = comm_.iallreduce(
          buffer_of(flat), {.op = comm::ReduceOp::avg, .algorithm = options_.buckets.algorithm});
    } else {
      auto mine = shard_.mutable_grad().narrow(0, s.shard_offset, s.block);
      s.work = comm_.ireduce_scatter(buffer_of(flat), buffer_of(mine), comm::ReduceOp::avg);
    }
    stats_.bytes_sent += flat.numel() * flat.element_size();
    ++launched;
  }
  // Launched while a later bucket still waits for gradients: overlapped with backward.
  if (next_launch_ < buckets.size()) early_launches_ += launched;
}

// Stage 3, on launching bucket `index`: the .grad() of the buckets before it are in their
// flat buffers (autograd stored them just after the hook that completed the bucket), and the
// reduce-scatters of all but the last of them have had a bucket's backward to finish.
void ZeroStrategy::settle_before(std::size_t index) {
  for (; grads_released_ < index; ++grads_released_)
    for (std::size_t k : buckets_->buckets()[grads_released_].params)
      buckets_->params()[k].mutable_grad() = torch::Tensor();
  for (; flats_released_ + 1 < index; ++flats_released_) {
    shards_[flats_released_].work.wait();
    shards_[flats_released_].work = comm::Work();  // an engine may hold a copy of the bucket
    buckets_->release(flats_released_);
  }
}

void ZeroStrategy::before_optimizer_step() {
  torch::NoGradGuard no_grad;
  // 3. Parameters that got no gradient (launching them now is not overlapped).
  const auto backward_end = last_launch_;
  missing_here_ =
      buckets_->complete_unused(options_.buckets.find_unused_parameters || gathered_ != nullptr);
  const auto wait_start = Clock::now();
  for (auto& s : shards_) s.work.wait();
  next_launch_ = 0;
  if (options_.stage == 1) buckets_->throw_if_missing(missing_here_);
  stats_.exposed_seconds = seconds_since(wait_start);
  stats_.comm_seconds = seconds_since(first_launch_);
  stats_.overlapped_seconds = std::max(0.0, seconds_between(first_launch_, backward_end));
  stats_.early_launches = early_launches_;
  early_launches_ = 0;

  const std::int64_t rank = comm_.rank();
  for (std::size_t index = 0; index < shards_.size(); ++index) {
    const Shard& s = shards_[index];
    if (options_.stage == 1) {
      buckets_->copy_to_grads(index, buckets_->flat(index));
      shard_.mutable_grad()
          .narrow(0, s.shard_offset, s.block)
          .copy_(buckets_->flat(index).narrow(0, rank * s.block, s.block));
    } else {
      for (std::size_t k : buckets_->buckets()[index].params)
        buckets_->params()[k].mutable_grad() = torch::Tensor();
    }
    buckets_->release(index);
  }
  buckets_->reset();
  if (gathered_) {
    gathered_->free_all();
    grads_released_ = flats_released_ = 0;
  }
}

void ZeroStrategy::clip_gradients(double max_norm, const std::vector<torch::Tensor>&) {
  torch::NoGradGuard no_grad;
  auto& grad = shard_.mutable_grad();  // padding elements are zeros: they add nothing
  double squares = grad.to(torch::kFloat64).square().sum().item<double>();
  comm_.allreduce(comm::Buffer{&squares, 1, comm::DType::f64});
  const double coefficient = max_norm / (std::sqrt(squares) + 1e-6);  // as clip_grad_norm_
  if (coefficient < 1) grad.mul_(coefficient);
}

void ZeroStrategy::optimizer_step(torch::optim::Optimizer& optimizer) {
  // 4. The shard's update, with the options the trainer set for this step.
  if (!shard_optimizer_) {
    shard_optimizer_ = std::make_unique<ShardOptimizer>(optimizer, shard_);
    if (!saved_state_.empty()) {  // resumed from a checkpoint
      shard_optimizer_->load(saved_state_);
      saved_state_.clear();
    }
    if (!resharded_.empty()) load_resharded(optimizer);
  }
  if (!gathered_ || gathered_->whole()) load_shard_from_model();
  shard_optimizer_->step(optimizer);
  stats_.optimizer_state_bytes = shard_optimizer_->state_bytes();
  // 5. Everyone's update, everywhere (stage 3: layer by layer, when the next forward needs it).
  if (!gathered_) gather_parameters();
  // Stage 3, after its first step: what setup and the first step left free (the model's first
  // storage, the whole layers the first forward started from) goes back to the system. Later
  // steps free and allocate the same blocks, which the heap reuses; trimming after each would
  // make every step fault its pages in again (LeNet-5 at a tenth of the speed).
  if (gathered_ && !trimmed_) give_freed_memory_back();
  trimmed_ = true;
}

void ZeroStrategy::gather_model() {
  if (gathered_) gathered_->gather_all();
}

void ZeroStrategy::read_parameters_in_turn(const std::vector<torch::Tensor>& parameters,
                                           const std::function<void(std::size_t)>& read) {
  if (gathered_)
    gathered_->read_in_turn(parameters, read);
  else
    Strategy::read_parameters_in_turn(parameters, read);
}

void ZeroStrategy::finish() {
  if (!gathered_) return;
  shard_optimizer_.reset();
  shard_.mutable_grad() = torch::Tensor();
}

StrategyStats ZeroStrategy::stats() const {
  StrategyStats out = stats_;
  if (gathered_) out.bytes_sent += gathered_->bytes_sent();
  return out;
}

void ZeroStrategy::load_resharded_state(const std::vector<std::string>& saved, int) {
  saved_state_.clear();
  resharded_.clear();
  // Empty: no step had been taken when the checkpoint was written (then on every rank).
  if (!saved.empty() && !saved[0].empty()) resharded_ = saved;
}

void ZeroStrategy::load_resharded(torch::optim::Optimizer& like) {
  torch::NoGradGuard no_grad;
  const std::vector<std::string> saved = std::move(resharded_);
  resharded_.clear();
  const auto old_world = static_cast<std::int64_t>(saved.size());
  const std::size_t n = shards_.size();
  // The old world's blocks: bucket b's used elements in old_world equal parts.
  std::vector<std::int64_t> used(n), old_block(n), old_offset(n);
  std::int64_t old_size = 0;
  for (std::size_t b = 0; b < n; ++b) {
    used[b] = used_elements(*buckets_, b);
    old_block[b] = (used[b] + old_world - 1) / old_world;
    old_offset[b] = old_size;
    old_size += old_block[b];
  }
  std::unique_ptr<torch::optim::OptimizerParamState> mine;
  std::vector<torch::Tensor*> into;
  const std::int64_t r = comm_.rank();
  for (std::int64_t q = 0; q < old_world; ++q) {
    auto state = ShardOptimizer::read_whole_state(like, saved[q], old_size, shard_.options());
    if (!state) return;  // an optimizer without state (SGD without momentum)
    const auto from = element_state(*state);
    if (!mine) {  // the step count from the first; the element tensors filled below
      mine = state->clone();
      into = element_state(*mine);
      for (auto* t : into) *t = torch::zeros({shard_.numel()}, t->options());
    }
    for (std::size_t b = 0; b < n; ++b) {  // old rank q's block of b, where it overlaps mine
      const std::int64_t lo = std::max(q * old_block[b], r * shards_[b].block),
                         hi = std::min(
                             {(q + 1) * old_block[b], (r + 1) * shards_[b].block, used[b]});
      if (lo >= hi) continue;
      for (std::size_t k = 0; k < into.size(); ++k)
        into[k]
            ->narrow(0, shards_[b].shard_offset + lo - r * shards_[b].block, hi - lo)
            .copy_(from[k]->narrow(0, old_offset[b] + lo - q * old_block[b], hi - lo));
    }
  }
  shard_optimizer_->set_whole_state(*mine);
}

std::string ZeroStrategy::save_state() {
  if (!shard_optimizer_) return saved_state_;  // no step since the start or the resume
  return shard_optimizer_->save();
}

// The elements [r x block, (r + 1) x block) of each bucket, as far as they are parameters.
void ZeroStrategy::load_shard_from_model() {
  torch::NoGradGuard no_grad;
  const std::int64_t rank = comm_.rank();
  const auto& buckets = buckets_->buckets();
  for (std::size_t index = 0; index < buckets.size(); ++index) {
    const auto& b = buckets[index];
    const Shard& s = shards_[index];
    const std::int64_t lo = rank * s.block, hi = lo + s.block;
    for (std::size_t slot = 0; slot < b.params.size(); ++slot) {
      const auto& p = buckets_->params()[b.params[slot]];
      const std::int64_t begin = std::max(lo, b.offsets[slot]),
                         end = std::min(hi, b.offsets[slot] + p.numel());
      if (begin >= end) continue;
      shard_.narrow(0, s.shard_offset + begin - lo, end - begin)
          .copy_(p.view(-1).narrow(0, begin - b.offsets[slot], end - begin));
    }
  }
}

// Where bucket `index`'s flag lies in the shard, if in this rank's block; else -1.
std::int64_t ZeroStrategy::own_flag(std::size_t index) const {
  const std::int64_t flag_at = buckets_->buckets()[index].flag_at;
  const Shard& s = shards_[index];
  const std::int64_t lo = comm_.rank() * s.block;
  return flag_at >= lo && flag_at < lo + s.block ? s.shard_offset + flag_at - lo : -1;
}

// Bucket by bucket, the next one's all-gather in flight while one is copied into the
// parameters: staging for two buckets, not for the whole model (a whole model's staging made
// the peak of stages 1 and 2 5-10% higher than allreduce's).
void ZeroStrategy::gather_parameters() {
  torch::NoGradGuard no_grad;
  const auto start = Clock::now();
  auto launch = [&](std::size_t index) {
    Shard& s = shards_[index];
    // 3. Stage 2's flag, reduced into this rank's gradient block, travels with the parameters.
    if (const auto at = own_flag(index); at >= 0) shard_[at] = shard_.grad()[at];
    s.work = comm_.iallgather(buffer_of(shard_.narrow(0, s.shard_offset, s.block)),
                              buffer_of(buckets_->flat(index)));
    stats_.bytes_sent += s.block * shard_.element_size();
  };
  if (!shards_.empty()) launch(0);
  // Every rank sees the same flags, so all of them go through every bucket, then all throw.
  std::optional<std::size_t> missing;
  for (std::size_t index = 0; index < shards_.size(); ++index) {
    if (index + 1 < shards_.size()) launch(index + 1);
    shards_[index].work.wait();
    if (const auto at = own_flag(index); at >= 0) shard_[at] = 0;
    if (!missing && buckets_->flag_raised(index)) missing = index;
    if (!missing) buckets_->copy_to_params(index, buckets_->flat(index));
    if (missing != index) buckets_->release(index);
  }
  if (missing) buckets_->throw_if_missing(*missing, missing_here_);
  // Nothing runs while the parameters travel: all of it is exposed.
  const double gather_s = seconds_since(start);
  stats_.comm_seconds += gather_s;
  stats_.exposed_seconds += gather_s;
}

}  // namespace distml::train
