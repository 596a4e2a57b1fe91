#include "distml/train/compress/compressors.h"

namespace distml::train::compress {
namespace {

// Half the bytes; the all-reduce sums pairs in f32 and rounds each partial sum back.
class Float16 final : public PayloadCompressor {
 public:
  Float16(std::uint64_t seed, torch::ScalarType type) : PayloadCompressor(seed), type_(type) {}

 protected:
  bool summable() const override { return true; }
  Payload encode(const torch::Tensor& grad, std::uint64_t) const override {
    return {grad.to(type_)};
  }
  torch::Tensor decode(const Payload& payload, std::int64_t, std::uint64_t) const override {
    return payload[0].to(torch::kFloat32);
  }

 private:
  torch::ScalarType type_;
};

}  // namespace

std::unique_ptr<Compressor> make_float16(std::uint64_t seed, torch::ScalarType type) {
  return std::make_unique<Float16>(seed, type);
}

}  // namespace distml::train::compress
