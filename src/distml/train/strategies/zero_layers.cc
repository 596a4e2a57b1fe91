#include "distml/train/strategies/zero_layers.h"

#include <c10/core/StorageImpl.h>

#include <cstdint>
#include <utility>

#include "distml/core/allocator.h"
#include "distml/core/error.h"
#include "distml/train/mapped_memory.h"
#include "distml/train/tensor_buffer.h"

namespace distml::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Layer `unit`'s output on the way forward; on the way back, the signal that backward is about
// to run the layer's own operations.
struct BeforeBackward : torch::autograd::Function<BeforeBackward> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, std::int64_t owner,
                               std::int64_t unit) {
    ctx->saved_data["owner"] = owner;
    ctx->saved_data["unit"] = unit;
    return x.view_as(x);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto* owner =
        reinterpret_cast<ZeroLayers*>(static_cast<std::intptr_t>(ctx->saved_data["owner"].toInt()));
    owner->before_backward_of(static_cast<std::size_t>(ctx->saved_data["unit"].toInt()));
    return {grads[0], torch::Tensor(), torch::Tensor()};
  }
};

c10::StorageImpl& storage_of(const torch::Tensor& t) { return *t.storage().unsafeGetStorageImpl(); }

}  // namespace

struct ZeroLayers::State {
  torch::Tensor flat;  // the unit's parameters' storage; empty while freed
  comm::Work gathering;
  bool present = true, in_flight = false;
  std::size_t arrived = 0;        // gradients this backward
  std::vector<unsigned> hooks{};  // one per parameter
};

ZeroLayers::ZeroLayers(comm::Communicator& comm, std::vector<nn::Layer> layers,
                       std::vector<int> unit_of_layer, std::vector<Unit> units, torch::Tensor shard,
                       std::function<void()> load_shard, bool prefetch)
    : comm_(comm),
      layers_(std::move(layers)),
      unit_of_layer_(std::move(unit_of_layer)),
      units_(std::move(units)),
      state_(units_.size()),
      shard_(std::move(shard)),
      load_shard_(std::move(load_shard)),
      prefetch_(prefetch) {
  layer_of_unit_.assign(units_.size(), -1);
  for (std::size_t l = 0; l < unit_of_layer_.size(); ++l)
    if (unit_of_layer_[l] >= 0)
      layer_of_unit_[static_cast<std::size_t>(unit_of_layer_[l])] = static_cast<int>(l);
  std::size_t released = 0;
  for (std::size_t u = 0; u < units_.size(); ++u) {
    DML_CHECK(layer_of_unit_[u] >= 0, "every unit of parameters belongs to a layer");
    const Unit& unit = units_[u];
    State& s = state_[u];
    if (unit.flat.defined()) {
      s.flat = unit.flat;
      s.present = false;
      ++released;
    } else {
      s.flat = move_into_flat(unit.params, unit.offsets, unit.elements);
    }
    for (const auto& p : unit.params)
      s.hooks.push_back(p.register_hook([this, u](const torch::Tensor&) {
        if (++state_[u].arrived == units_[u].params.size()) free(u);
      }));
  }
  DML_CHECK(released == 0 || released == units_.size(),
            "a model is sharded as built in every layer or in none");
  whole_ = released == 0;
}

torch::Tensor move_into_flat(const std::vector<torch::Tensor>& params,
                             const std::vector<std::int64_t>& offsets, std::int64_t elements) {
  torch::NoGradGuard no_grad;
  auto flat = empty_returned_at_free(elements, params.at(0).options().requires_grad(false));
  flat.zero_();  // the padding
  for (std::size_t k = 0; k < params.size(); ++k) {
    torch::Tensor p = params[k];
    auto view = flat.narrow(0, offsets[k], p.numel()).view(p.sizes());
    view.copy_(p);
    p.set_data(view);  // the same parameter (autograd's leaf), now in the flat storage
  }
  // The parameters' first storage (from the heap) goes back as each layer moves, so that the
  // model is not held twice over.
  give_freed_memory_back();
  return flat;
}

void release_storage(const torch::Tensor& flat) {
  auto& storage = storage_of(flat);
  storage.set_data_ptr_noswap(at::DataPtr(nullptr, flat.device()));
  storage.set_nbytes(0);
}

ZeroLayers::~ZeroLayers() {
  for (std::size_t u = 0; u < units_.size(); ++u) {
    try {
      state_[u].gathering.wait();      // its memory is the collective's until then
    } catch (const std::exception&) {  // already reported by whoever saw it first
    }
    for (std::size_t k = 0; k < state_[u].hooks.size(); ++k)
      units_[u].params[k].remove_hook(state_[u].hooks[k]);
  }
}

