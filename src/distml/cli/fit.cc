#include "fit.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "distml/comm/engines.h"
#include "distml/core/clock.h"
#include "distml/core/error.h"
#include "distml/ml/agreement.h"
#include "distml/ml/estimator.h"
#include "distml/ml/imputer.h"
#include "distml/ml/model_file.h"
#include "distml/ml/preprocessing.h"
#include "distml/ml/sharded_reader.h"
#include "launch.h"

namespace distml::cli {
namespace {

namespace fs = std::filesystem;
using ml::LocalData;

struct DataOptions {
  std::string path, format = "auto", label;
};

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
  bool json = false;
};

struct PredictOptions {
  std::string model_path;
  DataOptions data;
  std::string out;
  bool proba = false;
  bool json = false;
};

struct JobOptions {
  int np = 0;
  bool np_given = false;
  std::string engine = "mpi";
  double timeout_s = 300;
};

bool is_idx_folder(const std::string& path) {
  return fs::is_directory(path) && fs::exists(fs::path(path) / "train-images-idx3-ubyte");
}

std::string resolved_format(const DataOptions& d) {
  if (d.format != "auto") return d.format;
  if (is_idx_folder(d.path)) return "idx";
  const auto ext = fs::path(d.path).extension().string();
  return ext == ".libsvm" || ext == ".svm" ? "libsvm" : "csv";
}

// An IDX folder holds both splits: "train" and "t10k" (MNIST's names).
LocalData read_idx_split(const std::string& folder, const std::string& prefix,
                         comm::Communicator& comm) {
  const fs::path dir(folder);
  return ml::read_idx_shard((dir / (prefix + "-images-idx3-ubyte")).string(),
                            (dir / (prefix + "-labels-idx1-ubyte")).string(), comm);
}

// How to read a data file: `features` for LibSVM (0: from the data), `idx_split` picks the
// IDX files of a folder ("train" to fit, "t10k" to predict), `regression` reads the labels as
// real-valued targets.
struct ReadOptions {
  std::size_t features = 0;
  std::string idx_split = "train";
  bool regression = false;
  // A model's CSV columns: its features by name, and its label's name (empty: it had none).
  std::vector<std::string> feature_names{};
  std::string label_name{};
  bool missing_allowed = false;  // missing values become NaN, for an imputer
};

LocalData read_data(const DataOptions& d, comm::Communicator& comm, const ReadOptions& r = {}) {
  const std::string format = resolved_format(d);
  if (format == "idx") {
    if (r.regression)
      throw UsageError(cat(d.path, ": IDX labels are class ids; regression needs CSV or LibSVM"));
    return read_idx_split(d.path, r.idx_split, comm);
  }
  if (format == "libsvm") {
    ml::LibsvmShardOptions o;
    o.features = r.features;
    o.regression = r.regression;
    return ml::read_libsvm_shard(d.path, comm, o);
  }
  if (format != "csv")
    throw UsageError(cat("--format must be auto, csv, libsvm or idx, got '", format, "'"));
  ml::CsvShardOptions o;
  o.regression = r.regression;
  o.features = r.feature_names;
  o.label_name = r.label_name;
  o.missing_allowed = r.missing_allowed;
  if (d.label == "none") {
    o.no_label = true;
    o.label_name.clear();
  } else if (!d.label.empty()) {
    char* end = nullptr;
    const long index = std::strtol(d.label.c_str(), &end, 10);
    if (*end == '\0')
      o.label_index = static_cast<int>(index);
    else
      o.label_name = d.label;
  }
  return ml::read_csv_shard(d.path, comm, o);
}

// Collective: gives `d` the class ids of `names` (the training data's), by class name: two
// files' label dictionaries differ when one of them lacks a class. A class the training data
// lacks gets an id past the model's, which no prediction matches, so its rows count as errors.
// Returns how many rows, over all ranks, have such a class.
std::int64_t align_labels(LocalData& d, const std::vector<std::string>& names,
                          comm::Communicator& comm) {
  if (names.empty() || d.class_names == names) return 0;
  std::map<std::string, std::int64_t> id;
  for (std::size_t i = 0; i < names.size(); ++i) id[names[i]] = static_cast<std::int64_t>(i);
  std::vector<std::string> classes = names;
  for (const auto& name : d.class_names)  // the same on every rank, in the same order
    if (id.emplace(name, static_cast<std::int64_t>(classes.size())).second) classes.push_back(name);
  std::int64_t unseen = 0;
  for (auto& label : d.y) {
    label = id.at(d.class_names.at(label));
    unseen += label >= static_cast<std::int64_t>(names.size()) ? 1 : 0;
  }
  d.class_names = classes;
  d.num_classes = static_cast<std::int64_t>(names.size());
  comm.allreduce(comm::Buffer{&unseen, 1, comm::DType::i64});
  return unseen;
}

void check_features(const LocalData& d, std::size_t want, const std::string& file) {
  if (d.features != want)
    throw DataError(cat(file, ": ", d.features, " features, but the model has ", want));
}

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

void fit_rank(const FitOptions& o, comm::Communicator& comm) {
  auto estimator = configured_estimator(o);
  const bool regression = estimator->regression();
  const bool impute = !o.impute.empty();
  LocalData train = read_data(o.data, comm, {.regression = regression, .missing_allowed = impute});
  if (o.data.label == "none" && estimator->supervised())
    throw UsageError(cat("--label none: ", o.estimator,
                         " learns from labels; of the estimators only kmeans fits without"));
  std::optional<LocalData> test;
  std::int64_t test_unseen = 0;  // test rows of a class the training rows lack
  if (!o.test_path.empty()) {
    DataOptions t = o.data;
    t.path = o.test_path;
    test = read_data(
        t, comm, {.features = train.features, .regression = regression, .missing_allowed = impute});
    test_unseen = align_labels(*test, train.class_names, comm);
    check_features(*test, train.features, o.test_path);
  } else if (o.test_fraction > 0) {
    auto [tr, te] = ml::train_test_split(train, o.test_fraction, o.seed, comm);
    train = std::move(tr);
    test = std::move(te);
  } else if (resolved_format(o.data) == "idx") {
    test = read_idx_split(o.data.path, "t10k", comm);
  }

  nlohmann::json preprocessing = {
      {"features", train.features},
      {"class_names", train.class_names},
      {"feature_names", train.feature_names},
      {"label",
       train.label_name.empty() ? nlohmann::json(nullptr) : nlohmann::json(train.label_name)}};
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
  nlohmann::json done = {{"event", "done"},
                         {"estimator", o.estimator},
                         {"rows", train.global_rows},
                         {"features", train.features},
                         {"classes", train.num_classes},
                         {"train_score", train_score},
                         {"test_score", test_score ? nlohmann::json(*test_score) : nullptr},
                         {"test_unseen_class_rows", test_unseen},
                         {"iterations", estimator->iterations()},
                         {"fit_time_s", fit_s},
                         {"np", comm.size()}};
  if (!estimator->supervised()) done["inertia"] = -train_score;
  if (o.json) {
    std::cout << done.dump() << std::endl;
    return;
  }
  std::printf("%s on %zu rows x %zu features: train score %.4f", o.estimator.c_str(),
              train.global_rows, train.features, train_score);
  if (test_score) std::printf(", test score %.4f", *test_score);
  if (test_unseen > 0)
    std::printf(" (%lld test rows of classes not in the training data count as errors)",
                static_cast<long long>(test_unseen));
  std::printf(" (%d iterations, fit %.2f s on %d ranks)\n", estimator->iterations(), fit_s,
              comm.size());
  if (!o.model_out.empty()) std::printf("model written to %s\n", o.model_out.c_str());
}

// Collective: every rank's values, in rank order.
std::vector<double> gathered(const std::vector<double>& mine, comm::Communicator& comm) {
  std::int64_t n = static_cast<std::int64_t>(mine.size());
  std::vector<std::int64_t> counts(comm.size());
  comm.allgather(comm::ConstBuffer{&n, 1, comm::DType::i64},
                 comm::Buffer{counts.data(), counts.size(), comm::DType::i64});
  std::vector<std::size_t> sizes(counts.begin(), counts.end());
  std::size_t total = 0;
  for (auto s : sizes) total += s;
  std::vector<double> all(total);
  comm.allgatherv(comm::cview(mine), comm::view(all), sizes);
  return all;
}

// Writes every rank's predictions (class ids, or values of a regression) to `path` on rank 0,
// in row order, classes by name if they have names; with `proba` (rows x classes), each
// class's probability beside them, in a column named by the class.
void write_predictions(const std::vector<double>& mine, const std::vector<std::string>& names,
                       bool regression, const std::vector<double>* proba, const std::string& path,
                       comm::Communicator& comm) {
  const auto all = gathered(mine, comm);
  const auto all_proba = proba ? gathered(*proba, comm) : std::vector<double>{};
  if (comm.rank() != 0) return;
  const std::size_t classes = all.empty() ? 0 : all_proba.size() / all.size();
  const auto class_name = [&](std::size_t k) {
    return names.empty() ? std::to_string(k) : names.at(k);
  };
  std::ofstream out(path);
  out << "prediction";
  for (std::size_t k = 0; k < classes; ++k) out << "," << class_name(k);
  out << "\n";
  char text[32];
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (regression) {
      std::snprintf(text, sizeof text, "%.17g", all[i]);
      out << text;
    } else {
      out << class_name(static_cast<std::size_t>(all[i]));
    }
    for (std::size_t k = 0; k < classes; ++k) {
      std::snprintf(text, sizeof text, "%.17g", all_proba[i * classes + k]);
      out << "," << text;
    }
    out << "\n";
  }
  if (!out.flush()) throw Error(cat(path, ": cannot write the predictions"));
}

