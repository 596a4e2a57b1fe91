// Fuzzes a model file as distml predict reads it (ml/saved_model.cc over ml/model_file.cc and
// each estimator's from_json), then predicts three rows of the features it declares with it,
// after its imputer and standardizer: a model that reads must predict one class id or value
// per row, and probabilities in whole rows. Anything else is refused with a DataError (or a
// UsageError, for probabilities the estimator does not give).
#include <cstdint>
#include <cstdlib>

#include "distml/core/error.h"
#include "distml/ml/saved_model.h"
#include "fuzz_file.h"

namespace ml = distml::ml;

namespace {

// Three rows of `features` values, a missing one among them.
ml::LocalData rows_of(const ml::SavedModel& m) {
  ml::LocalData d;
  d.rows = d.global_rows = 3;
  d.features = m.features;
  for (std::size_t i = 0; i < d.rows * d.features; ++i)
    d.x.push_back(i == 1 ? std::nan("") : static_cast<double>(i % 7) - 2.5);
  d.class_names = m.class_names;
  d.num_classes = static_cast<std::int64_t>(m.class_names.size());
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static distml::fuzz::FuzzFile file;
  ml::SavedModel m;
  try {
    m = ml::read_saved_model(file.write(data, size));
  } catch (const distml::DataError&) {
    return 0;
  }
  if (m.features > 4096) return 0;  // rows that large take long to fill, and are no finding
  auto rows = rows_of(m);
  try {
    if (m.imputer) m.imputer->apply(rows);
    if (m.standardizer) m.standardizer->apply(rows);
    const auto& e = *m.estimator;
    if (e.regression() ? e.predict_values(rows).size() != rows.rows
                       : e.predict(rows).size() != rows.rows)
      std::abort();
    if (e.gives_probabilities() && e.predict_proba(rows).size() % rows.rows != 0) std::abort();
  } catch (const distml::DataError&) {
  } catch (const distml::UsageError&) {
  }
  return 0;
}
