#include "distml/ml/gbdt_binning.h"

#include <algorithm>
#include <cmath>

#include "distml/comm/block_range.h"
#include "distml/core/error.h"

namespace distml::ml {
namespace {

struct WeightedValue {
  double value, weight;
};

// This rank's summary of one sorted column: its distinct values with counts when there are at
// most `capacity`, else `capacity` points each standing for a block of the sorted values.
// Returns whether the summary is exact.
bool summarize(const std::vector<double>& sorted, std::size_t capacity,
               std::vector<WeightedValue>& out) {
  out.clear();
  for (std::size_t i = 0; i < sorted.size() && out.size() <= capacity; ++i) {
    if (!out.empty() && out.back().value == sorted[i])
      out.back().weight += 1;
    else
      out.push_back({sorted[i], 1});
  }
  if (out.size() <= capacity) return true;
  out.clear();
  for (int k = 0; k < static_cast<int>(capacity); ++k) {
    const auto b = comm::block_range(sorted.size(), static_cast<int>(capacity), k);
    out.push_back({sorted[b.begin + b.size() / 2], static_cast<double>(b.size())});
  }
  return false;
}

// Edges of one feature from the merged summary (sorted, distinct values).
std::vector<double> edges_from(const std::vector<WeightedValue>& merged, bool exact, int max_bins) {
  std::vector<double> edges;
  const auto midpoint = [&](std::size_t j) {
    return merged[j].value + (merged[j + 1].value - merged[j].value) / 2;
  };
  if (exact && merged.size() <= static_cast<std::size_t>(max_bins)) {
    for (std::size_t j = 0; j + 1 < merged.size(); ++j) edges.push_back(midpoint(j));
    return edges;
  }
  double total = 0;
  for (const auto& p : merged) total += p.weight;
  double cumulative = 0;
  std::size_t j = 0;
  for (int i = 1; i < max_bins; ++i) {
    const double target = total * i / max_bins;
    while (j < merged.size() && cumulative + merged[j].weight < target)
      cumulative += merged[j++].weight;
    if (j + 1 >= merged.size()) break;
    const double edge = midpoint(j);
    if (edges.empty() || edge > edges.back()) edges.push_back(edge);
  }
  return edges;
}

}  // namespace

FeatureBins FeatureBins::fit(const LocalData& data, int max_bins, comm::Communicator& comm,
                             AbsentEntries absent) {
  DML_CHECK(max_bins >= 2 && max_bins <= 256, "max_bins in [2, 256]");
  const std::size_t capacity = 4 * static_cast<std::size_t>(max_bins);
  const std::size_t f_count = data.features;

  // Sparse rows' stored values by feature that are not NaN, and how many entries each feature
  // stores (the rest of its column is absent: zeros or missing values).
  std::vector<std::vector<double>> stored;
  std::vector<std::size_t> entries;
  if (data.sparse) {
    stored.resize(f_count);
    entries.assign(f_count, 0);
    for (std::size_t p = 0; p < data.sparse->values.size(); ++p) {
      const std::uint32_t f = data.sparse->columns[p];
      ++entries[f];
      if (const double v = data.sparse->values[p]; !std::isnan(v)) stored[f].push_back(v);
    }
  }
  // Payload per feature: [points, exact, missing, value, weight, value, weight, ...].
  std::vector<double> mine;
  std::vector<double> column(data.rows);
  std::vector<WeightedValue> summary;
  for (std::size_t f = 0; f < f_count; ++f) {
    if (data.sparse) {
      column.assign(stored[f].begin(), stored[f].end());
      if (absent == AbsentEntries::zero) column.resize(column.size() + data.rows - entries[f], 0.0);
      std::vector<double>().swap(stored[f]);
    } else {
      column.clear();
      for (std::size_t i = 0; i < data.rows; ++i)
        if (const double v = data.x[i * f_count + f]; !std::isnan(v)) column.push_back(v);
    }
    std::sort(column.begin(), column.end());
    const bool exact = summarize(column, capacity, summary);
    mine.push_back(static_cast<double>(summary.size()));
    mine.push_back(exact ? 1 : 0);
    mine.push_back(static_cast<double>(data.rows - column.size()));
    for (const auto& p : summary) {
      mine.push_back(p.value);
      mine.push_back(p.weight);
    }
  }
  std::int64_t length = static_cast<std::int64_t>(mine.size());
  std::vector<std::int64_t> lengths(comm.size());
  comm.allgather(comm::ConstBuffer{&length, 1, comm::DType::i64}, comm::view(lengths));
  std::vector<std::size_t> counts(lengths.begin(), lengths.end());
  std::size_t total = 0;
  for (auto c : counts) total += c;
  std::vector<double> all(total);
  comm.allgatherv(comm::cview(mine), comm::view(all), counts);

  // Walk every rank's payload feature by feature; rank order does not matter after sorting.
  std::vector<std::size_t> cursor(comm.size());
  for (int r = 1; r < comm.size(); ++r) cursor[r] = cursor[r - 1] + counts[r - 1];
  FeatureBins bins;
  bins.absent_ = absent;
  bins.edges_.resize(f_count);
  bins.has_missing_.assign(f_count, false);
  std::vector<WeightedValue> merged;
  for (std::size_t f = 0; f < f_count; ++f) {
    merged.clear();
    bool exact = true;
    for (int r = 0; r < comm.size(); ++r) {
      std::size_t& c = cursor[r];
      const auto points = static_cast<std::size_t>(all[c]);
      exact = exact && all[c + 1] == 1;
      if (all[c + 2] > 0) bins.has_missing_[f] = true;
      for (std::size_t p = 0; p < points; ++p)
        merged.push_back({all[c + 3 + 2 * p], all[c + 4 + 2 * p]});
      c += 3 + 2 * points;
    }
    std::sort(merged.begin(), merged.end(),
              [](const WeightedValue& a, const WeightedValue& b) { return a.value < b.value; });
    std::size_t out = 0;
    for (std::size_t j = 0; j < merged.size(); ++j) {
      if (out > 0 && merged[out - 1].value == merged[j].value)
        merged[out - 1].weight += merged[j].weight;
      else
        merged[out++] = merged[j];
    }
    merged.resize(out);
    bins.edges_[f] = edges_from(merged, exact, max_bins);
  }
  return bins;
}

std::uint8_t FeatureBins::bin(std::size_t f, double x) const {
  if (std::isnan(x)) return missing_bin(f);
  const auto& e = edges_[f];
  return static_cast<std::uint8_t>(std::lower_bound(e.begin(), e.end(), x) - e.begin());
}

std::vector<std::uint8_t> FeatureBins::bin_rows(const LocalData& data) const {
  DML_CHECK_EQ(data.features, features(), "features of the binned rows");
  const std::size_t f_count = data.features;
  std::vector<std::uint8_t> out(data.rows * f_count);
  if (data.sparse) {  // the absent entries' bin everywhere, then the stored entries'
    for (std::size_t f = 0; f < f_count; ++f) {
      const std::uint8_t b = absent_ == AbsentEntries::zero ? bin(f, 0.0) : missing_bin(f);
      for (std::size_t i = 0; i < data.rows; ++i) out[i * f_count + f] = b;
    }
    for (std::size_t i = 0; i < data.rows; ++i)
      data.for_each_entry(i, [&](std::size_t f, double v) { out[i * f_count + f] = bin(f, v); });
    return out;
  }
  for (std::size_t i = 0; i < data.rows; ++i)
    for (std::size_t f = 0; f < f_count; ++f)
      out[i * f_count + f] = bin(f, data.x[i * f_count + f]);
  return out;
}

}  // namespace distml::ml
