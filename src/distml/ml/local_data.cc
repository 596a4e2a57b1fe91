#include "distml/ml/local_data.h"

#include <unistd.h>

#include <limits>

#include "distml/core/error.h"

namespace distml::ml {

LocalData empty_like(const LocalData& d) {
  LocalData e;
  e.features = d.features;
  if (d.sparse) e.sparse.emplace();
  e.num_classes = d.num_classes;
  e.class_names = d.class_names;
  e.feature_names = d.feature_names;
  e.label_name = d.label_name;
  e.libsvm_index_base = d.libsvm_index_base;
  return e;
}

void append_row(LocalData& to, const LocalData& from, std::size_t i) {
  if (from.sparse) {
    const SparseRows& s = *from.sparse;
    const auto b = static_cast<std::ptrdiff_t>(s.row_start[i]),
               e = static_cast<std::ptrdiff_t>(s.row_start[i + 1]);
    to.sparse->columns.insert(to.sparse->columns.end(), s.columns.begin() + b,
                              s.columns.begin() + e);
    to.sparse->values.insert(to.sparse->values.end(), s.values.begin() + b, s.values.begin() + e);
    to.sparse->row_start.push_back(to.sparse->values.size());
  } else {
    to.x.insert(to.x.end(), from.row(i), from.row(i) + from.features);
  }
  if (!from.y.empty()) to.y.push_back(from.y[i]);
  if (!from.targets.empty()) to.targets.push_back(from.targets[i]);
  ++to.rows;
}

std::string shape_problem(const LocalData& d, std::string_view who) {
  if (!d.sparse) {
    if (d.x.size() != d.rows * d.features)
      return cat(who, ": x holds ", d.x.size(), " values for ", d.rows, " rows of ", d.features,
                 " features");
    return {};
  }
  const SparseRows& s = *d.sparse;
  if (!d.x.empty()) return cat(who, ": sparse rows with dense values beside them");
  if (s.row_start.size() != d.rows + 1 || s.row_start.front() != 0 ||
      s.row_start.back() != s.values.size() || s.columns.size() != s.values.size())
    return cat(who, ": sparse rows hold ", s.row_start.size(), " row starts and ", s.columns.size(),
               " columns for ", s.values.size(), " values of ", d.rows, " rows");
  for (std::size_t i = 0; i < d.rows; ++i)
    for (std::size_t p = s.row_start[i]; p < s.row_start[i + 1]; ++p)
      if (s.columns[p] >= d.features || (p > s.row_start[i] && s.columns[p] <= s.columns[p - 1]))
        return cat(who, ": sparse row ", i, " has column ", s.columns[p],
                   " out of increasing order or beyond the ", d.features, " features");
  return {};
}

LocalData densified(LocalData d, std::string_view who) {
  if (!d.sparse) return d;
  const double pages = static_cast<double>(sysconf(_SC_PHYS_PAGES));
  const double memory = pages * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  const double bytes = 8.0 * static_cast<double>(d.rows) * static_cast<double>(d.features);
  if (bytes > 0.5 * memory)
    throw DataError(cat(who, " needs dense rows, and this rank's ", d.rows, " x ", d.features,
                        " float64 values would take ", bytes / 1e9, " GB, more than half of the ",
                        memory / 1e9,
                        " GB of memory; logistic_regression, linear_svc, "
                        "multinomial_nb and gbdt read sparse rows as they are"));
  d.x.assign(d.rows * d.features, 0.0);
  const SparseRows& s = *d.sparse;
  for (std::size_t i = 0; i < d.rows; ++i)
    for (std::size_t p = s.row_start[i]; p < s.row_start[i + 1]; ++p)
      d.x[i * d.features + s.columns[p]] = s.values[p];
  d.sparse.reset();
  return d;
}

}  // namespace distml::ml
