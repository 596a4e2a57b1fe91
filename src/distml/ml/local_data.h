// One rank's rows of a data set for the classical estimators: each rank holds only its own
// shard, and estimators combine shards with collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace distml::ml {

/// Rows in compressed sparse row form (libsvm files): row i's stored entries are positions
/// [row_start[i], row_start[i + 1]) of `columns` (0-based, increasing within a row) and
/// `values`. An entry not stored is 0.
struct SparseRows {
  std::vector<std::size_t> row_start{0};
  std::vector<std::uint32_t> columns;
  std::vector<double> values;
};

/// This rank's rows, as row-major float64 features `x` or as `sparse` rows (then x is empty),
/// and class ids (or regression targets as `targets` when the labels are real numbers), plus
/// what every rank agrees on.
struct LocalData {
  std::size_t rows = 0;      // rows on this rank (may be 0 when there are more ranks than rows)
  std::size_t features = 0;  // the same on every rank
  std::vector<double> x;     // rows * features, when not sparse
  std::optional<SparseRows> sparse;
  std::vector<std::int64_t> y;  // class id per row (classification); empty for unlabelled data
  std::vector<double> targets;  // real-valued label per row (regression); empty otherwise

  // Agreed across ranks (collectively):
  std::size_t global_rows = 0;             // sum of rows over ranks
  std::int64_t num_classes = 0;            // classes over all shards
  std::vector<std::string> class_names;    // class id i is class_names[i] (CSV, libsvm); empty:
                                           // ids are the labels (IDX)
  std::vector<std::string> feature_names;  // from a CSV header; empty otherwise
  std::string label_name;                  // the CSV label column's name; empty otherwise
  int libsvm_index_base = -1;              // a libsvm file's first feature index (0 or 1)

  /// Row i of dense data.
  const double* row(std::size_t i) const { return x.data() + i * features; }

  /// Calls fn(column, value) for row i's entries in increasing column order: every feature of
  /// a dense row, the stored ones of a sparse row. Loops written with it give bit-identical
  /// sums on both forms (a skipped entry adds an exact zero).
  template <class Fn>
  void for_each_entry(std::size_t i, Fn&& fn) const {
    if (sparse) {
      for (std::size_t p = sparse->row_start[i]; p < sparse->row_start[i + 1]; ++p)
        fn(static_cast<std::size_t>(sparse->columns[p]), sparse->values[p]);
    } else {
      const double* r = row(i);
      for (std::size_t j = 0; j < features; ++j) fn(j, r[j]);
    }
  }
  /// sum_j x[i][j] * w[j].
  double dot(std::size_t i, const double* w) const {
    double s = 0;
    for_each_entry(i, [&](std::size_t j, double v) { s += w[j] * v; });
    return s;
  }
  /// out[j] += a * x[i][j].
  void add_scaled(std::size_t i, double a, double* out) const {
    for_each_entry(i, [&](std::size_t j, double v) { out[j] += a * v; });
  }
  /// Row i as `features` dense values: a pointer into x, or into `scratch` filled from the
  /// sparse row, its absent entries `absent` (0, or NaN where they stand for missing values).
  const double* dense_row(std::size_t i, std::vector<double>& scratch, double absent = 0) const {
    if (!sparse) return row(i);
    scratch.assign(features, absent);
    for_each_entry(i, [&](std::size_t j, double v) { scratch[j] = v; });
    return scratch.data();
  }
  /// Stored entries: rows * features when dense.
  std::size_t stored() const { return sparse ? sparse->values.size() : x.size(); }
};

/// No rows, with `d`'s columns, classes, names and form (sparse or dense).
LocalData empty_like(const LocalData& d);
/// Appends row i of `from` (its features, and its class id or target if it has one) to `to`,
/// which is empty_like(from) or grown from one.
void append_row(LocalData& to, const LocalData& from, std::size_t i);

/// What is wrong with the sizes of `d`'s features (empty when nothing): x or sparse must hold
/// exactly `rows` rows of `features` columns. `who` starts the message.
std::string shape_problem(const LocalData& d, std::string_view who);

/// `d` with dense rows (a copy of the same when it is dense already). DataError naming `who`
/// when the dense rows would take more than half of this machine's memory.
LocalData densified(LocalData d, std::string_view who);

}  // namespace distml::ml
