#include "distml/ml/model_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "distml/core/atomic_file.h"
#include "distml/core/error.h"

namespace distml::ml {

void save_model_file(const std::string& path, const nlohmann::json& model) {
  DML_CHECK(model.contains("estimator"), "a model file needs an \"estimator\" field");
  write_file_atomically(path, {model.dump(1), "\n"});
}

nlohmann::json load_model_file(const std::string& path, const std::string& estimator) {
  std::ifstream in(path);
  if (!in) throw DataError(cat(path, ": cannot open the model file: ", std::strerror(errno)));
  auto model = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (model.is_discarded() || !model.is_object() || !model.contains("estimator"))
    throw DataError(cat(path, ": not a distml model file (JSON with an \"estimator\" field)"));
  if (!estimator.empty() && model["estimator"] != estimator)
    throw DataError(cat(path, ": holds a ", model["estimator"].dump(), " model, not ", estimator));
  return model;
}

}  // namespace distml::ml
