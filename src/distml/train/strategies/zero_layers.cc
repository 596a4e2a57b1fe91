#include "distml/train/strategies/zero_layers.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>
#include <sys/mman.h>

#include <cstdint>
#include <utility>

#include "distml/core/error.h"
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

// A gathered layer's memory, mapped on its own so that freeing it returns it to the system at
// once. From malloc, a layer under its mmap threshold (32 MiB, core/allocator.h) would go back
// to the heap, where the next allocations of other sizes fragment it: a 16-layer MLP of 2048
// wide (17 MB a layer) with Adam at 2 ranks peaked at 1.79 GB resident, 1.49-1.54 GB mapped.
// MAP_POPULATE faults the pages in with the mapping, in one call rather than one fault a page.
struct Mapping {
  void* base;
  std::size_t bytes;
};

void unmap(void* context) {
  auto* m = static_cast<Mapping*>(context);
  munmap(m->base, m->bytes);
  delete m;
}

at::DataPtr mapped(std::size_t bytes, c10::Device device) {
  // Mapping and unmapping cost more than their size suggests: the MNIST MLP's 3.2 MB layer
  // mapped each gather took its steps from 57 to 21 a second. Under 8 MiB a layer stays in the
  // heap, where fragmentation costs little.
  if (bytes < (8u << 20)) return c10::GetCPUAllocator()->allocate(bytes);
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (base == MAP_FAILED)
    throw Error(cat("zero stage 3: cannot map ", bytes, " bytes for a layer's parameters"));
  return at::DataPtr(base, new Mapping{base, bytes}, &unmap, device);
}

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
                       std::function<void()> load_shard)
    : comm_(comm),
      layers_(std::move(layers)),
      unit_of_layer_(std::move(unit_of_layer)),
      units_(std::move(units)),
      state_(units_.size()),
      shard_(std::move(shard)),
      load_shard_(std::move(load_shard)) {
  layer_of_unit_.assign(units_.size(), -1);
  for (std::size_t l = 0; l < unit_of_layer_.size(); ++l)
    if (unit_of_layer_[l] >= 0)
      layer_of_unit_[static_cast<std::size_t>(unit_of_layer_[l])] = static_cast<int>(l);
  torch::NoGradGuard no_grad;
  for (std::size_t u = 0; u < units_.size(); ++u) {
    DML_CHECK(layer_of_unit_[u] >= 0, "every unit of parameters belongs to a layer");
    const Unit& unit = units_[u];
    State& s = state_[u];
    s.flat = torch::empty({unit.elements}, unit.params.at(0).options().requires_grad(false));
    storage_of(s.flat).set_data_ptr_noswap(  // in a mapping of its own (see mapped())
        mapped(s.flat.numel() * s.flat.element_size(), s.flat.device()));
    s.flat.zero_();  // the padding
    for (std::size_t k = 0; k < unit.params.size(); ++k) {
      torch::Tensor p = unit.params[k];
      auto view = s.flat.narrow(0, unit.offsets[k], p.numel()).view(p.sizes());
      view.copy_(p);
      p.set_data(view);  // the same parameter (autograd's leaf), now in the unit's storage
      s.hooks.push_back(p.register_hook([this, u](const torch::Tensor&) {
        if (++state_[u].arrived == units_[u].params.size()) free(u);
      }));
    }
  }
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
  storage.set_data_ptr_noswap(mapped(bytes, s.flat.device()));
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
  auto& storage = storage_of(s.flat);
  storage.set_data_ptr_noswap(at::DataPtr(nullptr, s.flat.device()));
  storage.set_nbytes(0);
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
    if (const int next = unit_after(l); next >= 0) start_gather(static_cast<std::size_t>(next));
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
  if (const int below = unit_before(static_cast<std::size_t>(layer_of_unit_[u])); below >= 0)
    start_gather(static_cast<std::size_t>(below));
}

void ZeroLayers::gather_all() {
  for (std::size_t u = 0; u < units_.size(); ++u) start_gather(u);
  for (std::size_t u = 0; u < units_.size(); ++u) gather(u);
  whole_ = true;
}

void ZeroLayers::free_all() {
  for (std::size_t u = 0; u < units_.size(); ++u) {
    if (state_[u].in_flight) gather(u);  // a prefetch nobody used: its memory is in use
    free(u);
  }
}

}  // namespace distml::train
