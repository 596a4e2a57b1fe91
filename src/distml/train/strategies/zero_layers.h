// ZeRO stage 3's parameters (Rajbhandari et al. 2020, P_os+g+p; FSDP's "full shard"): between
// uses each layer's parameters exist only as every rank's 1/N block of them (the strategy's
// shard), and the whole layer is all-gathered just before its forward and again before its
// backward, then freed.
//
// How, without module hooks (LibTorch 1.13 has no forward pre-hooks):
//  - The model's forward is run here, layer by layer (nn::Model::run_forward_with). Before layer
//    i runs, its parameters are gathered (the all-gather started while layer i - 1 ran is
//    waited for) and layer i + 1's gather starts: prefetching overlaps communication with
//    compute. After it ran, its parameters are freed, except the last layer's in training:
//    backward needs it first.
//  - Each layer's trainable parameters are views of one flat tensor laid out like its gradient
//    bucket (N equal blocks; rank r owns block r). Freeing empties that tensor's storage in
//    place (FSDP does the same), so that what autograd saved for backward (the parameters and
//    views of them, such as a Linear's transposed weight) keeps pointing at the same storage,
//    which the gather before backward fills again. Gathers write the storage's memory directly:
//    no version counter moves, so autograd sees an unmodified tensor.
//  - The layer's output passes through an identity autograd function whose backward runs just
//    before the layer's own backward: it gathers the layer and starts the gather of the layer
//    below. A gradient hook on each parameter counts the layer's gradients; the last one
//    frees the layer again.
// A model sharded as it was built starts with every layer freed and the shard filled; any
// other starts whole. After gather_all() the model is whole, and stays whole through forwards
// without gradients: a checkpoint reads it, and a resume writes it. The next forward with
// gradients starts from it: the shard is loaded from the model first, and the layers are freed
// as they run. Without gather_all(), a forward without gradients (an evaluation) gathers and
// frees layer by layer.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/nn/layers.h"

namespace distml::train {

class ZeroLayers {
 public:
  /// One layer's trainable parameters: where its gradient bucket's layout puts them.
  struct Unit {
    std::vector<torch::Tensor> params;  // in bucket order
    std::vector<std::int64_t> offsets;  // of each in the flat layout
    std::int64_t elements = 0;          // N blocks, padding included
    std::int64_t shard_offset = 0;      // this rank's block in the shard
    torch::Tensor flat{};               // set when the parameters are already views of it, released
  };

  /// `unit_of_layer[i]`: index in `units` of layer i's parameters, -1 for a layer without
  /// trainable ones. `shard`: this rank's block of every unit, at each unit's shard_offset.
  /// The parameters become views of one flat tensor per unit (move_into_flat), with their
  /// current values, and the model is whole; or, where every unit comes with its `flat`
  /// (a model sharded as it was built), they are already, and the shard holds their values.
  /// `load_shard`: copies the model's parameters into the shard (while whole). `prefetch`:
  /// start the gather of the layer that runs next while one runs.
  ZeroLayers(comm::Communicator& comm, std::vector<nn::Layer> layers,
             std::vector<int> unit_of_layer, std::vector<Unit> units, torch::Tensor shard,
             std::function<void()> load_shard, bool prefetch = true);
  ~ZeroLayers();
  ZeroLayers(const ZeroLayers&) = delete;
  ZeroLayers& operator=(const ZeroLayers&) = delete;

  /// The model's forward, gathering and freeing each layer around its use.
  torch::Tensor forward(torch::Tensor x);
  /// Collective: every layer gathered; the model is whole until the next forward.
  void gather_all();
  /// Frees every gathered layer (those whose gradients did not all arrive).
  void free_all();
  /// Collective: read(i) for each of `params` in order, each while its layer is gathered, one
  /// layer at a time (a parameter of no layer: as it is).
  void read_in_turn(const std::vector<torch::Tensor>& params,
                    const std::function<void(std::size_t)>& read);
  bool whole() const { return whole_; }
  /// Payload bytes this rank has handed to all-gathers.
  std::size_t bytes_sent() const { return bytes_sent_; }

  /// Backward is about to reach layer `unit`'s own operations (called by its identity).
  void before_backward_of(std::size_t unit);

 private:
  struct State;
  void start_gather(std::size_t unit);
  void gather(std::size_t unit);
  void free(std::size_t unit);
  int unit_before(std::size_t layer) const;  // the nearest earlier layer's unit, or -1
  int unit_after(std::size_t layer) const;   // the nearest later layer's unit, or -1

  comm::Communicator& comm_;
  std::vector<nn::Layer> layers_;
  std::vector<int> unit_of_layer_;
  std::vector<int> layer_of_unit_;
  std::vector<Unit> units_;
  std::vector<State> state_;
  torch::Tensor shard_;
  std::function<void()> load_shard_;
  bool prefetch_;
  bool whole_ = true;
  std::size_t bytes_sent_ = 0;
};

/// One flat tensor of `elements` (memory returned at free), the padding zeroed, holding each of
/// `params` at its offset; each parameter becomes a view of it, with its values.
torch::Tensor move_into_flat(const std::vector<torch::Tensor>& params,
                             const std::vector<std::int64_t>& offsets, std::int64_t elements);
/// Empties `flat`'s storage in place: views of it keep their shapes and hold nothing.
void release_storage(const torch::Tensor& flat);

}  // namespace distml::train
