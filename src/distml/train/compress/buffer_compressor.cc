#include "distml/train/compress/buffer_compressor.h"

#include <cstring>

#include "distml/core/error.h"
#include "distml/train/compress/compressor.h"

namespace distml::train::compress {

struct BufferCompressor::Impl {
  torch::ScalarType type;
  std::vector<std::int64_t> elements;  // per bucket
  std::unique_ptr<Compressor> compressor;
};

BufferCompressor::BufferCompressor(const CompressOptions& options,
                                   const std::vector<Shapes>& buckets, comm::DType dtype)
    : impl_(std::make_unique<Impl>()) {
  if (dtype != comm::DType::f32 && dtype != comm::DType::f64)
    throw ConfigError(cat("compress.name = ", options.name, ": the parameters are ",
                          comm::dtype_name(dtype), "; compressors take float32 (some float64)"));
  impl_->type = dtype == comm::DType::f32 ? torch::kFloat32 : torch::kFloat64;
  std::vector<BucketLayout> layouts;
  for (const Shapes& shapes : buckets) {
    std::vector<torch::Tensor> tensors;  // shapes only: on the meta device, no memory
    for (const auto& shape : shapes)
      tensors.push_back(
          torch::empty(shape, torch::TensorOptions(impl_->type).device(torch::kMeta)));
    layouts.push_back(layout_of(tensors, options));
    impl_->elements.push_back(layouts.back().elements);
  }
  impl_->compressor = make_compressor(options, layouts);
  if (!impl_->compressor)
    throw ConfigError("compress.name = none makes no compressor: leave compression out");
}

BufferCompressor::~BufferCompressor() = default;

namespace {

// `data` as bucket `bucket`'s gradients, after checking that it holds them.
torch::Tensor bucket_view(comm::Buffer data, std::size_t bucket, torch::ScalarType type,
                          const std::vector<std::int64_t>& elements) {
  const bool same_type =
      data.dtype == (type == torch::kFloat32 ? comm::DType::f32 : comm::DType::f64);
  if (bucket >= elements.size() || !same_type ||
      data.count < static_cast<std::size_t>(elements[bucket]))
    throw UsageError(cat("compression: bucket ", bucket, " of ", elements.size(), " needs ",
                         bucket < elements.size() ? elements[bucket] : 0, " elements of ",
                         c10::toString(type), "; got ", data.count, " of ",
                         comm::dtype_name(data.dtype)));
  return torch::from_blob(data.data, {elements[bucket]}, type);
}

}  // namespace

void BufferCompressor::pack(comm::Buffer data, std::size_t bucket, std::int64_t step, int rank,
                            comm::Buffer out) {
  const auto packed = impl_->compressor->pack(
      bucket_view(data, bucket, impl_->type, impl_->elements), bucket, step, rank);
  const auto bytes = static_cast<std::size_t>(packed.bytes.numel());
  if (out.dtype != comm::DType::u8 || out.count != bytes)
    throw UsageError(cat("compression: bucket ", bucket, " packs into ", bytes,
                         " bytes; got a buffer of ", out.count, " ", comm::dtype_name(out.dtype)));
  std::memcpy(out.data, packed.bytes.data_ptr(), bytes);
}

std::size_t BufferCompressor::packed_bytes(std::size_t bucket) const {
  return impl_->compressor->packed_bytes(bucket, impl_->elements.at(bucket));
}

std::size_t BufferCompressor::reduce(comm::Buffer data, std::size_t bucket, std::int64_t step,
                                     comm::Communicator& comm) {
  const auto grads = bucket_view(data, bucket, impl_->type, impl_->elements);
  const auto reduced = impl_->compressor->reduce(grads, bucket, step, comm);
  grads.copy_(reduced.average);
  return reduced.bytes_sent;
}

std::string BufferCompressor::save_state() const { return impl_->compressor->save_state(); }

void BufferCompressor::load_state(const std::string& state) {
  impl_->compressor->load_state(state);
}

}  // namespace distml::train::compress
