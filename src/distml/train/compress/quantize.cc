#include <algorithm>
#include <cmath>

#include "distml/data/permutation.h"
#include "distml/train/compress/compressors.h"

namespace distml::train::compress {
namespace {

// One byte per element: the sign in the high bit, a 7-bit magnitude code below it.
constexpr std::uint8_t kNegative = 0x80;
constexpr std::uint8_t kMagnitude = 0x7f;

std::uint8_t code_of(bool negative, int magnitude) {
  return static_cast<std::uint8_t>((negative ? kNegative : 0) | magnitude);
}

float signed_value(std::uint8_t code, float magnitude) {
  return code & kNegative ? -magnitude : magnitude;
}

// Per block of kQsgdBlock elements: ||g_b||_2 sign(g_i) l_i / s with l_i = floor(s |g_i| / ||g_b||)
// plus 1 with probability the fraction left over: E[l_i] = s |g_i| / ||g_b||, so the decode is
// unbiased. One norm for a whole bucket of a million elements made the variance
// ~min(n / s^2, sqrt(n) / s) ||g||^2 (Alistarh et al., Lemma 3.1) and the MLP diverged; blocks of
// 512, the bucket size d of the QSGD paper's experiments, cost 4 bytes per 512.
constexpr std::int64_t kQsgdBlock = 512;

class Qsgd final : public PayloadCompressor {
 public:
  Qsgd(std::uint64_t seed, int levels)
      : PayloadCompressor(seed, torch::kFloat32), levels_(levels) {}

 protected:
  bool summable() const override { return false; }
  Payload encode(const torch::Tensor& grad, std::uint64_t rng_seed) const override {
    const auto g = grad.contiguous();
    const float* x = g.data_ptr<float>();
    const std::int64_t n = g.numel(), blocks = (n + kQsgdBlock - 1) / kQsgdBlock;
    torch::Tensor norms = torch::zeros({blocks}, torch::kFloat32);
    torch::Tensor codes = torch::zeros({n}, torch::kUInt8);
    auto* c = codes.data_ptr<std::uint8_t>();
    data::SplitMix64 rng(rng_seed);
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::int64_t begin = b * kQsgdBlock, end = std::min(n, begin + kQsgdBlock);
      const float norm = g.slice(0, begin, end).norm().item<float>();
      norms[b] = norm;
      for (std::int64_t i = begin; norm > 0 && i < end; ++i) {
        const double scaled = std::abs(x[i]) / norm * levels_;
        const double floor = std::floor(scaled);
        const int level = static_cast<int>(floor) + (rng.uniform() < scaled - floor ? 1 : 0);
        c[i] = code_of(x[i] < 0, std::min(level, levels_));
      }
    }
    return {norms, codes};
  }
  torch::Tensor decode(const Payload& payload, std::int64_t n, std::uint64_t) const override {
    const auto norms = payload[0].contiguous();
    const float* norm = norms.data_ptr<float>();
    const auto* c = payload[1].contiguous().data_ptr<std::uint8_t>();
    torch::Tensor out = torch::empty({n}, torch::kFloat32);
    float* y = out.data_ptr<float>();
    for (std::int64_t i = 0; i < n; ++i) {
      const float unit = norm[i / kQsgdBlock] / static_cast<float>(levels_);
      y[i] = signed_value(c[i], unit * (c[i] & kMagnitude));
    }
    return out;
  }

 private:
  int levels_;
};

// |g_i| = (1 + p) 2^e with p in [0, 1) becomes 2^(e+1) with probability p, else 2^e: the mean is
// (1 + p) 2^e, unbiased. The exponent travels in 7 bits below the bucket's largest: a value
// 2^126 times smaller than the largest becomes 0 (it could not change the update anyway).
class Natural final : public PayloadCompressor {
 public:
  explicit Natural(std::uint64_t seed) : PayloadCompressor(seed, torch::kFloat32) {}

 protected:
  bool summable() const override { return false; }
  Payload encode(const torch::Tensor& grad, std::uint64_t rng_seed) const override {
    const auto g = grad.contiguous();
    const float* x = g.data_ptr<float>();
    const std::int64_t n = g.numel();
    std::vector<int> exponent(static_cast<std::size_t>(n));
    int largest = std::numeric_limits<int>::min();
    data::SplitMix64 rng(rng_seed);
    for (std::int64_t i = 0; i < n; ++i) {
      if (x[i] == 0 || !std::isfinite(x[i])) continue;
      int e = 0;
      const double mantissa = std::frexp(std::abs(static_cast<double>(x[i])), &e);  // [0.5, 1)
      exponent[i] = e - 1 + (rng.uniform() < 2 * mantissa - 1 ? 1 : 0);
      largest = std::max(largest, exponent[i]);
    }
    torch::Tensor codes = torch::zeros({n}, torch::kUInt8);
    auto* c = codes.data_ptr<std::uint8_t>();
    for (std::int64_t i = 0; i < n; ++i) {
      if (x[i] == 0 || !std::isfinite(x[i])) continue;
      const int below = largest - exponent[i];
      if (below < kMagnitude) c[i] = code_of(x[i] < 0, below + 1);
    }
    return {torch::tensor({largest}, torch::kInt32), codes};
  }
  torch::Tensor decode(const Payload& payload, std::int64_t n, std::uint64_t) const override {
    const int largest = payload[0].item<int>();
    const auto* c = payload[1].contiguous().data_ptr<std::uint8_t>();
    torch::Tensor out = torch::zeros({n}, torch::kFloat32);
    float* y = out.data_ptr<float>();
    for (std::int64_t i = 0; i < n; ++i)
      if (c[i] & kMagnitude)
        y[i] = signed_value(c[i], std::ldexp(1.0f, largest - (c[i] & kMagnitude) + 1));
    return out;
  }
};

}  // namespace

std::unique_ptr<Compressor> make_qsgd(std::uint64_t seed, int levels) {
  return std::make_unique<Qsgd>(seed, levels);
}

std::unique_ptr<Compressor> make_natural(std::uint64_t seed) {
  return std::make_unique<Natural>(seed);
}

}  // namespace distml::train::compress
