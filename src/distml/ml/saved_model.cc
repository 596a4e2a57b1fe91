#include "distml/ml/saved_model.h"

#include "distml/core/error.h"
#include "distml/ml/estimator_support.h"
#include "distml/ml/model_file.h"

namespace distml::ml {

SavedModel read_saved_model(const std::string& path) {
  const auto file = load_model_file(path);
  SavedModel m;
  try {
    m.estimator_name = file.at("estimator").get<std::string>();
    m.estimator = estimator_from_json(file);
    const auto& pre = file.at("preprocessing");
    m.features = model_integer<std::size_t>(pre, "features", "preprocessing");
    m.class_names = pre.at("class_names").get<std::vector<std::string>>();
    m.feature_names = pre.value("feature_names", std::vector<std::string>{});
    if (pre.contains("label") && pre["label"].is_string()) m.label = pre["label"];
    m.libsvm_index_base = pre.value("libsvm_index_base", 1);
    if (pre.contains("imputer")) m.imputer = Imputer::from_json(pre["imputer"]);
    if (pre.contains("standardizer")) m.standardizer = Standardizer::from_json(pre["standardizer"]);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(cat(path, ": a model file needs \"estimator\" and \"preprocessing\" with ",
                        "\"features\" and \"class_names\": ", e.what()));
  } catch (const DataError& e) {
    throw DataError(cat(path, ": ", e.what()));
  } catch (const ConfigError& e) {  // an estimator's options, as its fit would check them
    throw DataError(cat(path, ": ", e.what()));
  }
  const auto fits = [&](std::size_t n) { return n == m.features; };
  if (!m.feature_names.empty() && !fits(m.feature_names.size()))
    throw DataError(
        cat(path, ": ", m.feature_names.size(), " feature names for ", m.features, " features"));
  if ((m.imputer && !fits(m.imputer->values.size())) ||
      (m.standardizer && !fits(m.standardizer->mean.size())))
    throw DataError(cat(path,
                        ": its imputer or standardizer is for another number of features "
                        "than its ",
                        m.features));
  return m;
}

}  // namespace distml::ml
