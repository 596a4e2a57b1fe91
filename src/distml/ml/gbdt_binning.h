// The bins of histogram GBDT: per-feature edges from a distributed quantile sketch, and the
// mapping of rows to bin ids. Every rank computes the same edges from the same gathered
// summaries.
//
// Sketch: each rank sorts each of its columns and sends either all its distinct values with
// their counts (when there are at most 4 * max_bins of them) or 4 * max_bins evenly spaced
// points of the sorted column, each weighted by the rows it stands for. The merged summary is
// exact when every rank sent its distinct values; then a feature with at most max_bins distinct
// values gets one bin per value (edges at the midpoints, as scikit-learn), and the edges are the
// same for every world size. Otherwise the edges are the weighted quantiles of the merged
// summary at i / max_bins; they are then only approximately, not exactly, the same across
// world sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/ml/local_data.h"

namespace distml::ml {

/// What an entry that a sparse row does not store stands for.
enum class AbsentEntries {
  zero,     // the value 0, as scikit-learn reads a sparse matrix (random forests)
  missing,  // a missing value, as XGBoost reads a LibSVM file (gbdt, so that its export agrees)
};

/// Value x of feature f is in bin b = the number of edges(f) below x, so that
/// x <= edges(f)[b] exactly when bin(f, x) <= b: a split on bin b is the threshold edges(f)[b].
/// A missing value (NaN) is in a bin of its own after those, missing_bin(f) = bins(f).
class FeatureBins {
 public:
  /// Collective. At most max_bins (<= 255) bins per feature from every rank's rows of `data`,
  /// whose values must be finite or NaN (missing); the edges come from the present values.
  /// `absent` says what sparse rows' absent entries are, here and in bin_rows.
  static FeatureBins fit(const LocalData& data, int max_bins, comm::Communicator& comm,
                         AbsentEntries absent = AbsentEntries::zero);

  std::size_t features() const { return edges_.size(); }
  /// Bins of feature f's present values (one for a constant feature).
  int bins(std::size_t f) const { return static_cast<int>(edges_[f].size()) + 1; }
  std::uint8_t missing_bin(std::size_t f) const { return static_cast<std::uint8_t>(bins(f)); }
  /// Whether any rank's rows miss feature f.
  bool has_missing(std::size_t f) const { return has_missing_[f]; }
  const std::vector<double>& edges(std::size_t f) const { return edges_[f]; }
  std::uint8_t bin(std::size_t f, double x) const;
  /// rows x features bin ids of `data`, row-major.
  std::vector<std::uint8_t> bin_rows(const LocalData& data) const;

 private:
  std::vector<std::vector<double>> edges_;
  std::vector<bool> has_missing_;
  AbsentEntries absent_ = AbsentEntries::zero;
};

}  // namespace distml::ml