void predict_rank(const PredictOptions& o, comm::Communicator& comm) {
  const auto model = ml::load_model_file(o.model_path);
  auto estimator = ml::estimator_from_json(model);
  if (o.proba && !estimator->gives_probabilities())
    throw UsageError(cat("--proba: ", model["estimator"].get<std::string>(),
                         " gives no class probabilities (logreg, nb and gbdt classifiers do)"));
  const auto& pre = model.at("preprocessing");
  const auto names = pre.at("class_names").get<std::vector<std::string>>();
  const bool regression = estimator->regression();
  // A model fitted on a CSV file knows its feature columns by name, and its label's: the
  // file may order them otherwise, and may have the label column or not.
  LocalData data = read_data(
      o.data, comm,
      {.features = pre.at("features").get<std::size_t>(),
       .idx_split = "t10k",
       .regression = regression,
       .feature_names = pre.value("feature_names", std::vector<std::string>{}),
       .label_name = pre.contains("label") && pre["label"].is_string() ? pre["label"] : "",
       .missing_allowed = pre.contains("imputer")});
  check_features(data, pre.at("features").get<std::size_t>(), o.data.path);
  const bool labelled = ml::allreduce_i64(comm, data.y.empty() && data.targets.empty() ? 0 : 1,
                                          comm::ReduceOp::max) == 1;
  const std::int64_t unseen =
      labelled && estimator->supervised() ? align_labels(data, names, comm) : 0;
  if (pre.contains("imputer")) ml::Imputer::from_json(pre["imputer"]).apply(data);
  if (pre.contains("standardizer")) ml::Standardizer::from_json(pre["standardizer"]).apply(data);
  std::vector<double> predictions;
  if (regression) {
    predictions = estimator->predict_values(data);
  } else {
    const auto ids = estimator->predict(data);
    predictions.assign(ids.begin(), ids.end());
  }
  // Scored only against labels the file has.
  const std::optional<double> score =
      labelled ? std::optional(estimator->score(data, comm)) : std::nullopt;
  const auto proba = o.proba ? estimator->predict_proba(data) : std::vector<double>{};
  // A clustering model predicts cluster ids, which no class name stands for.
  if (!o.out.empty())
    write_predictions(predictions, estimator->supervised() ? names : std::vector<std::string>{},
                      regression, o.proba ? &proba : nullptr, o.out, comm);
  if (comm.rank() != 0) return;
  if (o.json) {
    const nlohmann::json done = {{"event", "done"},
                                 {"estimator", model["estimator"]},
                                 {"rows", data.global_rows},
                                 {"score", score ? nlohmann::json(*score) : nullptr},
                                 {"unseen_class_rows", unseen},
                                 {"predictions", o.out.empty() ? nullptr : nlohmann::json(o.out)},
                                 {"np", comm.size()}};
    std::cout << done.dump() << std::endl;
    return;
  }
  std::printf("%s on %s: ", model["estimator"].dump().c_str(), o.data.path.c_str());
  if (score)
    std::printf("score %.4f over %zu rows", *score, data.global_rows);
  else
    std::printf("%zu rows predicted (no labels to score)", data.global_rows);
  if (unseen > 0)
    std::printf(" (%lld of a class not in the training data, counted as errors)",
                static_cast<long long>(unseen));
  std::printf("%s%s\n", o.out.empty() ? "" : "; predictions in ", o.out.c_str());
}

