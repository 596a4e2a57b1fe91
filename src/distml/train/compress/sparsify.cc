#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "distml/data/permutation.h"
#include "distml/train/compress/compressors.h"

namespace distml::train::compress {
namespace {

std::int64_t kept(double ratio, std::int64_t n) {
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(std::ceil(ratio * n)), 1, n);
}

// Values at indices into a flat vector of `n` zeros.
torch::Tensor scatter(const torch::Tensor& indices, const torch::Tensor& values, std::int64_t n) {
  return torch::zeros({n}, values.options()).index_put_({indices.to(torch::kLong)}, values);
}

// The k largest magnitudes and where they are: k values, and k indices in 2 bytes each where
// the bucket has at most 65536 elements (else 4), so that 1% of a small model's gradient costs
// 1.5% of its bytes, not 2%.
class TopK final : public PayloadCompressor {
 public:
  TopK(std::uint64_t seed, double ratio, torch::ScalarType dtype)
      : PayloadCompressor(seed, dtype), ratio_(ratio) {}

 protected:
  bool summable() const override { return false; }
  Payload encode(const torch::Tensor& grad, std::uint64_t) const override {
    const auto indices = std::get<1>(grad.abs().topk(kept(ratio_, grad.numel())));
    const auto packed = short_indices(grad.numel())
                            ? indices.to(torch::kInt16).view(torch::kUInt8)  // bytes to send
                            : indices.to(torch::kInt32);
    return {packed, grad.index({indices})};
  }
  torch::Tensor decode(const Payload& payload, std::int64_t n, std::uint64_t) const override {
    const auto indices =
        short_indices(n) ? payload[0].contiguous().view(torch::kInt16).to(torch::kInt32) & 0xffff
                         : payload[0];
    return scatter(indices, payload[1], n);
  }

 private:
  static bool short_indices(std::int64_t n) { return n <= 65536; }
  double ratio_;
};

// k indices drawn without replacement from a stream every rank shares for (bucket, step), so
// the values line up and average element-wise; only the values travel. Each element is sent
// with probability k / n, so a decode scaled by n / k has the gradient as its expectation.
class RandomK final : public PayloadCompressor {
 public:
  RandomK(std::uint64_t seed, double ratio, bool unbiased, torch::ScalarType dtype)
      : PayloadCompressor(seed, dtype), ratio_(ratio), unbiased_(unbiased) {}

 protected:
  bool summable() const override { return true; }
  Payload encode(const torch::Tensor& grad, std::uint64_t rng_seed) const override {
    return {grad.index({draw(grad.numel(), rng_seed)})};
  }
  torch::Tensor decode(const Payload& payload, std::int64_t n,
                       std::uint64_t rng_seed) const override {
    const auto values =
        unbiased_ ? payload[0] * (static_cast<double>(n) / static_cast<double>(kept(ratio_, n)))
                  : payload[0];
    return scatter(draw(n, rng_seed), values, n);
  }

 private:
  // Floyd's sampling: k distinct indices in O(k) memory, sorted.
  torch::Tensor draw(std::int64_t n, std::uint64_t rng_seed) const {
    const std::int64_t k = kept(ratio_, n);
    data::SplitMix64 rng(rng_seed);
    std::unordered_set<std::int64_t> chosen;
    for (std::int64_t j = n - k; j < n; ++j) {
      const auto t = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(j) + 1));
      chosen.insert(chosen.count(t) ? j : t);
    }
    std::vector<std::int64_t> sorted(chosen.begin(), chosen.end());
    std::sort(sorted.begin(), sorted.end());
    return torch::tensor(sorted, torch::kLong);
  }

  double ratio_;
  bool unbiased_;
};

}  // namespace

std::unique_ptr<Compressor> make_top_k(std::uint64_t seed, double ratio, torch::ScalarType dtype) {
  return std::make_unique<TopK>(seed, ratio, dtype);
}

std::unique_ptr<Compressor> make_random_k(std::uint64_t seed, double ratio, bool unbiased,
                                          torch::ScalarType dtype) {
  return std::make_unique<RandomK>(seed, ratio, unbiased, dtype);
}

}  // namespace distml::train::compress
