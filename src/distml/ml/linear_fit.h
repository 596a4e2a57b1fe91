// What a fitted linear classifier is, whatever loss it was fitted with (logistic regression,
// linear SVM): one weight vector and intercept per output, and how the fit went.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "distml/ml/local_data.h"

namespace distml::ml {

struct LinearFit {
  std::int64_t num_classes = 0;  // 0 before fit
  std::size_t features = 0;
  std::vector<double> coef;       // outputs x features
  std::vector<double> intercept;  // one per output: 1 for two classes, else num_classes
  std::vector<std::string> class_names;
  double objective = 0;  // the estimator's own objective at coef
  int n_iter = 0;
  bool converged = false;

  std::size_t outputs() const { return intercept.size(); }
  /// Local. rows x outputs() scores x . coef + intercept; DataError naming `who` when the
  /// data has another number of features.
  std::vector<double> decision(const LocalData& data, std::string_view who) const;
  /// Local. Class ids from the scores: the sign for one output, the largest otherwise.
  std::vector<std::int64_t> predict(const LocalData& data, std::string_view who) const;
  /// The fields above into a model file's JSON object.
  void write(nlohmann::json& j) const;
  /// Reads what write() wrote; DataError naming `who` when a field is missing or the sizes do
  /// not fit together.
  static LinearFit read(const nlohmann::json& j, std::string_view who);
};

}  // namespace distml::ml
