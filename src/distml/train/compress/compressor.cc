#include "distml/train/compress/compressor.h"

#include <cstring>
#include <sstream>

#include "distml/core/error.h"
#include "distml/data/permutation.h"
#include "distml/train/compress/compressors.h"
#include "distml/train/tensor_buffer.h"

namespace distml::train::compress {
namespace {

std::size_t bytes_of(const PayloadCompressor::Payload& payload) {
  std::size_t bytes = 0;
  for (const auto& t : payload) bytes += t.numel() * t.element_size();
  return bytes;
}

// Keeps input - sent per bucket and adds it to the next gradient of that bucket.
class ErrorFeedback final : public Compressor {
 public:
  explicit ErrorFeedback(std::unique_ptr<Compressor> inner) : inner_(std::move(inner)) {}

  Reduced reduce(const torch::Tensor& grad, std::size_t bucket, std::int64_t step,
                 comm::Communicator& comm) override {
    torch::Tensor& residual = residual_of(bucket);
    const torch::Tensor input = residual.defined() ? grad + residual : grad;
    Reduced r = inner_->reduce(input, bucket, step, comm);
    residual = input - r.sent;
    return r;
  }

  Packed pack(const torch::Tensor& grad, std::size_t bucket, std::int64_t step, int rank) override {
    torch::Tensor& residual = residual_of(bucket);
    const torch::Tensor input = residual.defined() ? grad + residual : grad;
    Packed p = inner_->pack(input, bucket, step, rank);
    residual = input - p.sent;
    return p;
  }
  torch::Tensor unpack(const torch::Tensor& bytes, std::size_t bucket,
                       std::int64_t elements) override {
    return inner_->unpack(bytes, bucket, elements);
  }
  std::size_t packed_bytes(std::size_t bucket, std::int64_t elements) override {
    return inner_->packed_bytes(bucket, elements);
  }
  std::vector<WireStep> wire(std::size_t bucket, std::int64_t elements) override {
    return inner_->wire(bucket, elements);
  }

  std::string save_state() const override {
    torch::serialize::OutputArchive archive;
    archive.write("inner", inner_->save_state());
    archive.write("buckets", torch::tensor(static_cast<std::int64_t>(residuals_.size())));
    for (std::size_t b = 0; b < residuals_.size(); ++b)
      if (residuals_[b].defined()) archive.write(cat("residual", b), residuals_[b]);
    return archive_bytes(archive);
  }

  void load_state(const std::string& state) override {
    if (state.empty()) return;
    torch::serialize::InputArchive archive;
    read_archive(archive, state);
    c10::IValue inner;
    archive.read("inner", inner);
    inner_->load_state(inner.toStringRef());
    torch::Tensor count;
    archive.read("buckets", count);
    residuals_.assign(static_cast<std::size_t>(count.item<std::int64_t>()), torch::Tensor());
    for (std::size_t b = 0; b < residuals_.size(); ++b)
      archive.try_read(cat("residual", b), residuals_[b]);
  }

 private:
  torch::Tensor& residual_of(std::size_t bucket) {
    if (residuals_.size() <= bucket) residuals_.resize(bucket + 1);
    return residuals_[bucket];
  }

