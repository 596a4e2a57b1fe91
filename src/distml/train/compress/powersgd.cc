// PowerSGD (Vogels, Karimireddy & Jaggi 2019), as PyTorch's powerSGD_hook runs it: each
// parameter's gradient viewed as an n x m matrix M (rows = its first dimension) is sent as
// P = M Q (n x r) and Q = M^T P (m x r) instead of n m values:
//  1. P = M Q, with Q from the previous step (warm start; at first a seeded random matrix every
//     rank draws alike); all-reduce P (avg), together with the gradients sent as they are;
//  2. orthogonalise P's columns (Gram-Schmidt);
//  3. Q = M^T P; all-reduce Q (avg);
//  4. the average is approximated by P Q^T, and Q is kept for the next step.
// Vectors (biases) and matrices whose factors would not be at least twice smaller than the
// matrix ((n + m) r x 2 > n m) are sent as they are. This rank's part ("sent") is P Q^T where
// it compressed and its own gradient elsewhere, so error feedback keeps M - P Q^T.
// To a parameter server a worker sends the plain elements, its orthogonalised P and its Q (the
// same steps without the averages); the server decodes P Q^T.

#include "distml/core/error.h"
#include "distml/data/permutation.h"
#include "distml/train/compress/compressors.h"
#include "distml/train/tensor_buffer.h"

namespace distml::train::compress {
namespace {

struct Matrix {
  std::int64_t offset, rows, cols, rank;
};

struct BucketPlan {
  std::vector<Matrix> matrices;
  torch::Tensor plain;  // indices of the elements sent as they are
};

BucketPlan plan_bucket(const BucketLayout& layout, std::int64_t rank) {
  BucketPlan plan;
  std::vector<std::int64_t> plain;
  for (std::size_t p = 0; p < layout.shapes.size(); ++p) {
    const auto& shape = layout.shapes[p];
    std::int64_t numel = 1;
    for (auto d : shape) numel *= d;
    const std::int64_t rows = shape.size() >= 2 ? shape[0] : 1,
                       cols = numel / std::max<std::int64_t>(rows, 1);
    const std::int64_t r = std::min({rank, rows, cols});
    if (shape.size() >= 2 && 2 * (rows + cols) * r <= rows * cols) {
      plan.matrices.push_back({layout.offsets[p], rows, cols, r});
    } else {
      for (std::int64_t i = 0; i < numel; ++i) plain.push_back(layout.offsets[p] + i);
    }
  }
  plan.plain = torch::tensor(plain, torch::kLong);
  return plan;
}

// Columns made orthonormal in place, left to right; a column that vanishes stays zero.
void orthogonalise(torch::Tensor& p) {
  for (std::int64_t j = 0; j < p.size(1); ++j) {
    auto col = p.select(1, j);
    for (std::int64_t i = 0; i < j; ++i) {
      const auto prev = p.select(1, i);
      col -= prev * (prev * col).sum();
    }
    const double norm = col.norm().item<double>();
    col /= norm > 0 ? norm : 1.0;
  }
}

class PowerSgd final : public Compressor {
 public:
  PowerSgd(std::uint64_t seed, std::int64_t rank, const std::vector<BucketLayout>& buckets)
      : seed_(seed), dtype_(buckets.empty() ? torch::kFloat32 : buckets.front().dtype) {
    for (const auto& layout : buckets) plans_.push_back(plan_bucket(layout, rank));
    q_.resize(buckets.size());
  }

