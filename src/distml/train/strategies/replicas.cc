#include "distml/train/strategies/replicas.h"

#include <cmath>

#include "distml/core/error.h"
#include "distml/core/fnv1a.h"
#include "distml/train/tensor_buffer.h"

namespace distml::train {
namespace {

// A hash of the parameter names and shapes, the same on every rank that has the same model.
std::uint64_t shape_hash(const TrainableParameters& p) {
  Fnv1a h;
  for (std::size_t i = 0; i < p.tensors.size(); ++i) {
    h.mix(p.names[i].data(), p.names[i].size() + 1);  // with its terminator: "ab","c" != "a","bc"
    for (auto d : p.tensors[i].sizes()) h.mix(static_cast<std::uint64_t>(d));
    h.mix(static_cast<std::uint64_t>(p.tensors[i].scalar_type()));
  }
  return h.value();
}

}  // namespace

TrainableParameters trainable_like_rank0(const nn::ModelTensors& model, comm::Communicator& comm) {
  TrainableParameters p;
  for (std::size_t i = 0; i < model.parameters.size(); ++i) {
    if (!model.parameters[i].requires_grad()) continue;
    p.names.push_back(model.parameter_names[i]);
    p.tensors.push_back(model.parameters[i]);
  }
  if (const auto unlike = ranks_unlike_rank0(shape_hash(p), comm); !unlike.empty())
    throw CommError(cat("rank ", unlike[0],
                        " has a model whose parameter names or shapes differ from "
                        "rank 0's: the ranks must build the same model"));
  return p;
}

TrainableParameters start_from_rank0(const nn::ModelTensors& model, comm::Communicator& comm) {
  torch::NoGradGuard no_grad;
  auto p = trainable_like_rank0(model, comm);
  for (auto& t : p.tensors) comm.broadcast(buffer_of(t), 0);
  for (const auto& b : model.buffers) comm.broadcast(buffer_of(b), 0);
  return p;
}

std::vector<int> ranks_unlike_rank0(std::uint64_t value, comm::Communicator& comm) {
  std::vector<std::uint64_t> all(comm.size());
  comm.allgather(comm::ConstBuffer{&value, 1, comm::DType::i64},
                 comm::Buffer{all.data(), all.size(), comm::DType::i64});
  std::vector<int> unlike;
  for (int r = 1; r < comm.size(); ++r)
    if (all[r] != all[0]) unlike.push_back(r);
  return unlike;
}

void mix_into(Fnv1a& checksum, const torch::Tensor& t) {
  const auto c = t.contiguous();
  checksum.mix(c.data_ptr(), c.numel() * c.element_size());
}

std::uint64_t checksum(const nn::ModelTensors& model) {
  Fnv1a h;
  for (const auto* tensors : {&model.parameters, &model.buffers})
    for (const auto& t : *tensors) mix_into(h, t);
  return h.value();
}

std::uint64_t check_replicas_agree(std::uint64_t value, comm::Communicator& comm) {
  if (const auto unlike = ranks_unlike_rank0(value, comm); !unlike.empty())
    throw InternalError(
        cat("after training, rank ", unlike[0], " holds parameters that differ from rank 0's"));
  return value;
}

void agree_on_buffers(std::span<const torch::Tensor> buffers, comm::Communicator& comm) {
  torch::NoGradGuard no_grad;
  for (const auto& b : buffers) {
    if (b.is_floating_point())
      comm.allreduce(buffer_of(b), {.op = comm::ReduceOp::avg});
    else
      comm.broadcast(buffer_of(b), 0);
  }
}

std::vector<torch::Tensor> tensors_over(const std::vector<FlatParameter>& params, const char* who) {
  std::vector<torch::Tensor> tensors;
  for (const auto& p : params) {
    if (p.data.dtype != comm::DType::f32 && p.data.dtype != comm::DType::f64)
      throw UsageError(cat(who, ": parameters of ", comm::dtype_name(p.data.dtype),
                           "; float32 or float64 expected"));
    tensors.push_back(
        torch::from_blob(p.data.data, p.shape,
                         p.data.dtype == comm::DType::f32 ? torch::kFloat32 : torch::kFloat64));
  }
  return tensors;
}

std::size_t payload_bytes(std::span<const torch::Tensor> tensors) {
  std::size_t n = 0;
  for (const auto& t : tensors) n += t.numel() * t.element_size();
  return n;
}

torch::Tensor flat_copy(std::span<const torch::Tensor> tensors) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> flat_views;
  for (const auto& t : tensors) flat_views.push_back(t.reshape(-1));
  return torch::cat(flat_views);
}

void copy_from_flat(const torch::Tensor& flat, std::span<const torch::Tensor> tensors) {
  torch::NoGradGuard no_grad;
  std::int64_t offset = 0;
  for (const auto& t : tensors) {
    t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
  DML_CHECK_EQ(offset, flat.numel(), "copy_from_flat: the flat tensor has another layout");
}

double consensus_distance(const torch::Tensor& own, const torch::Tensor& target,
                          comm::Communicator& comm) {
  torch::NoGradGuard no_grad;
  double squared = (own - target).to(torch::kFloat64).square().sum().item<double>();
  comm.allreduce(comm::Buffer{&squared, 1, comm::DType::f64}, {.op = comm::ReduceOp::avg});
  return std::sqrt(squared);
}

std::size_t average_across_ranks(std::span<const torch::Tensor> tensors, comm::Communicator& comm,
                                 double* distance) {
  if (tensors.empty()) {
    if (distance) *distance = 0;
    return 0;
  }
  auto flat = flat_copy(tensors);
  const auto own = distance ? flat.clone() : torch::Tensor();
  comm.allreduce(buffer_of(flat), {.op = comm::ReduceOp::avg});
  if (distance) *distance = consensus_distance(own, flat, comm);
  copy_from_flat(flat, tensors);
  return payload_bytes(tensors);
}

std::vector<torch::Tensor*> element_state(torch::optim::OptimizerParamState& state) {
  namespace optim = torch::optim;
  std::vector<torch::Tensor*> out;
  if (auto* sgd = dynamic_cast<optim::SGDParamState*>(&state))
    out = {&sgd->momentum_buffer()};
  else if (auto* adam = dynamic_cast<optim::AdamParamState*>(&state))
    out = {&adam->exp_avg(), &adam->exp_avg_sq(), &adam->max_exp_avg_sq()};
  else if (auto* adamw = dynamic_cast<optim::AdamWParamState*>(&state))
    out = {&adamw->exp_avg(), &adamw->exp_avg_sq(), &adamw->max_exp_avg_sq()};
  else
    throw InternalError("element_state: an optimizer state of an unknown kind");
  std::erase_if(out, [](const torch::Tensor* t) { return !t->defined(); });
  return out;
}

std::vector<torch::Tensor> optimizer_state_tensors(torch::optim::Optimizer& optimizer) {
  std::vector<torch::Tensor> out;
  auto& state = optimizer.state();
  for (auto& group : optimizer.param_groups()) {
    for (auto& p : group.params()) {
      auto it = state.find(c10::guts::to_string(p.unsafeGetTensorImpl()));
      if (it == state.end()) continue;
      for (const auto* t : element_state(*it->second))
        if (t->numel() > 0) out.push_back(*t);
    }
  }
  return out;
}

}  // namespace distml::train