// Runs `body` on this process's ranks: threads for the local engine, else the launched ones.
template <class Body>
void run_job(const JobOptions& job, int argc, char** argv, const Body& body) {
  if (job.np_given && job.np < 1) throw UsageError(cat("--np must be at least 1, got ", job.np));
  comm::check_engine_name(job.engine);
  if (job.engine != "local") relaunch_if_requested(job.np, job.engine, argc, argv);
  comm::CommOptions copts;
  copts.timeout = comm::Millis(static_cast<long long>(job.timeout_s * 1000));
  run_on_ranks(job.engine, job.np, copts, body);
}

void add_job_options(CLI::App* sub, JobOptions& job, CLI::Option*& np) {
  if (const char* e = std::getenv(kEngineVar)) job.engine = e;
  np = sub->add_option("--np", job.np, "Ranks (relaunches under distml launch; threads for local)");
  sub->add_option("--engine", job.engine, "mpi | gloo | local");
  sub->add_option("--timeout", job.timeout_s, "Seconds before a blocked collective fails");
}

void add_data_options(CLI::App* sub, DataOptions& d) {
  sub->add_option("--data", d.path,
                  "CSV (header row), LibSVM (.libsvm/.svm) file, or a folder of IDX files "
                  "(train-* and t10k-*, as MNIST); each rank reads only its own rows")
      ->required();
  sub->add_option("--format", d.format, "auto | csv | libsvm | idx");
  sub->add_option("--label", d.label,
                  "CSV label column: header name or 0-based index "
                  "(negative from the end; default the last)");
}

}  // namespace

