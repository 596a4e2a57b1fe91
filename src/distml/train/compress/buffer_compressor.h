// A compressor over flat buffers, for callers that do not include torch (the Python module's
// DistributedOptimizer): make_compressor's compressor over buckets given by their parameters'
// shapes, reducing a bucket's memory in place. Its state is the compressor's own (error
// feedback's residuals, PowerSGD's warm start), saved and loaded as for a checkpoint.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/train/compress/compress_options.h"

namespace distml::train::compress {

class BufferCompressor {
 public:
  using Shapes = std::vector<std::vector<std::int64_t>>;
  /// `buckets`: each bucket's parameter shapes, in its order; `dtype`: f32 or f64. ConfigError
  /// as make_compressor (and for "none", which makes no compressor).
  BufferCompressor(const CompressOptions& options, const std::vector<Shapes>& buckets,
                   comm::DType dtype);
  ~BufferCompressor();

  /// Collective over `comm`: `data`, bucket `bucket`'s gradients laid end to end (anything
  /// after them is left alone), becomes the compressed average over the ranks at `step` (1 for
  /// the first). Returns the payload bytes this rank sent.
  std::size_t reduce(comm::Buffer data, std::size_t bucket, std::int64_t step,
                     comm::Communicator& comm);
  /// A parameter server worker's side: bucket `bucket`'s gradients in `data` packed for step
  /// `step` (1 for the first) into `out`, of packed_bytes(bucket) bytes (compressor.h, pack()).
  void pack(comm::Buffer data, std::size_t bucket, std::int64_t step, int rank, comm::Buffer out);
  std::size_t packed_bytes(std::size_t bucket) const;
  std::string save_state() const;
  void load_state(const std::string& state);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace distml::train::compress