  Reduced reduce(const torch::Tensor& grad, std::size_t bucket, std::int64_t,
                 comm::Communicator& comm) override {
    const BucketPlan& plan = plan_of(bucket);
    auto& q = q_[bucket];
    if (q.empty()) q = initial_q(plan, bucket, grad.scalar_type());
    std::vector<torch::Tensor> m, p;
    for (std::size_t i = 0; i < plan.matrices.size(); ++i) {
      m.push_back(matrix(grad, plan.matrices[i]));
      p.push_back(m.back().matmul(q[i]));
    }
    Reduced r;
    // 1. P and the plain elements, averaged in one all-reduce.
    std::vector<torch::Tensor> first = {grad.index({plan.plain})};
    for (auto& t : p) first.push_back(t.flatten());
    torch::Tensor joined = average(torch::cat(first), comm, r.bytes_sent);
    const std::int64_t plain = plan.plain.numel();
    r.average = torch::zeros_like(grad).index_put_({plan.plain}, joined.narrow(0, 0, plain));
    r.sent = torch::zeros_like(grad).index_put_({plan.plain}, first[0]);
    std::int64_t at = plain;
    for (std::size_t i = 0; i < p.size(); ++i) {
      p[i] = joined.narrow(0, at, p[i].numel()).view(p[i].sizes()).clone();
      at += p[i].numel();
      orthogonalise(p[i]);  // 2.
    }
    // 3. Q = M^T P, averaged.
    std::vector<torch::Tensor> qs;
    for (std::size_t i = 0; i < p.size(); ++i) qs.push_back(m[i].t().matmul(p[i]).flatten());
    if (!qs.empty()) {
      torch::Tensor q_avg = average(torch::cat(qs), comm, r.bytes_sent);
      at = 0;
      for (std::size_t i = 0; i < p.size(); ++i) {
        q[i] = q_avg.narrow(0, at, q[i].numel()).view(q[i].sizes()).clone();
        at += q[i].numel();
      }
    }
    // 4. P Q^T where compressed.
    for (std::size_t i = 0; i < p.size(); ++i) {
      const Matrix& mat = plan.matrices[i];
      const auto approx = p[i].matmul(q[i].t()).flatten();
      r.average.narrow(0, mat.offset, approx.numel()).copy_(approx);
      r.sent.narrow(0, mat.offset, approx.numel()).copy_(approx);
    }
    return r;
  }

  Packed pack(const torch::Tensor& grad, std::size_t bucket, std::int64_t, int) override {
    const BucketPlan& plan = plan_of(bucket);
    auto& q = q_[bucket];
    if (q.empty()) q = initial_q(plan, bucket, grad.scalar_type());
    std::vector<torch::Tensor> parts = {grad.index({plan.plain})}, qs;
    for (std::size_t i = 0; i < plan.matrices.size(); ++i) {
      const auto m = matrix(grad, plan.matrices[i]);
      auto p = m.matmul(q[i]);
      orthogonalise(p);
      q[i] = m.t().matmul(p);
      parts.push_back(p.flatten());
      qs.push_back(q[i].flatten());
    }
    parts.insert(parts.end(), qs.begin(), qs.end());
    const auto values = torch::cat(parts);
    return {values.view(torch::kUInt8), unpack_values(values, plan, grad.numel())};
  }

  torch::Tensor unpack(const torch::Tensor& bytes, std::size_t bucket,
                       std::int64_t elements) override {
    DML_CHECK(bytes.numel() == static_cast<std::int64_t>(packed_bytes(bucket, elements)),
              "powersgd bucket ", bucket, ": ", bytes.numel(), " bytes, expected ",
              packed_bytes(bucket, elements));
    return unpack_values(bytes.view(dtype_), plan_of(bucket), elements);
  }

  std::size_t packed_bytes(std::size_t bucket, std::int64_t) override {
    const BucketPlan& plan = plan_of(bucket);
    std::int64_t values = plan.plain.numel();
    for (const Matrix& mat : plan.matrices) values += (mat.rows + mat.cols) * mat.rank;
    return static_cast<std::size_t>(values) * c10::elementSize(dtype_);
  }

  // 1.'s all-reduce of the plain elements and every P, then 3.'s of every Q (none without
  // matrices).
  std::vector<WireStep> wire(std::size_t bucket, std::int64_t) override {
    const BucketPlan& plan = plan_of(bucket);
    std::int64_t first = plan.plain.numel(), second = 0;
    for (const Matrix& mat : plan.matrices) {
      first += mat.rows * mat.rank;
      second += mat.cols * mat.rank;
    }
    const auto size = static_cast<std::int64_t>(c10::elementSize(dtype_));
    std::vector<WireStep> steps = {{false, static_cast<std::size_t>(first * size)}};
    if (second > 0) steps.push_back({false, static_cast<std::size_t>(second * size)});
    return steps;
  }