void ZeroLayers::start_gather(std::size_t u) {
  State& s = state_[u];
  if (s.present || s.in_flight) return;
  auto& storage = storage_of(s.flat);
  const std::size_t bytes = static_cast<std::size_t>(s.flat.numel()) * s.flat.element_size();
  storage.set_data_ptr_noswap(allocate_returned_at_free(bytes, s.flat.device()));
  storage.set_nbytes(bytes);
  const Unit& unit = units_[u];
  const std::int64_t block = unit.elements / comm_.size();
  s.gathering =
      comm_.iallgather(buffer_of(shard_.narrow(0, unit.shard_offset, block)), buffer_of(s.flat));
  s.in_flight = true;
  bytes_sent_ += static_cast<std::size_t>(block) * shard_.element_size();
}

void ZeroLayers::gather(std::size_t u) {
  start_gather(u);
  State& s = state_[u];
  if (s.in_flight) s.gathering.wait();
  s.in_flight = false;
  s.present = true;
}

void ZeroLayers::free(std::size_t u) {
  State& s = state_[u];
  if (!s.present || whole_) return;
  release_storage(s.flat);
  s.present = false;
}

int ZeroLayers::unit_before(std::size_t layer) const {
  for (std::size_t l = layer; l-- > 0;)
    if (unit_of_layer_[l] >= 0) return unit_of_layer_[l];
  return -1;
}

int ZeroLayers::unit_after(std::size_t layer) const {
  for (std::size_t l = layer + 1; l < unit_of_layer_.size(); ++l)
    if (unit_of_layer_[l] >= 0) return unit_of_layer_[l];
  return -1;
}

torch::Tensor ZeroLayers::forward(torch::Tensor x) {
  if (whole_) {
    // An evaluation after gather_all(): the model stays whole for what follows (a checkpoint,
    // the end of the run).
    if (!torch::GradMode::is_enabled()) return nn::run_layers(layers_, std::move(x));
    load_shard_();  // the model is the truth (a checkpoint may have written it)
    whole_ = false;
  }
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const int u = unit_of_layer_[l];
    if (u < 0) {
      x = layers_[l].forward(x);
      continue;
    }
    const auto unit = static_cast<std::size_t>(u);
    gather(unit);
    if (const int next = unit_after(l); prefetch_ && next >= 0)
      start_gather(static_cast<std::size_t>(next));
    state_[unit].arrived = 0;
    x = layers_[l].forward(x);
    const bool backward_follows = torch::GradMode::is_enabled() && x.requires_grad();
    if (backward_follows)
      x = BeforeBackward::apply(x, static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(this)),
                                static_cast<std::int64_t>(unit));
    // The last layer's backward comes first: it stays.
    if (!(backward_follows && unit_after(l) < 0)) free(unit);
  }
  return x;
}

void ZeroLayers::before_backward_of(std::size_t u) {
  gather(u);
  const int below = unit_before(static_cast<std::size_t>(layer_of_unit_[u]));
  if (prefetch_ && below >= 0) start_gather(static_cast<std::size_t>(below));
}

void ZeroLayers::gather_all() {
  for (std::size_t u = 0; u < units_.size(); ++u) start_gather(u);
  for (std::size_t u = 0; u < units_.size(); ++u) gather(u);
  whole_ = true;
}

void ZeroLayers::read_in_turn(const std::vector<torch::Tensor>& params,
                              const std::function<void(std::size_t)>& read) {
  auto unit_of = [&](const torch::Tensor& p) {
    for (std::size_t u = 0; u < units_.size(); ++u)
      for (const auto& q : units_[u].params)
        if (q.unsafeGetTensorImpl() == p.unsafeGetTensorImpl()) return static_cast<int>(u);
    return -1;
  };
  int held = -1;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const int u = unit_of(params[i]);
    if (u >= 0 && !state_[static_cast<std::size_t>(u)].present) {
      if (held >= 0) free(static_cast<std::size_t>(held));
      gather(static_cast<std::size_t>(u));
      held = u;
    }
    read(i);
  }
  if (held >= 0) free(static_cast<std::size_t>(held));
}

void ZeroLayers::free_all() {
  for (std::size_t u = 0; u < units_.size(); ++u) {
    if (state_[u].in_flight) gather(u);  // a prefetch nobody used: its memory is in use
    free(u);
  }
}

}  // namespace distml::train
