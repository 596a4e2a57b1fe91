#include "distml/train/tensor_parallel/parallel_linear.h"

#include "distml/core/error.h"
#include "distml/train/tensor_buffer.h"

namespace distml::train::tensor_parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// The communicator travels through the autograd context as an integer.
std::int64_t handle(comm::Communicator& comm) { return reinterpret_cast<std::intptr_t>(&comm); }
comm::Communicator& from_handle(const c10::IValue& v) {
  return *reinterpret_cast<comm::Communicator*>(static_cast<std::intptr_t>(v.toInt()));
}

torch::Tensor all_reduced(const torch::Tensor& t, comm::Communicator& comm) {
  auto out = t.contiguous().clone();
  comm.allreduce(buffer_of(out));
  return out;
}

struct CopyToRanks : torch::autograd::Function<CopyToRanks> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, std::int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return x.view_as(x);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    return {all_reduced(grads[0], from_handle(ctx->saved_data["comm"])), torch::Tensor()};
  }
};

struct SumOverRanks : torch::autograd::Function<SumOverRanks> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, std::int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return all_reduced(x, from_handle(comm));
  }
  static tensor_list backward(AutogradContext*, tensor_list grads) {
    return {grads[0], torch::Tensor()};
  }
};

}  // namespace

torch::Tensor copy_to_ranks(const torch::Tensor& x, comm::Communicator& comm) {
  return CopyToRanks::apply(x, handle(comm));
}

torch::Tensor sum_over_ranks(const torch::Tensor& x, comm::Communicator& comm) {
  return SumOverRanks::apply(x, handle(comm));
}

torch::Tensor slice_for_rank(const torch::Tensor& t, std::int64_t dim, comm::Communicator& comm) {
  const std::int64_t n = t.size(dim), parts = comm.size();
  if (n % parts != 0)
    throw ConfigError(cat("tensor parallelism: a width of ", n, " does not split into ", parts,
                          " equal parts (parallel.tensor)"));
  return t.narrow(dim, comm.rank() * (n / parts), n / parts).detach().clone();
}

ColumnParallelLinearImpl::ColumnParallelLinearImpl(const torch::nn::Linear& dense,
                                                   comm::Communicator& comm)
    : comm_(comm) {
  weight = register_parameter("weight", slice_for_rank(dense->weight, 0, comm));
  bias = register_parameter("bias", slice_for_rank(dense->bias, 0, comm));
}

torch::Tensor ColumnParallelLinearImpl::forward(const torch::Tensor& x) {
  return torch::nn::functional::linear(copy_to_ranks(x, comm_), weight, bias);
}

RowParallelLinearImpl::RowParallelLinearImpl(const torch::nn::Linear& dense,
                                             comm::Communicator& comm)
    : comm_(comm) {
  weight = register_parameter("weight", slice_for_rank(dense->weight, 1, comm));
  bias = register_parameter("bias", dense->bias.detach().clone());
}

// Under train.precision = "bf16" autocast rounds each rank's partial product to bfloat16; the
// partials are then summed in float32, as the whole product's terms would be.
torch::Tensor RowParallelLinearImpl::forward(const torch::Tensor& x) {
  auto partial = torch::nn::functional::linear(x, weight);
  if (partial.scalar_type() == torch::kBFloat16) partial = partial.to(torch::kFloat32);
  return sum_over_ranks(partial, comm_) + bias;
}

}  // namespace distml::train::tensor_parallel
