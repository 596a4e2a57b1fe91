// Gradient compression on buckets: what a rank sends for its share of a bucket's average, when
// the link, not the compute, is what a step waits for.
//
// A compressor turns a bucket's flat gradient into a payload and back. Some payloads can be
// averaged element-wise by an all-reduce (fp16, bf16, random-k with indices every rank draws
// alike, PowerSGD's factors); the others differ in layout from rank to rank (top-k's indices,
// QSGD's and natural compression's codes, signs) and are all-gathered, then decoded rank by rank.
// Either way reduce() returns the approximate average and what this rank's part of it was
// ("sent"). A parameter server instead receives each worker's payload alone: pack() is the
// worker's side (bytes of a size fixed per bucket, so that the server can post its receive),
// unpack() the server's; error feedback (Seide et al. 2014, Karimireddy et al. 2019) keeps input -
// sent per bucket and adds it to the next step's gradient, so nothing is lost, only delayed.
//
// Randomness (QSGD, natural compression, random-k) is drawn from (seed, bucket, step, rank), so
// a run resumed from a checkpoint draws what the uninterrupted run drew.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/train/compress/compress_options.h"

namespace distml::train::compress {

/// Where each parameter's gradient sits in a bucket's flat tensor (PowerSGD compresses
/// matrices, not the flat vector).
struct BucketLayout {
  std::vector<std::int64_t> offsets;
  std::vector<std::vector<std::int64_t>> shapes;
  std::int64_t elements = 0;                  // the gradients, without flags or padding
  torch::ScalarType dtype = torch::kFloat32;  // the gradients'
};

/// Whether the compressor `name` also reduces float64 gradients (in float64 where it computes:
/// top-k's values, PowerSGD's factors; fp16 and bf16 round from float64), for numerical checks.
/// All of them take float32.
bool takes_float64(const std::string& name);

/// The layout of `tensors` laid end to end (a gradient bucket, or a flat copy of a model).
/// ConfigError naming `options.name` unless the compressor takes their dtype.
BucketLayout layout_of(std::span<const torch::Tensor> tensors, const CompressOptions& options);

/// A worker's payload for a parameter server, which decodes each worker's on its own.
struct Packed {
  torch::Tensor bytes;  // u8, packed_bytes() of them
  torch::Tensor sent;   // what unpack() will make of them
};

/// One of the collectives reduce() makes, in order: an all-reduce or an all-gather of `bytes`
/// from each rank. The simulator replays them (sim/compression.h).
struct WireStep {
  bool gathered = false;
  std::size_t bytes = 0;
};

/// One bucket's reduction.
struct Reduced {
  torch::Tensor average;  // the approximate mean over ranks, laid out like the input
  torch::Tensor sent;     // this rank's contribution as the other ranks decode it
  std::size_t bytes_sent = 0;
};

class Compressor {
 public:
  virtual ~Compressor() = default;
  /// Collective over `comm`: the approximate average of every rank's `grad` (a bucket's
  /// flat f32 gradient) for step `step` (1 for the first).
  virtual Reduced reduce(const torch::Tensor& grad, std::size_t bucket, std::int64_t step,
                         comm::Communicator& comm) = 0;
  /// This rank's payload for `bucket` at `step` (1 for the first), sent alone.
  virtual Packed pack(const torch::Tensor& grad, std::size_t bucket, std::int64_t step,
                      int rank) = 0;
  /// pack()'s bytes back to a flat gradient of `elements` (the server's side).
  virtual torch::Tensor unpack(const torch::Tensor& bytes, std::size_t bucket,
                               std::int64_t elements) = 0;
  /// How many bytes pack() makes of a bucket of `elements`: the same at every step.
  virtual std::size_t packed_bytes(std::size_t bucket, std::int64_t elements) = 0;
  /// The collectives reduce() makes for a bucket of `elements`: the same at every step.
  virtual std::vector<WireStep> wire(std::size_t bucket, std::int64_t elements) = 0;
  /// What a resumed run needs to continue exactly (error feedback's residuals, PowerSGD's
  /// warm start), serialised; load_state takes what save_state returned.
  virtual std::string save_state() const { return {}; }
  virtual void load_state(const std::string& /*state*/) {}
};

/// A compressor whose payload is one list of tensors, the same shapes on every rank: encoded,
/// then all-reduced (summable) or all-gathered, then decoded.
class PayloadCompressor : public Compressor {
 public:
  using Payload = std::vector<torch::Tensor>;
  Reduced reduce(const torch::Tensor& grad, std::size_t bucket, std::int64_t step,
                 comm::Communicator& comm) final;
  /// The bytes are the rng seed (8) and then each payload tensor's, in order.
  Packed pack(const torch::Tensor& grad, std::size_t bucket, std::int64_t step, int rank) final;
  torch::Tensor unpack(const torch::Tensor& bytes, std::size_t bucket, std::int64_t elements) final;
  std::size_t packed_bytes(std::size_t bucket, std::int64_t elements) final;
  /// One collective per payload tensor.
  std::vector<WireStep> wire(std::size_t bucket, std::int64_t elements) final;

 protected:
  /// `dtype`: the gradients' (what pack() and unpack() make payloads of).
  PayloadCompressor(std::uint64_t seed, torch::ScalarType dtype) : seed_(seed), dtype_(dtype) {}
  /// Whether the element-wise average of payloads decodes to the average of the decodes.
  virtual bool summable() const = 0;
  /// `rng_seed` is derived from (seed, bucket, step) and, unless the payload is summable, the
  /// rank: summable payloads that draw (random-k) must draw alike on every rank.
  virtual Payload encode(const torch::Tensor& grad, std::uint64_t rng_seed) const = 0;
  /// A payload (or the average of payloads) back to a flat gradient of `elements`; `rng_seed`
  /// is encode's (summable payloads) or, for gathered ones, that of the decoding rank.
  virtual torch::Tensor decode(const Payload& payload, std::int64_t elements,
                               std::uint64_t rng_seed) const = 0;
  /// Gathered payloads only: the ranks' decodes (ranks x elements) into the result. The mean;
  /// signSGD's majority vote takes the sign of the sum.
  virtual torch::Tensor combine(const torch::Tensor& decoded) const;

 private:
  std::uint64_t rng_seed(std::size_t bucket, std::int64_t step, int rank) const;
  /// A payload of zeros for `elements`: the shapes and types that pack()'s bytes hold.
  const Payload& shapes_for(std::int64_t elements);

  std::uint64_t seed_;
  torch::ScalarType dtype_;
  std::map<std::int64_t, Payload> shapes_;  // by bucket size
};

/// The compressor `options` names, wrapped in error feedback where asked; null for "none".
/// ConfigError (naming the compress.* key) for a value out of range.
std::unique_ptr<Compressor> make_compressor(const CompressOptions& options,
                                            const std::vector<BucketLayout>& buckets);

}  // namespace distml::train::compress
