#include "predict.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "distml/core/atomic_file.h"
#include "distml/ml/agreement.h"
#include "distml/ml/saved_model.h"
#include "ml_job.h"

namespace distml::cli {
namespace {

using ml::LocalData;

struct PredictOptions {
  std::string model_path;
  DataOptions data;
  std::string out;
  bool proba = false;
  bool json = false;
};

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

// Writes every rank's predictions (class ids, or values of a regression) to `path` on rank 0
// (standard output where it is empty), in row order, classes by name if they have names; with
// `proba` (rows x classes), each class's probability beside them, in a column named by the class.
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
  std::ofstream file;
  if (!path.empty()) file.open(path);
  std::ostream& out = path.empty() ? std::cout : file;
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
  if (!out.flush())
    throw Error(cat(path.empty() ? "standard output" : path, ": cannot write the predictions"));
}

void predict_rank(const PredictOptions& o, comm::Communicator& comm) {
  const auto model = ml::read_saved_model(o.model_path);
  const auto& estimator = model.estimator;
  if (o.proba && !estimator->gives_probabilities())
    throw UsageError(
        cat("--proba: ", model.estimator_name,
            " gives no class probabilities (logistic_regression, the naive Bayes, gbdt and "
            "random_forest classifiers do)"));
  const bool regression = estimator->regression();
  // A model fitted on a CSV file knows its feature columns by name, and its label's: the
  // file may order them otherwise, and may have the label column or not.
  LocalData data = read_data(o.data, comm,
                             {.features = model.features,
                              .libsvm_index_base = model.libsvm_index_base,
                              .idx_split = "t10k",
                              .regression = regression,
                              .feature_names = model.feature_names,
                              .label_name = model.label,
                              .missing_allowed = model.imputer || estimator->takes_missing()});
  check_features(data, model.features, o.data.path);
  if (data.sparse && (!estimator->takes_sparse() || model.standardizer || model.imputer))
    data = ml::densified(std::move(data), model.estimator_name);
  const bool labelled = ml::allreduce_i64(comm, data.y.empty() && data.targets.empty() ? 0 : 1,
                                          comm::ReduceOp::max) == 1;
  const auto& names = model.class_names;
  const std::int64_t unseen =
      labelled && estimator->supervised() ? align_labels(data, names, comm) : 0;
  if (model.imputer) model.imputer->apply(data);
  if (model.standardizer) model.standardizer->apply(data);
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
  write_predictions(predictions, estimator->supervised() ? names : std::vector<std::string>{},
                    regression, o.proba ? &proba : nullptr, o.out, comm);
  if (comm.rank() != 0) return;
  // Where the predictions went to standard output, the summary goes to standard error.
  FILE* summary = o.out.empty() ? stderr : stdout;
  if (o.json) {
    const nlohmann::json done = {{"event", "done"},
                                 {"estimator", model.estimator_name},
                                 {"rows", data.global_rows},
                                 {"score", score ? nlohmann::json(*score) : nullptr},
                                 {"unseen_class_rows", unseen},
                                 {"predictions", o.out.empty() ? nullptr : nlohmann::json(o.out)},
                                 {"np", comm.size()}};
    std::fprintf(summary, "%s\n", done.dump().c_str());
    return;
  }
  std::fprintf(summary, "\"%s\" on %s: ", model.estimator_name.c_str(), o.data.path.c_str());
  if (score)
    std::fprintf(summary, "score %.4f over %zu rows", *score, data.global_rows);
  else
    std::fprintf(summary, "%zu rows predicted (no labels to score)", data.global_rows);
  if (unseen > 0)
    std::fprintf(summary, " (%lld of a class not in the training data, counted as errors)",
                 static_cast<long long>(unseen));
  std::fprintf(summary, "; predictions %s\n",
               o.out.empty() ? "on standard output" : ("in " + o.out).c_str());
}

}  // namespace

void add_predict_command(CLI::App& app, int argc, char** argv) {
  auto predict = std::make_shared<PredictOptions>();
  auto job = std::make_shared<JobOptions>();
  auto* sub = app.add_subcommand(
      "predict",
      "Predict with a model written by distml fit --model-out: the predictions as CSV (to --out, "
      "else to standard output, with the score on standard error), and the score where the data "
      "has labels.");
  sub->add_option("--model", predict->model_path, "Model JSON from distml fit")->required();
  add_data_options(sub, predict->data);
  sub->add_option("--out", predict->out,
                  "Write the predictions (one per row) to this CSV (default: standard output)");
  sub->add_flag("--proba", predict->proba,
                "Each class's probability too, a column per class (logistic_regression, "
                "gaussian_nb, multinomial_nb, gbdt and random_forest classifiers)");
  sub->add_flag("--json", predict->json,
                "Print the result as one JSON done line (on standard error where the "
                "predictions go to standard output)");
  CLI::Option* np = nullptr;
  add_job_options(sub, *job, np);
  sub->callback([predict, job, np, argc, argv] {
    job->np_given = np->count() > 0;
    if (!predict->out.empty()) check_writable_file(predict->out, "--out");
    run_job(*job, argc, argv, [&](comm::Communicator& comm) { predict_rank(*predict, comm); });
  });
}

}  // namespace distml::cli
