#include "distml/train/tensor_parallel/split_layers.h"

#include "distml/core/error.h"
#include "distml/train/tensor_buffer.h"

namespace distml::train::tensor_parallel {
namespace {

bool starts_pair(const std::vector<nn::Layer>& layers, std::size_t i) {
  return i + 1 < layers.size() && layers[i].affine && layers[i + 1].affine &&
         !layers[i + 1].affine->before;
}

void append(nn::ModelTensors& to, const nn::ModelTensors& from) {
  to.parameter_names.insert(to.parameter_names.end(), from.parameter_names.begin(),
                            from.parameter_names.end());
  to.parameters.insert(to.parameters.end(), from.parameters.begin(), from.parameters.end());
  to.buffer_names.insert(to.buffer_names.end(), from.buffer_names.begin(), from.buffer_names.end());
  to.buffers.insert(to.buffers.end(), from.buffers.begin(), from.buffers.end());
}

// The T slices of every rank, concatenated in rank order along dimension 0.
torch::Tensor gathered(const torch::Tensor& slice, comm::Communicator& comm) {
  auto sizes = slice.sizes().vec();
  sizes[0] *= comm.size();
  auto all = torch::empty(sizes, slice.options());
  const auto mine = slice.detach().contiguous();
  comm.allgather(comm::ConstBuffer{mine.data_ptr(), static_cast<std::size_t>(mine.numel()),
                                   comm_dtype(mine.scalar_type())},
                 buffer_of(all));
  return all;
}

}  // namespace

SplitLayers::SplitLayers(const std::vector<nn::Layer>& layers, const nn::ModelTensors& tensors,
                         comm::Communicator& comm)
    : comm_(comm) {
  // The same walk as splittable_pairs().
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (!starts_pair(layers, i)) {
      layers_.push_back(layers[i]);
      append(tensors_, nn::select_modules(tensors, layers[i].modules));
      continue;
    }
    const auto& a = *layers[i].affine;
    const auto& b = *layers[i + 1].affine;
    Pair pair{a.linear, b.linear, ColumnParallelLinear(a.linear, comm),
              RowParallelLinear(b.linear, comm)};
    const std::string name = cat(layers[i].name, "+", layers[i + 1].name);
    auto forward = [a, b, column = pair.column, row = pair.row](const torch::Tensor& x) {
      auto hidden = column.ptr()->forward(a.before ? a.before(x) : x);
      auto y = row.ptr()->forward(a.after ? a.after(hidden) : hidden);
      return b.after ? b.after(y) : y;
    };
    std::vector<std::string> modules = layers[i].modules;
    modules.insert(modules.end(), layers[i + 1].modules.begin(), layers[i + 1].modules.end());
    layers_.push_back({name, modules, forward});
    const std::string first = layers[i].name, second = layers[i + 1].name;
    tensors_.parameter_names.insert(
        tensors_.parameter_names.end(),
        {first + ".weight", first + ".bias", second + ".weight", second + ".bias"});
    tensors_.parameters.insert(tensors_.parameters.end(), {pair.column->weight, pair.column->bias,
                                                           pair.row->weight, pair.row->bias});
    pairs_.push_back(std::move(pair));
    ++i;
  }
}

int splittable_pairs(const std::vector<nn::Layer>& layers) {
  int pairs = 0;
  for (std::size_t i = 0; i < layers.size(); ++i)
    if (starts_pair(layers, i)) ++pairs, ++i;
  return pairs;
}

void SplitLayers::gather_into_whole() {
  torch::NoGradGuard no_grad;
  const auto parts = comm_.size();
  for (auto& p : pairs_) {
    p.first->weight.copy_(gathered(p.column->weight, comm_));
    p.first->bias.copy_(gathered(p.column->bias, comm_));
    // The row-parallel slices are columns: gathered as [T, out, in / T] blocks, then laid
    // side by side.
    const auto out = p.row->weight.size(0), in = p.row->weight.size(1);
    auto blocks = gathered(p.row->weight, comm_).view({parts, out, in});
    p.second->weight.copy_(blocks.permute({1, 0, 2}).reshape({out, parts * in}));
    p.second->bias.copy_(p.row->bias);
  }
}

void SplitLayers::slice_from_whole() {
  torch::NoGradGuard no_grad;
  for (auto& p : pairs_) {
    p.column->weight.copy_(slice_for_rank(p.first->weight, 0, comm_));
    p.column->bias.copy_(slice_for_rank(p.first->bias, 0, comm_));
    p.row->weight.copy_(slice_for_rank(p.second->weight, 1, comm_));
    p.row->bias.copy_(p.second->bias);
  }
}

}  // namespace distml::train::tensor_parallel
