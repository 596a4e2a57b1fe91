#include "fit.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "distml/core/atomic_file.h"
#include "distml/core/clock.h"
#include "distml/core/parse.h"
#include "distml/core/peak_rss.h"
#include "distml/ml/estimator.h"
#include "distml/ml/gbdt_xgboost.h"
#include "distml/ml/imputer.h"
#include "distml/ml/model_file.h"
#include "distml/ml/preprocessing.h"
#include "ml_job.h"
#include "run_dir.h"

namespace distml::cli {
namespace {

using ml::LocalData;

struct FitOptions {
  std::string estimator;
  DataOptions data;
  std::string test_path;
  double test_fraction = 0;
  std::string impute;  // "", mean or median
  bool standardize = false;
  std::uint64_t seed = 0;
  std::vector<std::string> sets;
  std::string model_out;
  std::string xgboost_out;
  bool json = false;
  std::string run_dir;
};

// The named estimator with the --set options applied; UsageError/ConfigError on a bad one.
std::unique_ptr<ml::Estimator> configured_estimator(const FitOptions& o) {
  auto estimator = ml::make_estimator(o.estimator);
  for (const auto& kv : o.sets) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError(cat("--set takes key=value, got '", kv, "'"));
    estimator->set(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return estimator;
}

// A TOML document of the options as resolved: fit reads no config file (--run-dir).
std::string resolved_options(const FitOptions& o, const JobOptions& job, int np) {
  auto q = [](const std::string& text) { return nlohmann::json(text).dump(); };  // a TOML string
  std::string t = "# distml fit: its options as resolved (fit reads no config file)\n[fit]\n";
  t += "estimator = " + q(o.estimator) + "\ndata = " + q(o.data.path) +
       "\nformat = " + q(o.data.format) + "\nlabel = " + q(o.data.label) +
       "\ntest = " + q(o.test_path) +
       "\ntest_fraction = " + nlohmann::json(o.test_fraction).dump() + "\nimpute = " + q(o.impute) +
       "\nstandardize = " + (o.standardize ? "true" : "false") +
       "\nseed = " + std::to_string(o.seed) + "\nnp = " + std::to_string(np) +
       "\nengine = " + q(job.engine) + "\n[estimator]  # --set key=value\n";
  for (const auto& kv : o.sets) {
    const auto eq = kv.find('=');
    t += q(kv.substr(0, eq)) + " = " + q(kv.substr(eq + 1)) + "\n";
  }
  return t;
}

void fit_rank(const FitOptions& o, const JobOptions& job, comm::Communicator& comm,
              RunDir* run_dir) {
  auto estimator = configured_estimator(o);
  // An XGBoost model sees the file's columns as they are: no place for distml's preprocessing.
  if (!o.xgboost_out.empty() && (estimator->name() != "gbdt" || o.standardize || !o.impute.empty()))
    throw UsageError(
        "--xgboost-out: only a gbdt model, fitted without --standardize or --impute, "
        "has an XGBoost form");
  const bool regression = estimator->regression();
  const bool impute = !o.impute.empty();
  // GBDT learns where missing values go; the others need them imputed.
  const bool missing_allowed = impute || estimator->takes_missing();
  if (o.data.label == "none" && estimator->supervised())
    throw UsageError(
        cat("--label none: ", estimator->name(),
            " learns from labels; of the estimators only kmeans and gaussian_mixture fit without"));
  LocalData train =
      read_data(o.data, comm, {.regression = regression, .missing_allowed = missing_allowed});
  std::optional<LocalData> test;
  std::int64_t test_unseen = 0;  // test rows of a class the training rows lack
  if (!o.test_path.empty()) {
    DataOptions t = o.data;
    t.path = o.test_path;
    test = read_data(t, comm,
                     {.features = train.features,
                      .libsvm_index_base = train.libsvm_index_base,
                      .regression = regression,
                      .missing_allowed = missing_allowed});
    test_unseen = align_labels(*test, train.class_names, comm);
    check_features(*test, train.features, o.test_path);
  } else if (o.test_fraction > 0) {
    auto [tr, te] = ml::train_test_split(train, o.test_fraction, o.seed, comm);
    train = std::move(tr);
    test = std::move(te);
  } else if (resolved_format(o.data) == "idx") {
    test = read_idx_split(o.data.path, "t10k", comm);
  }

  // Centring (--standardize) and an estimator that needs dense rows make sparse rows dense.
  if (train.sparse && (o.standardize || impute || !estimator->takes_sparse())) {
    const std::string who = o.standardize ? "--standardize"
                            : impute      ? "--impute"
                                          : estimator->name();
    train = ml::densified(std::move(train), who);
    if (test) test = ml::densified(std::move(*test), who);
  }

  nlohmann::json preprocessing = {
      {"features", train.features},
      {"class_names", train.class_names},
      {"feature_names", train.feature_names},
      {"label",
       train.label_name.empty() ? nlohmann::json(nullptr) : nlohmann::json(train.label_name)}};
  if (train.libsvm_index_base >= 0) preprocessing["libsvm_index_base"] = train.libsvm_index_base;
  if (impute) {  // the training rows' statistic, for the test rows and predictions too
    const auto imputer = ml::fit_imputer(train, o.impute, comm);
    imputer.apply(train);
    if (test) imputer.apply(*test);
    preprocessing["imputer"] = imputer.to_json();
  }
  if (o.standardize) {
    auto scaler = ml::fit_standardizer(train, comm);
    scaler.apply(train);
    if (test) scaler.apply(*test);
    preprocessing["standardizer"] = scaler.to_json();
  }

  comm.barrier();
  const auto start = Clock::now();
  estimator->fit(train, comm);
  const double fit_s = seconds_since(start);
  const double train_score = estimator->score(train, comm);
  std::optional<double> test_score;
  if (test) test_score = estimator->score(*test, comm);

  if (comm.rank() != 0) return;
  if (!o.model_out.empty()) {
    auto model = estimator->to_json();
    model["preprocessing"] = preprocessing;
    ml::save_model_file(o.model_out, model);
  }
  if (!o.xgboost_out.empty())
    write_file_atomically(
        o.xgboost_out,
        {ml::to_xgboost_json(ml::GBDT::from_json(estimator->to_json())).dump(), "\n"});
  nlohmann::json done = {{"event", "done"},
                         {"estimator", estimator->name()},
                         {"rows", train.global_rows},
                         {"features", train.features},
                         {"classes", train.num_classes},
                         {"train_score", train_score},
                         {"test_score", test_score ? nlohmann::json(*test_score) : nullptr},
                         {"test_unseen_class_rows", test_unseen},
                         {"iterations", estimator->iterations()},
                         {"fit_time_s", fit_s},
                         {"peak_rss_mb", peak_rss_mb()},
                         {"np", comm.size()}};
  if (estimator->name() == "kmeans") done["inertia"] = -train_score;
  if (estimator->name() == "gaussian_mixture") done["mean_log_likelihood"] = train_score;
  if (run_dir) {
    run_dir->begin(resolved_options(o, job, comm.size()));
    run_dir->finish(done);
  }
  if (o.json) {
    std::cout << done.dump() << std::endl;
    return;
  }
  std::printf("%s on %zu rows x %zu features: train score %.4f", estimator->name().c_str(),
              train.global_rows, train.features, train_score);
  if (test_score) std::printf(", test score %.4f", *test_score);
  if (test_unseen > 0)
    std::printf(" (%lld test rows of classes not in the training data count as errors)",
                static_cast<long long>(test_unseen));
  std::printf(" (%s, fit %.2f s on %s)\n", counted(estimator->iterations(), "iteration").c_str(),
              fit_s, counted(comm.size(), "rank").c_str());
  if (!o.model_out.empty()) std::printf("model written to %s\n", o.model_out.c_str());
}

}  // namespace

void add_fit_command(CLI::App& app, int argc, char** argv) {
  auto fit = std::make_shared<FitOptions>();
  auto job = std::make_shared<JobOptions>();
  auto* sub = app.add_subcommand(
      "fit",
      "Fit a classical estimator on row-sharded data (each rank reads only its rows); see "
      "docs/classical_ml.md.\nExample: "
      "distml fit logreg --data train.csv --label species --test-fraction 0.2 --np 2 --set C=1");
  sub->add_option("estimator", fit->estimator, "One of: " + ml::estimator_list())->required();
  add_data_options(sub, fit->data);
  auto* test = sub->add_option("--test", fit->test_path, "Test file in the same format");
  sub->add_option("--test-fraction", fit->test_fraction,
                  "Hold out this share of the rows (by seed; independent of --np)")
      ->excludes(test)
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--impute", fit->impute,
                  "Fill missing values (empty, NA, NaN, ?) with the training column's mean or "
                  "median (stored in the model for predict); without it they are errors")
      ->check(CLI::IsMember({"mean", "median"}));
  sub->add_flag("--standardize", fit->standardize,
                "Scale features to mean 0, variance 1 (statistics of the training rows)");
  sub->add_option("--seed", fit->seed, "Seed of the train/test split");
  sub->add_option("--set", fit->sets,
                  "Estimator option: --set k=10, --set C=0.5 (repeatable); gbdt with --set "
                  "loss=squared_error and random_forest with --set criterion=squared_error "
                  "are regressions on a real-valued label");
  sub->add_option("--model-out", fit->model_out, "Write the fitted model as JSON");
  sub->add_option(
      "--xgboost-out", fit->xgboost_out,
      "gbdt: also write the model in XGBoost's JSON format (xgboost.Booster.load_model; "
      "class ids 0..K-1 in sorted class order)");
  sub->add_flag("--json", fit->json, "Print the result as one JSON done line");
  add_run_dir_option(*sub, fit->run_dir, /*resumes=*/false);
  CLI::Option* np = nullptr;
  add_job_options(sub, *job, np);
  sub->callback([fit, job, np, argc, argv] {
    job->np_given = np->count() > 0;
    configured_estimator(*fit);  // a bad name or option fails once, before any rank starts
    if (!fit->model_out.empty()) check_writable_file(fit->model_out, "--model-out");
    if (!fit->xgboost_out.empty()) check_writable_file(fit->xgboost_out, "--xgboost-out");
    std::optional<RunDir> run_dir;  // checked by every process before rank 0 writes
    if (!fit->run_dir.empty()) run_dir.emplace(fit->run_dir, false);
    run_job(*job, argc, argv, [&](comm::Communicator& comm) {
      fit_rank(*fit, *job, comm, run_dir ? &*run_dir : nullptr);
    });
  });
}

}  // namespace distml::cli
