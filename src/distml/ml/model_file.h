// Fitted estimators saved as JSON: {"estimator": NAME, "version": 1, ...its fields}.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace distml::ml {

/// Writes `model` (which must have an "estimator" field) to `path` atomically
/// (write_file_atomically); CheckpointError naming the path when it cannot be written.
void save_model_file(const std::string& path, const nlohmann::json& model);

/// Reads a model file. DataError naming the path when it is missing, not JSON, or has no
/// "estimator"; when `estimator` is not empty, also when the file holds another estimator.
nlohmann::json load_model_file(const std::string& path, const std::string& estimator = "");

}  // namespace distml::ml