void add_fit_commands(CLI::App& app, int argc, char** argv) {
  auto fit = std::make_shared<FitOptions>();
  auto job = std::make_shared<JobOptions>();
  auto* sub = app.add_subcommand(
      "fit",
      "Fit a classical estimator on row-sharded data (each rank reads only its rows); see "
      "docs/classical_ml.md.\nExample: "
      "distml fit logreg --data train.csv --label species --test-fraction 0.2 --np 2 --set C=1");
  sub->add_option("estimator", fit->estimator, "kmeans | logreg | svm | nb | multinomial_nb | gbdt")
      ->required();
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
                  "loss=squared_error is a regression on a real-valued label");
  sub->add_option("--model-out", fit->model_out, "Write the fitted model as JSON");
  sub->add_flag("--json", fit->json, "Print the result as one JSON done line");
  CLI::Option* np = nullptr;
  add_job_options(sub, *job, np);
  sub->callback([fit, job, np, argc, argv] {
    job->np_given = np->count() > 0;
    configured_estimator(*fit);  // a bad name or option fails once, before any rank starts
    run_job(*job, argc, argv, [&](comm::Communicator& comm) { fit_rank(*fit, comm); });
  });

  auto predict = std::make_shared<PredictOptions>();
  auto pjob = std::make_shared<JobOptions>();
  auto* psub = app.add_subcommand(
      "predict", "Predict with a model written by distml fit --model-out; prints its score.");
  psub->add_option("--model", predict->model_path, "Model JSON from distml fit")->required();
  add_data_options(psub, predict->data);
  psub->add_option("--out", predict->out, "Write the predictions (one per row) to this CSV");
  psub->add_flag("--proba", predict->proba,
                 "With --out: each class's probability too, a column per class (logreg, nb, "
                 "gbdt)")
      ->needs(psub->get_option("--out"));
  psub->add_flag("--json", predict->json, "Print the result as one JSON done line");
  CLI::Option* pnp = nullptr;
  add_job_options(psub, *pjob, pnp);
  psub->callback([predict, pjob, pnp, argc, argv] {
    pjob->np_given = pnp->count() > 0;
    run_job(*pjob, argc, argv, [&](comm::Communicator& comm) { predict_rank(*predict, comm); });
  });
}

}  // namespace distml::cli
