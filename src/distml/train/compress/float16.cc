#include <algorithm>
#include <cmath>
#include <cstring>

#include "distml/core/error.h"
#include "distml/train/compress/compressors.h"
#include "distml/train/tensor_buffer.h"

namespace distml::train::compress {
namespace {

// The largest sum of fp16 values the reduction may form: 2^15, half of fp16's largest finite
// value (65504), so that the pairwise sums rounded to fp16 stay in range.
constexpr float kHalfSumLimit = 32768.0f;

// The power of two that brings the largest magnitude times `ranks` to at most kHalfSumLimit
// (and small gradients up to it, out of fp16's subnormals); 1 for zeros or a gradient that is
// not finite (inf and NaN travel as they are, as they would uncompressed).
float power_of_two_scale(float largest, int ranks) {
  const float total = largest * static_cast<float>(ranks);
  if (!(total > 0) || !std::isfinite(total)) return 1.0f;
  const int exponent = static_cast<int>(std::floor(std::log2(kHalfSumLimit / total)));
  return std::ldexp(1.0f, std::clamp(exponent, -100, 100));
}

// Half the bytes; the all-reduce sums pairs in f32 and rounds each partial sum back. For fp16,
// whose range ends at 65504, every rank first multiplies its gradient by one power of two,
// chosen from the largest magnitude of any rank (one all-reduce of a float) so that the sum of
// all ranks stays within 2^15: exact to apply and to undo, it keeps a large gradient from
// becoming inf (which error feedback would then keep for good) and small ones out of fp16's
// subnormals. bf16 has float32's range and goes as it is. A push to a parameter server is
// scaled by the worker's own largest magnitude, sent with it.
class HalfPrecision final : public Compressor {
 public:
  HalfPrecision(torch::ScalarType type, torch::ScalarType dtype) : type_(type), dtype_(dtype) {}

  Reduced reduce(const torch::Tensor& grad, std::size_t, std::int64_t,
                 comm::Communicator& comm) override {
    Reduced r;
    float scale = 1.0f;
    if (type_ == torch::kHalf) {
      float largest = grad.numel() > 0 ? grad.abs().max().item<float>() : 0.0f;
      comm.allreduce(comm::Buffer{&largest, 1, comm::DType::f32}, {.op = comm::ReduceOp::max});
      r.bytes_sent += sizeof largest;
      scale = power_of_two_scale(largest, comm.size());
    }
    auto payload = (grad * scale).to(type_);
    r.sent = payload.to(grad.scalar_type()) / scale;
    r.bytes_sent += payload.numel() * payload.element_size();
    comm.allreduce(buffer_of(payload), {.op = comm::ReduceOp::avg});
    r.average = payload.to(grad.scalar_type()) / scale;
    return r;
  }

  // The bytes: the scale (f32), then the values.
  Packed pack(const torch::Tensor& grad, std::size_t bucket, std::int64_t, int) override {
    const float scale = type_ == torch::kHalf && grad.numel() > 0
                            ? power_of_two_scale(grad.abs().max().item<float>(), 1)
                            : 1.0f;
    const auto values = (grad * scale).to(type_).contiguous();
    Packed p{torch::empty({static_cast<std::int64_t>(packed_bytes(bucket, grad.numel()))},
                          torch::kUInt8),
             values.to(grad.scalar_type()) / scale};
    auto* out = p.bytes.data_ptr<std::uint8_t>();
    std::memcpy(out, &scale, sizeof scale);
    std::memcpy(out + sizeof scale, values.data_ptr(), values.numel() * values.element_size());
    return p;
  }

  torch::Tensor unpack(const torch::Tensor& bytes, std::size_t bucket,
                       std::int64_t elements) override {
    DML_CHECK(bytes.numel() == static_cast<std::int64_t>(packed_bytes(bucket, elements)),
              "compressed bucket ", bucket, ": ", bytes.numel(), " bytes, expected ",
              packed_bytes(bucket, elements));
    const auto* in = bytes.data_ptr<std::uint8_t>();
    float scale = 1.0f;
    std::memcpy(&scale, in, sizeof scale);
    auto values = torch::empty({elements}, type_);
    std::memcpy(values.data_ptr(), in + sizeof scale, elements * values.element_size());
    return values.to(dtype_) / scale;
  }

  std::size_t packed_bytes(std::size_t, std::int64_t elements) override {
    return sizeof(float) + static_cast<std::size_t>(elements) * 2;
  }

  // fp16: the largest magnitude's all-reduce, then the values'.
  std::vector<WireStep> wire(std::size_t, std::int64_t elements) override {
    std::vector<WireStep> steps;
    if (type_ == torch::kHalf) steps.push_back({false, sizeof(float)});
    steps.push_back({false, static_cast<std::size_t>(elements) * 2});
    return steps;
  }

 private:
  torch::ScalarType type_;   // fp16 or bf16, what travels
  torch::ScalarType dtype_;  // the gradients'
};

}  // namespace

std::unique_ptr<Compressor> make_float16(torch::ScalarType type, torch::ScalarType dtype) {
  return std::make_unique<HalfPrecision>(type, dtype);
}

}  // namespace distml::train::compress