  std::unique_ptr<Compressor> inner_;
  std::vector<torch::Tensor> residuals_;
};

}  // namespace

std::string archive_bytes(torch::serialize::OutputArchive& archive) {
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

void read_archive(torch::serialize::InputArchive& archive, const std::string& bytes) {
  archive.load_from(bytes.data(), bytes.size());
}

bool takes_float64(const std::string& name) {
  return name == "fp16" || name == "bf16" || name == "topk" || name == "randomk" ||
         name == "powersgd";
}

BucketLayout layout_of(std::span<const torch::Tensor> tensors, const CompressOptions& options) {
  BucketLayout layout;
  for (const auto& t : tensors) {
    const bool float64 = t.scalar_type() == torch::kFloat64 && takes_float64(options.name);
    if (t.scalar_type() != torch::kFloat32 && !float64)
      throw ConfigError(cat("compress.name = ", options.name, ": this compressor needs float32 ",
                            "parameters (train.dtype = float32); this model has ",
                            c10::toString(t.scalar_type()),
                            " (fp16, bf16, topk, randomk and powersgd also take float64)"));
    layout.dtype = t.scalar_type();
    layout.offsets.push_back(layout.elements);
    layout.shapes.push_back(t.sizes().vec());
    layout.elements += t.numel();
  }
  return layout;
}

torch::Tensor PayloadCompressor::combine(const torch::Tensor& decoded) const {
  return decoded.mean(0);
}

// Summable payloads draw alike on every rank; the others draw independently per rank.
std::uint64_t PayloadCompressor::rng_seed(std::size_t bucket, std::int64_t step, int rank) const {
  const std::uint64_t rank_stream = summable() ? 0 : 1 + static_cast<std::uint64_t>(rank);
  return data::derive_seed(data::derive_seed(seed_, bucket, static_cast<std::uint64_t>(step)),
                           rank_stream);
}

const PayloadCompressor::Payload& PayloadCompressor::shapes_for(std::int64_t elements) {
  auto it = shapes_.find(elements);
  if (it == shapes_.end())
    it = shapes_.emplace(elements, encode(torch::zeros({elements}, dtype_), 0)).first;
  return it->second;
}

std::size_t PayloadCompressor::packed_bytes(std::size_t, std::int64_t elements) {
  return sizeof(std::uint64_t) + bytes_of(shapes_for(elements));
}

std::vector<WireStep> PayloadCompressor::wire(std::size_t, std::int64_t elements) {
  std::vector<WireStep> steps;
  for (const auto& t : shapes_for(elements))
    steps.push_back({!summable(), static_cast<std::size_t>(t.numel() * t.element_size())});
  return steps;
}

Packed PayloadCompressor::pack(const torch::Tensor& grad, std::size_t bucket, std::int64_t step,
                               int rank) {
  const std::uint64_t seed = rng_seed(bucket, step, rank);
  const Payload payload = encode(grad, seed);
  Packed p{
      torch::empty({static_cast<std::int64_t>(sizeof seed + bytes_of(payload))}, torch::kUInt8),
      decode(payload, grad.numel(), seed)};
  auto* out = p.bytes.data_ptr<std::uint8_t>();
  std::memcpy(out, &seed, sizeof seed);
  out += sizeof seed;
  for (const auto& t : payload) {
    const auto c = t.contiguous();
    std::memcpy(out, c.data_ptr(), c.numel() * c.element_size());
    out += c.numel() * c.element_size();
  }
  return p;
}

torch::Tensor PayloadCompressor::unpack(const torch::Tensor& bytes, std::size_t bucket,
                                        std::int64_t elements) {
  DML_CHECK(bytes.numel() == static_cast<std::int64_t>(packed_bytes(bucket, elements)),
            "compressed bucket ", bucket, ": ", bytes.numel(), " bytes, expected ",
            packed_bytes(bucket, elements));
  const auto* in = bytes.data_ptr<std::uint8_t>();
  std::uint64_t seed = 0;
  std::memcpy(&seed, in, sizeof seed);
  in += sizeof seed;
  Payload payload;
  for (const auto& shape : shapes_for(elements)) {
    payload.push_back(torch::empty(shape.sizes(), shape.options()));
    std::memcpy(payload.back().data_ptr(), in, shape.numel() * shape.element_size());
    in += shape.numel() * shape.element_size();
  }
  return decode(payload, elements, seed);
}

Reduced PayloadCompressor::reduce(const torch::Tensor& grad, std::size_t bucket, std::int64_t step,
                                  comm::Communicator& comm) {
  const std::int64_t n = grad.numel();
  const std::uint64_t rng_seed = this->rng_seed(bucket, step, comm.rank());
  Payload payload = encode(grad, rng_seed);
  Reduced r;
  r.sent = decode(payload, n, rng_seed);
  r.bytes_sent = bytes_of(payload);
  if (summable()) {
    Payload mean;
    for (auto& t : payload) {
      mean.push_back(t.clone());
      comm.allreduce(buffer_of(mean.back()), {.op = comm::ReduceOp::avg});
    }
    r.average = decode(mean, n, rng_seed);
    return r;
  }
  // Gathered: every rank's payload, decoded one by one.
  const std::int64_t ranks = comm.size();
  std::vector<Payload> per_rank(static_cast<std::size_t>(ranks));
  for (auto& t : payload) {
    torch::Tensor all = torch::empty({ranks, t.numel()}, t.options());
    comm.allgather(buffer_of(t.contiguous()), buffer_of(all));
    for (std::int64_t k = 0; k < ranks; ++k) per_rank[k].push_back(all[k]);
  }
  torch::Tensor decoded = torch::empty({ranks, n}, grad.options());
  for (std::int64_t k = 0; k < ranks; ++k) decoded[k].copy_(decode(per_rank[k], n, rng_seed));
  r.average = combine(decoded);
  return r;
}

std::unique_ptr<Compressor> make_compressor(const CompressOptions& o,
                                            const std::vector<BucketLayout>& buckets) {
  std::unique_ptr<Compressor> c;
  if (o.name == "none") return nullptr;
  const auto dtype = buckets.empty() ? torch::kFloat32 : buckets.front().dtype;
  if (o.name == "topk" || o.name == "randomk") {
    if (!(o.ratio > 0 && o.ratio <= 1))
      throw ConfigError(cat("compress.ratio: ", o.ratio, " is not in (0, 1]"));
  }
  if (o.name == "fp16")
    c = make_float16(torch::kHalf, dtype);
  else if (o.name == "bf16")
    c = make_float16(torch::kBFloat16, dtype);
  else if (o.name == "topk")
    c = make_top_k(o.seed, o.ratio, dtype);
  else if (o.name == "randomk")
    c = make_random_k(o.seed, o.ratio, /*unbiased=*/!o.error_feedback, dtype);
  else if (o.name == "qsgd") {
    if (o.levels < 1 || o.levels > 127)
      throw ConfigError(cat("compress.levels: ", o.levels,
                            " is not in 1..127 (QSGD's levels s "
                            "are sent in 7 bits)"));
    c = make_qsgd(o.seed, static_cast<int>(o.levels));
  } else if (o.name == "natural")
    c = make_natural(o.seed);
  else if (o.name == "sign")
    c = o.error_feedback ? make_scaled_sign(o.seed) : make_majority_vote(o.seed);
  else if (o.name == "powersgd") {
    if (o.rank < 1) throw ConfigError(cat("compress.rank: ", o.rank, " is not at least 1"));
    c = make_power_sgd(o.seed, o.rank, buckets);
  } else {
    throw ConfigError(cat("compress.name: unknown compressor '", o.name, "'"));
  }
  if (o.error_feedback) c = std::make_unique<ErrorFeedback>(std::move(c));
  return c;
}

}  // namespace distml::train::compress
