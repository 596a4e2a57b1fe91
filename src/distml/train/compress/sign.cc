#include "distml/train/compress/compressors.h"

namespace distml::train::compress {
namespace {

// Signs packed eight to a byte (bit set: negative), with one f32 scale.
class Sign : public PayloadCompressor {
 protected:
  explicit Sign(std::uint64_t seed) : PayloadCompressor(seed, torch::kFloat32) {}

 protected:
  bool summable() const override { return false; }
  Payload encode(const torch::Tensor& grad, std::uint64_t) const override {
    const auto g = grad.contiguous();
    const float* x = g.data_ptr<float>();
    const std::int64_t n = g.numel();
    torch::Tensor bits = torch::zeros({(n + 7) / 8}, torch::kUInt8);
    auto* b = bits.data_ptr<std::uint8_t>();
    for (std::int64_t i = 0; i < n; ++i)
      if (x[i] < 0) b[i / 8] |= static_cast<std::uint8_t>(1u << (i % 8));
    return {torch::tensor({scale(g)}), bits};
  }
  torch::Tensor decode(const Payload& payload, std::int64_t n, std::uint64_t) const override {
    const float s = payload[0].item<float>();
    const auto* b = payload[1].contiguous().data_ptr<std::uint8_t>();
    torch::Tensor out = torch::empty({n}, torch::kFloat32);
    float* y = out.data_ptr<float>();
    for (std::int64_t i = 0; i < n; ++i) y[i] = (b[i / 8] >> (i % 8)) & 1u ? -s : s;
    return out;
  }
  /// The magnitude every element is sent with.
  virtual float scale(const torch::Tensor& grad) const = 0;
};

// The mean magnitude, so that the decode has the gradient's l1 norm (EF-signSGD).
class ScaledSign final : public Sign {
 public:
  explicit ScaledSign(std::uint64_t seed) : Sign(seed) {}

 protected:
  float scale(const torch::Tensor& grad) const override { return grad.abs().mean().item<float>(); }
};

// Every rank votes +1 or -1 per element; the update is the sign of the tally (0 on a tie).
class MajorityVote final : public Sign {
 public:
  explicit MajorityVote(std::uint64_t seed) : Sign(seed) {}

 protected:
  float scale(const torch::Tensor&) const override { return 1; }
  torch::Tensor combine(const torch::Tensor& decoded) const override {
    return decoded.sum(0).sign();
  }
};

}  // namespace

std::unique_ptr<Compressor> make_scaled_sign(std::uint64_t seed) {
  return std::make_unique<ScaledSign>(seed);
}

std::unique_ptr<Compressor> make_majority_vote(std::uint64_t seed) {
  return std::make_unique<MajorityVote>(seed);
}

}  // namespace distml::train::compress
