#include "distml/ml/linear_fit.h"

#include "distml/core/error.h"
#include "distml/ml/estimator_support.h"

namespace distml::ml {

std::vector<double> LinearFit::decision(const LocalData& data, std::string_view who) const {
  check_feature_count(data, features, who);
  return linear_decision(data, coef, intercept, outputs());
}

std::vector<std::int64_t> LinearFit::predict(const LocalData& data, std::string_view who) const {
  const auto z = decision(data, who);
  std::vector<std::int64_t> out(data.rows);
  const std::size_t k = outputs();
  for (std::size_t i = 0; i < data.rows; ++i)
    out[i] = k == 1 ? (z[i] > 0 ? 1 : 0) : argmax(z.data() + i * k, k);
  return out;
}

void LinearFit::write(nlohmann::json& j) const {
  j["num_classes"] = num_classes;
  j["features"] = features;
  j["coef"] = coef;
  j["intercept"] = intercept;
  j["class_names"] = class_names;
  j["objective"] = objective;
  j["n_iter"] = n_iter;
  j["converged"] = converged;
}

LinearFit LinearFit::read(const nlohmann::json& j, std::string_view who) {
  LinearFit f;
  f.num_classes = model_integer<std::int64_t>(j, "num_classes", who);
  f.features = model_integer<std::size_t>(j, "features", who);
  f.coef = model_field(j, "coef", who).get<std::vector<double>>();
  f.intercept = model_field(j, "intercept", who).get<std::vector<double>>();
  f.class_names = model_field(j, "class_names", who).get<std::vector<std::string>>();
  f.objective = model_field(j, "objective", who).get<double>();
  f.n_iter = model_integer<int>(j, "n_iter", who);
  f.converged = model_field(j, "converged", who).get<bool>();
  const std::size_t outputs = f.num_classes == 2 ? 1 : static_cast<std::size_t>(f.num_classes);
  if (f.num_classes < 2 || f.intercept.size() != outputs || f.coef.size() != outputs * f.features)
    throw DataError(cat(who, " model: coef and intercept do not match num_classes ", f.num_classes,
                        " and features ", f.features));
  return f;
}

}  // namespace distml::ml
