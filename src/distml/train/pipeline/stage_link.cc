#include "distml/train/pipeline/stage_link.h"

#include <utility>

#include "distml/core/error.h"
#include "distml/train/tensor_buffer.h"

namespace distml::train::pipeline {
namespace {

// {dtype, ndim, d0, ..., d7}: the header before each tensor.
constexpr std::size_t kMaxDims = 8, kHeader = 2 + kMaxDims;

// A tensor and its header travel on tags 2 * tag and 2 * tag + 1.
int header_tag(int tag) { return 2 * tag; }
int data_tag(int tag) { return 2 * tag + 1; }

}  // namespace

void StageLink::send(const torch::Tensor& t, int peer, int tag, bool for_next_step) {
  DML_CHECK(static_cast<std::size_t>(t.dim()) <= kMaxDims, "a pipeline activation has ", t.dim(),
            " dimensions; at most ", kMaxDims, " can travel");
  release_completed();
  Pending p;
  p.flushes_to_skip = for_next_step ? 1 : 0;
  p.data = t.detach().contiguous();
  p.header.assign(kHeader, 0);
  p.header[0] = static_cast<std::int64_t>(p.data.scalar_type());
  p.header[1] = p.data.dim();
  for (std::int64_t d = 0; d < p.data.dim(); ++d) p.header[2 + d] = p.data.size(d);
  p.header_work = comm_.isend(comm::ConstBuffer{p.header.data(), kHeader, comm::DType::i64}, peer,
                              header_tag(tag));
  p.data_work = comm_.isend(buffer_of(p.data), peer, data_tag(tag));
  bytes_ += p.data.numel() * p.data.element_size();
  pending_.push_back(std::move(p));
}

torch::Tensor StageLink::recv(int peer, int tag) {
  release_completed();
  std::vector<std::int64_t> header(kHeader);
  comm_.recv(comm::Buffer{header.data(), kHeader, comm::DType::i64}, peer, header_tag(tag));
  const auto dims = std::vector<std::int64_t>(header.begin() + 2, header.begin() + 2 + header[1]);
  auto t =
      torch::empty(dims, torch::TensorOptions().dtype(static_cast<torch::ScalarType>(header[0])));
  comm_.recv(buffer_of(t), peer, data_tag(tag));
  return t;
}

// A completed send's tensor is freed at once; wait() rethrows a send that failed.
void StageLink::release_completed() {
  std::erase_if(pending_, [](Pending& p) {
    if (!p.header_work.test() || !p.data_work.test()) return false;
    p.header_work.wait();
    p.data_work.wait();
    return true;
  });
}

std::size_t StageLink::flush(bool all) {
  std::vector<Pending> kept;
  for (auto& p : pending_) {
    if (!all && p.flushes_to_skip-- > 0) {
      kept.push_back(std::move(p));
      continue;
    }
    p.header_work.wait();
    p.data_work.wait();
  }
  pending_ = std::move(kept);
  return std::exchange(bytes_, 0);
}

void rethrow_naming(const CommError& e, int stage, int world_rank, const std::string& waiting) {
  const std::string why =
      cat("pipeline stage ", stage, " (rank ", world_rank, ") ", waiting, ": ", e.what());
  if (dynamic_cast<const TimeoutError*>(&e)) throw TimeoutError(why);
  throw CommError(why);
}

}  // namespace distml::train::pipeline
