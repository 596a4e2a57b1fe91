// Per-dimension running mean and variance of a stream of rows, kept in float64 and mergeable:
// the statistics of two parts of a stream combine into those of the whole (Chan, Golub and
// LeVeque 1979), so actors and ranks can each count their own rows and merge them later, and the
// result does not depend on how the stream was cut (up to float64 rounding).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace distml::rl {

class RunningMeanStd {
 public:
  /// Statistics of rows of `width` values; none counted yet.
  explicit RunningMeanStd(std::size_t width = 0);

  std::size_t width() const { return mean_.size(); }
  double count() const { return count_; }
  const std::vector<double>& mean() const { return mean_; }
  /// The population variance per dimension (sum of squared deviations / count); 1 while
  /// nothing is counted, so that normalising with no data changes nothing.
  std::vector<double> variance() const;

  /// Counts whole rows (`rows.size()` a multiple of width()): the batch's own mean and squared
  /// deviations, two-pass, merged in.
  void add(std::span<const float> rows);
  /// Adds the statistics of another part of the stream (same width).
  void merge(const RunningMeanStd& other);
  void clear();

  /// [count, mean..., M2...]: what travels between ranks and goes into checkpoints.
  std::vector<double> pack() const;
  /// Reads pack()'s form; Error when `packed` is not 1 + 2 x width values or its count or M2
  /// is negative.
  static RunningMeanStd unpack(std::span<const double> packed, std::size_t width);
  static std::size_t packed_size(std::size_t width) { return 1 + 2 * width; }

 private:
  double count_ = 0;
  std::vector<double> mean_, m2_;  // M2: the sum of squared deviations from the mean
};

}  // namespace distml::rl
