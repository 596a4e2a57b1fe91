// A model file as distml predict reads it (written by distml fit --model-out): the estimator,
// and what its fit recorded about the data (the features, the classes' names, the columns'
// names, the imputer and the standardizer it applied).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "distml/ml/estimator.h"
#include "distml/ml/imputer.h"
#include "distml/ml/preprocessing.h"

namespace distml::ml {

struct SavedModel {
  std::string estimator_name;
  std::unique_ptr<Estimator> estimator;
  std::size_t features = 0;
  std::vector<std::string> class_names;    // class id i is class_names[i]; empty: the ids
  std::vector<std::string> feature_names;  // a CSV's columns, by which predict finds them
  std::string label;                       // a CSV's label column; empty otherwise
  int libsvm_index_base = 1;
  std::optional<Imputer> imputer;
  std::optional<Standardizer> standardizer;
};

/// Reads a model file; DataError naming `path` and what is missing or does not fit: the
/// estimator's own fields, or the "preprocessing" object ("features", "class_names", ...,
/// an imputer or standardizer of another number of features).
SavedModel read_saved_model(const std::string& path);

}  // namespace distml::ml
