// What `distml fit` and `distml predict` share: reading a data file on every rank, matching
// its labels and columns to a model's, and running a job on the ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/comm/engines.h"
#include "distml/core/error.h"
#include "distml/ml/local_data.h"
#include "launch.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace distml::cli {

/// The data options both subcommands take: --data, --format, --label.
struct DataOptions {
  std::string path, format = "auto", label;
};

/// How to read a data file: `features` for LibSVM (0: from the data), `idx_split` picks the
/// IDX files of a folder ("train" to fit, "t10k" to predict), `regression` reads the labels as
/// real-valued targets.
struct ReadOptions {
  std::size_t features = 0;
  int libsvm_index_base = -1;  // 0 or 1; -1 guesses from the file
  std::string idx_split = "train";
  bool regression = false;
  // A model's CSV columns: its features by name, and its label's name (empty: it had none).
  std::vector<std::string> feature_names{};
  std::string label_name{};
  bool missing_allowed = false;  // missing values become NaN, for an imputer
};

/// csv, libsvm or idx: --format, or guessed from the path (a folder of IDX files, .libsvm/.svm).
std::string resolved_format(const DataOptions& d);

/// Collective: this rank's rows of split `prefix` ("train" or "t10k", MNIST's names) of a folder
/// of IDX files.
ml::LocalData read_idx_split(const std::string& folder, const std::string& prefix,
                             comm::Communicator& comm);

/// Collective: this rank's rows of the file.
ml::LocalData read_data(const DataOptions& d, comm::Communicator& comm, const ReadOptions& r = {});

/// Collective: gives `d` the class ids of `names` (the training data's), by class name: two
/// files' label dictionaries differ when one of them lacks a class. A class the training data
/// lacks gets an id past the model's, which no prediction matches, so its rows count as errors.
/// Returns how many rows, over all ranks, have such a class.
std::int64_t align_labels(ml::LocalData& d, const std::vector<std::string>& names,
                          comm::Communicator& comm);

/// DataError naming `file` unless `d` has `want` features.
void check_features(const ml::LocalData& d, std::size_t want, const std::string& file);

/// --np, --engine, --timeout, --stall-warn.
struct JobOptions {
  int np = 0;
  bool np_given = false;
  std::string engine = "mpi";
  double timeout_s = 300;
  double stall_warn_s = 60;  // the stall inspector (comm/stall_inspector.h); 0: off
};

/// Runs `body` on this process's ranks: threads for the local engine, else the launched ones.
template <class Body>
void run_job(const JobOptions& job, int argc, char** argv, const Body& body) {
  if (job.np_given && job.np < 1) throw UsageError(cat("--np must be at least 1, got ", job.np));
  comm::check_engine_name(job.engine);
  if (job.engine != "local") relaunch_if_requested(job.np, job.engine, argc, argv);
  comm::CommOptions copts;
  copts.timeout = comm::Millis(static_cast<long long>(job.timeout_s * 1000));
  copts.stall_warn = comm::Millis(static_cast<long long>(job.stall_warn_s * 1000));
  run_on_ranks(job.engine, job.np, copts, body);
}

void add_job_options(CLI::App* sub, JobOptions& job, CLI::Option*& np);
void add_data_options(CLI::App* sub, DataOptions& d);

}  // namespace distml::cli
