#include "distml/rl/running_stats.h"

#include "distml/core/error.h"

namespace distml::rl {

RunningMeanStd::RunningMeanStd(std::size_t width) : mean_(width, 0.0), m2_(width, 0.0) {}

std::vector<double> RunningMeanStd::variance() const {
  std::vector<double> v(width(), 1.0);
  if (count_ > 0)
    for (std::size_t i = 0; i < width(); ++i) v[i] = m2_[i] / count_;
  return v;
}

void RunningMeanStd::add(std::span<const float> rows) {
  const std::size_t w = width();
  DML_CHECK(w > 0 && rows.size() % w == 0, "rows do not fill whole rows of the statistics' width");
  const std::size_t n = rows.size() / w;
  if (n == 0) return;
  RunningMeanStd batch(w);
  batch.count_ = static_cast<double>(n);
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t i = 0; i < w; ++i) batch.mean_[i] += rows[r * w + i];
  for (double& m : batch.mean_) m /= batch.count_;
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t i = 0; i < w; ++i) {
      const double d = rows[r * w + i] - batch.mean_[i];
      batch.m2_[i] += d * d;
    }
  merge(batch);
}

void RunningMeanStd::merge(const RunningMeanStd& other) {
  DML_CHECK_EQ(other.width(), width(), "merged statistics' width");
  if (other.count_ == 0) return;
  if (count_ == 0) {
    *this = other;
    return;
  }
  const double total = count_ + other.count_;
  for (std::size_t i = 0; i < width(); ++i) {
    const double delta = other.mean_[i] - mean_[i];
    mean_[i] += delta * other.count_ / total;
    m2_[i] += other.m2_[i] + delta * delta * count_ * other.count_ / total;
  }
  count_ = total;
}

void RunningMeanStd::clear() { *this = RunningMeanStd(width()); }

std::vector<double> RunningMeanStd::pack() const {
  std::vector<double> out{count_};
  out.insert(out.end(), mean_.begin(), mean_.end());
  out.insert(out.end(), m2_.begin(), m2_.end());
  return out;
}

RunningMeanStd RunningMeanStd::unpack(std::span<const double> packed, std::size_t width) {
  if (packed.size() != packed_size(width))
    throw Error(cat("running statistics of ", packed.size(), " values, expected ",
                    packed_size(width), " (1 + 2 x width ", width, ")"));
  RunningMeanStd s(width);
  s.count_ = packed[0];
  if (!(s.count_ >= 0)) throw Error(cat("running statistics with count ", s.count_));
  for (std::size_t i = 0; i < width; ++i) {
    s.mean_[i] = packed[1 + i];
    s.m2_[i] = packed[1 + width + i];
    if (!(s.m2_[i] >= 0)) throw Error(cat("running statistics with M2 ", s.m2_[i], " < 0"));
  }
  return s;
}

}  // namespace distml::rl