  std::string save_state() const override {
    torch::serialize::OutputArchive archive;
    for (std::size_t b = 0; b < q_.size(); ++b)
      for (std::size_t i = 0; i < q_[b].size(); ++i) archive.write(cat("q", b, "_", i), q_[b][i]);
    return archive_bytes(archive);
  }

  void load_state(const std::string& state) override {
    if (state.empty()) return;
    torch::serialize::InputArchive archive;
    read_archive(archive, state);
    for (std::size_t b = 0; b < q_.size(); ++b) {
      q_[b].assign(plans_[b].matrices.size(), torch::Tensor());
      for (std::size_t i = 0; i < q_[b].size(); ++i)
        if (!archive.try_read(cat("q", b, "_", i), q_[b][i])) {
          q_[b].clear();  // not saved yet (no step had run): drawn again at first use
          break;
        }
    }
  }

 private:
  const BucketPlan& plan_of(std::size_t bucket) const {
    DML_CHECK(bucket < plans_.size(), "powersgd: bucket ", bucket, " of ", plans_.size());
    return plans_[bucket];
  }

  static torch::Tensor matrix(const torch::Tensor& flat, const Matrix& mat) {
    return flat.narrow(0, mat.offset, mat.rows * mat.cols).view({mat.rows, mat.cols});
  }

  // pack()'s values (plain elements, every P, every Q) to the flat gradient they approximate.
  static torch::Tensor unpack_values(const torch::Tensor& values, const BucketPlan& plan,
                                     std::int64_t elements) {
    const std::int64_t plain = plan.plain.numel();
    auto out = torch::zeros({elements}, values.options())
                   .index_put_({plan.plain}, values.narrow(0, 0, plain));
    std::int64_t p_at = plain, q_at = plain;
    for (const Matrix& mat : plan.matrices) q_at += mat.rows * mat.rank;
    for (const Matrix& mat : plan.matrices) {
      const auto p = values.narrow(0, p_at, mat.rows * mat.rank).view({mat.rows, mat.rank});
      const auto q = values.narrow(0, q_at, mat.cols * mat.rank).view({mat.cols, mat.rank});
      matrix(out, mat).copy_(p.matmul(q.t()));
      p_at += p.numel();
      q_at += q.numel();
    }
    return out;
  }

  static torch::Tensor average(torch::Tensor t, comm::Communicator& comm, std::size_t& bytes) {
    t = t.contiguous();
    comm.allreduce(buffer_of(t), {.op = comm::ReduceOp::avg});
    bytes += t.numel() * t.element_size();
    return t;
  }

  // Uniform in [-1, 1) from a stream of (seed, bucket): the same on every rank and platform,
  // drawn in float32 (so that float64 training starts from the same Q) and given `dtype`.
  std::vector<torch::Tensor> initial_q(const BucketPlan& plan, std::size_t bucket,
                                       torch::ScalarType dtype) const {
    std::vector<torch::Tensor> q;
    data::SplitMix64 rng(data::derive_seed(seed_, bucket, 0x706f776572));
    for (const Matrix& mat : plan.matrices) {
      torch::Tensor t = torch::empty({mat.cols, mat.rank}, torch::kFloat32);
      float* v = t.data_ptr<float>();
      for (std::int64_t i = 0; i < t.numel(); ++i) v[i] = static_cast<float>(rng.uniform(-1, 1));
      q.push_back(t.to(dtype));
    }
    return q;
  }

  std::uint64_t seed_;
  torch::ScalarType dtype_;  // the gradients'
  std::vector<BucketPlan> plans_;
  std::vector<std::vector<torch::Tensor>> q_;  // per bucket, per compressed matrix
};

}  // namespace

std::unique_ptr<Compressor> make_power_sgd(std::uint64_t seed, std::int64_t rank,
                                           const std::vector<BucketLayout>& buckets) {
  return std::make_unique<PowerSgd>(seed, rank, buckets);
}

}  // namespace distml::train::compress
