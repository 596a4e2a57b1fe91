#include "distml/ml/estimator.h"

#include "distml/core/error.h"
#include "distml/ml/gaussian_mixture.h"
#include "distml/ml/gbdt.h"
#include "distml/ml/kmeans.h"
#include "distml/ml/linear_svc.h"
#include "distml/ml/logistic_regression.h"
#include "distml/ml/naive_bayes.h"
#include "distml/ml/random_forest.h"

namespace distml::ml {
namespace {

// What an estimator can do beyond the interface's common part.
struct Traits {
  bool supervised = true;  // fit needs labels
  bool sparse = false;     // fit and predict take sparse rows
  bool missing = false;    // fit and predict take missing values (NaN)
};

// Wraps an estimator class with options of type Options and a set_option(Options&, key, value).
template <class Model, class Options>
class Adapter final : public Estimator {
 public:
  Adapter(std::string name, Traits traits) : name_(std::move(name)), traits_(traits) {}
  Adapter(std::string name, Traits traits, Model model)
      : name_(std::move(name)), traits_(traits), model_(std::move(model)) {}

  void set(const std::string& key, const std::string& value) override {
    set_option(options_, key, value);
    model_ = Model(options_);
  }
  void fit(const LocalData& data, comm::Communicator& comm) override { model_.fit(data, comm); }
  std::vector<std::int64_t> predict(const LocalData& data) const override {
    return model_.predict(data);
  }
  bool regression() const override {
    if constexpr (requires { model_.loss(); })
      return model_.loss() == "squared_error";
    else
      return false;
  }
  std::vector<double> predict_values(const LocalData& data) const override {
    if constexpr (requires { model_.predict_values(data); })
      if (regression()) return model_.predict_values(data);
    throw UsageError(cat(name_, ": predicted values need a regression model"));
  }
  bool gives_probabilities() const override {
    return requires(const LocalData& d) { model_.predict_proba(d); }
    &&!regression();
  }
  std::vector<double> predict_proba(const LocalData& data) const override {
    if constexpr (requires { model_.predict_proba(data); })
      if (gives_probabilities()) return model_.predict_proba(data);
    throw UsageError(cat(name_,
                         ": gives no class probabilities (logistic_regression, the naive "
                         "Bayes, gbdt and random_forest classifiers do)"));
  }
  double score(const LocalData& data, comm::Communicator& comm) const override {
    return model_.score(data, comm);
  }
  const std::string& name() const override { return name_; }
  bool supervised() const override { return traits_.supervised; }
  bool takes_sparse() const override { return traits_.sparse; }
  bool takes_missing() const override { return traits_.missing; }
  int iterations() const override {
    if constexpr (requires { model_.iterations(); })
      return model_.iterations();
    else if constexpr (requires { model_.n_iter(); })
      return model_.n_iter();
    else
      return 1;  // one pass of sufficient statistics
  }
  nlohmann::json to_json() const override { return model_.to_json(); }

 private:
  std::string name_;
  Traits traits_;
  Options options_;
  Model model_{options_};
};

struct Entry {
  std::string name;   // everywhere: command line, model files' "estimator", done lines
  std::string alias;  // a shorter name the command line takes too (empty: none)
  std::function<std::unique_ptr<Estimator>()> make;
  std::function<std::unique_ptr<Estimator>(const nlohmann::json&)> load;
};

template <class Model, class Options>
Entry entry(const std::string& name, const std::string& alias, Traits traits) {
  return {name, alias, [=] { return std::make_unique<Adapter<Model, Options>>(name, traits); },
          [=](const nlohmann::json& j) {
            return std::make_unique<Adapter<Model, Options>>(name, traits, Model::from_json(j));
          }};
}

const std::vector<Entry>& registry() {
  static const std::vector<Entry> entries = {
      entry<KMeans, KMeansOptions>("kmeans", "", {.supervised = false}),
      entry<LogisticRegression, LogisticRegressionOptions>("logistic_regression", "logreg",
                                                           {.sparse = true}),
      entry<LinearSVC, LinearSVCOptions>("linear_svc", "svm", {.sparse = true}),
      entry<GaussianNB, GaussianNBOptions>("gaussian_nb", "nb", {}),
      entry<MultinomialNB, MultinomialNBOptions>("multinomial_nb", "", {.sparse = true}),
      entry<GBDT, GBDTOptions>("gbdt", "", {.sparse = true, .missing = true}),
      entry<RandomForest, RandomForestOptions>("random_forest", "rf",
                                               {.sparse = true, .missing = true}),
      entry<GaussianMixture, GaussianMixtureOptions>("gaussian_mixture", "gmm",
                                                     {.supervised = false}),
  };
  return entries;
}

// A model file names its estimator by its name; the command line may use the alias.
const Entry& find(const std::string& name, bool from_file) {
  for (const auto& e : registry())
    if (e.name == name || (!from_file && !e.alias.empty() && e.alias == name)) return e;
  const std::string what = cat("unknown estimator '", name, "' (valid: ", estimator_list(), ")");
  if (from_file) throw DataError(what);
  throw ConfigError(what);
}

}  // namespace

std::string estimator_list() {
  std::string list;
  for (const auto& e : registry())
    list += cat(list.empty() ? "" : ", ", e.name, e.alias.empty() ? "" : cat(" (", e.alias, ")"));
  return list;
}

const std::vector<std::string>& estimator_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& e : registry()) out.push_back(e.name);
    return out;
  }();
  return names;
}

std::unique_ptr<Estimator> make_estimator(const std::string& name) {
  return find(name, false).make();
}

std::unique_ptr<Estimator> estimator_from_json(const nlohmann::json& model) {
  return find(model.at("estimator").get<std::string>(), true).load(model);
}

}  // namespace distml::ml
