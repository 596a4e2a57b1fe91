#include "ml_job.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "distml/ml/agreement.h"
#include "distml/ml/sharded_reader.h"

namespace distml::cli {
namespace {

namespace fs = std::filesystem;
using ml::LocalData;

bool is_idx_folder(const std::string& path) {
  return fs::is_directory(path) && fs::exists(fs::path(path) / "train-images-idx3-ubyte");
}

// Whether the file at `path` starts as a zip archive does (an .npz file is one).
bool is_zip_archive(const std::string& path) {
  char magic[4] = {};
  std::ifstream in(path, std::ios::binary);
  return in.read(magic, 4) && std::string_view(magic, 4) == std::string_view("PK\x03\x04", 4);
}

}  // namespace

std::string resolved_format(const DataOptions& d) {
  if (d.format != "auto") return d.format;
  if (is_idx_folder(d.path)) return "idx";
  const auto ext = fs::path(d.path).extension().string();
  return ext == ".libsvm" || ext == ".svm" ? "libsvm" : "csv";
}

LocalData read_idx_split(const std::string& folder, const std::string& prefix,
                         comm::Communicator& comm) {
  const fs::path dir(folder);
  return ml::read_idx_shard((dir / (prefix + "-images-idx3-ubyte")).string(),
                            (dir / (prefix + "-labels-idx1-ubyte")).string(), comm);
}

LocalData read_data(const DataOptions& d, comm::Communicator& comm, const ReadOptions& r) {
  const std::string format = resolved_format(d);
  if (format != "idx" && fs::is_directory(d.path))
    throw UsageError(cat(d.path,
                         ": a folder without train-images-idx3-ubyte; a folder must hold "
                         "raw IDX files (train-*, t10k-*; gunzip .gz ones first)"));
  if (format == "idx") {
    if (r.regression)
      throw UsageError(cat(d.path, ": IDX labels are class ids; regression needs CSV or LibSVM"));
    return read_idx_split(d.path, r.idx_split, comm);
  }
  if (format == "libsvm") {
    ml::LibsvmShardOptions o;
    o.features = r.features;
    o.index_base = r.libsvm_index_base;
    o.regression = r.regression;
    return ml::read_libsvm_shard(d.path, comm, o);
  }
  if (format != "csv")
    throw UsageError(cat("--format must be auto, csv, libsvm or idx, got '", format, "'"));
  if (is_zip_archive(d.path))
    throw UsageError(cat(d.path,
                         ": a zip archive (NumPy's .npz?); fit and predict read CSV with a "
                         "header row, LibSVM or IDX (distml train reads .npz). Write it as CSV, "
                         "e.g. numpy.savetxt(path, numpy.column_stack([x, y]), delimiter=',', "
                         "header=names, comments='')"));
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

void add_job_options(CLI::App* sub, JobOptions& job, CLI::Option*& np) {
  if (const char* e = std::getenv(kEngineVar)) job.engine = e;
  np = sub->add_option("--np", job.np, "Ranks (relaunches under distml launch; threads for local)");
  sub->add_option("--engine", job.engine, "mpi | gloo | local");
  sub->add_option("--timeout", job.timeout_s, "Seconds before a blocked collective fails");
  sub->add_option("--stall-warn", job.stall_warn_s,
                  "Seconds in one collective after which a rank logs which ranks it waits for "
                  "(0: never; docs/operations.md, \"Stall inspector\")")
      ->check(CLI::NonNegativeNumber);
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

}  // namespace distml::cli
