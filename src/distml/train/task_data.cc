#include "distml/train/task_data.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "distml/core/error.h"
#include "distml/data/csv_reader.h"
#include "distml/data/idx_reader.h"
#include "distml/data/permutation.h"
#include "distml/data/text_corpus.h"

namespace distml::train {
namespace {

namespace fs = std::filesystem;

// An IDX file of a bundled data set, raw or gzip-compressed.
std::string find_idx(const std::string& dataset, const std::string& dir, const std::string& base) {
  for (const auto& name : {base, base + ".gz"})
    if (fs::exists(fs::path(dir) / name)) return (fs::path(dir) / name).string();
  throw DataError(cat("dataset '", dataset, "': ", (fs::path(dir) / base).string(),
                      "[.gz] not found; run `make data` to put MNIST and Fashion-MNIST into "
                      "data/, or set data.path to the folder that holds them"));
}

void check_labels(const data::Dataset& d, std::int64_t num_classes, const std::string& file) {
  for (std::size_t i = 0; i < d.num_samples; ++i)
    if (d.labels[i] < 0 || d.labels[i] >= num_classes)
      throw DataError(cat(file, ": label ", d.labels[i], " of sample ", i, " is outside [0, ",
                          num_classes, ")"));
}

// The rows `rows` of `d`, in that order.
data::Dataset select_rows(const data::Dataset& d, const std::vector<std::size_t>& rows) {
  data::Dataset out;
  out.num_samples = rows.size();
  out.feature_dim = d.feature_dim;
  out.sample_shape = d.sample_shape;
  out.class_names = d.class_names;
  out.features.reserve(rows.size() * d.feature_dim);
  for (auto r : rows) {
    out.features.insert(out.features.end(), d.row(r), d.row(r) + d.feature_dim);
    out.labels.push_back(d.labels[r]);
  }
  return out;
}

// The number of held-out rows for `fraction` of `n`: at least one, and one row left to train.
std::size_t held_out(std::size_t n, double fraction, const std::string& what) {
  if (n < 2)
    throw DataError(cat(what, ": ", n, " samples; need at least 2 to split off a test set"));
  return std::clamp<std::size_t>(static_cast<std::size_t>(std::ceil(n * fraction)), 1, n - 1);
}

TaskData load_idx_task(const DataConfig& c) {
  const std::string dir = c.path.empty() ? "data/" + c.dataset : c.path;
  TaskData t;
  t.num_classes = 10;
  auto load = [&](const std::string& prefix, data::Dataset& into) {
    auto images = find_idx(c.dataset, dir, prefix + "-images-idx3-ubyte");
    auto labels = find_idx(c.dataset, dir, prefix + "-labels-idx1-ubyte");
    into = data::load_idx_pair(images, labels);
    check_labels(into, t.num_classes, labels);
  };
  load("train", t.train);
  load("t10k", t.test);
  return t;
}

// Gives the test split the train split's class ids, by class name.
void align_class_names(const data::Dataset& train, data::Dataset& test, const std::string& file) {
  if (train.class_names.empty() && test.class_names.empty()) return;
  if (train.class_names.empty() || test.class_names.empty())
    throw DataError(cat(file, ": labels are ", test.class_names.empty() ? "numbers" : "names",
                        " but the training file's are not"));
  std::map<std::string, std::int64_t> id;
  for (std::size_t i = 0; i < train.class_names.size(); ++i) id[train.class_names[i]] = i;
  for (auto& label : test.labels) {
    const auto& name = test.class_names[label];
    auto it = id.find(name);
    if (it == id.end())
      throw DataError(cat(file, ": class '", name, "' does not occur in the training file"));
    label = it->second;
  }
  test.class_names = train.class_names;
}

TaskData load_csv_task(const DataConfig& c, std::uint64_t seed) {
  if (c.path.empty())
    throw ConfigError("data.path must name the CSV file for data.dataset = \"csv\"");
  data::CsvOptions options;
  if (!c.label.empty()) options.label_name(c.label);
  TaskData t;
  auto all = data::read_csv(c.path, options);
  if (!c.test_path.empty()) {
    t.train = std::move(all);
    t.test = data::read_csv(c.test_path, options);
    align_class_names(t.train, t.test, c.test_path);
  } else {
    auto order = data::shuffled_permutation(all.num_samples, seed, 0);
    const std::size_t n_test = held_out(all.num_samples, c.test_fraction, c.path);
    t.test = select_rows(all, {order.begin(), order.begin() + n_test});
    t.train = select_rows(all, {order.begin() + n_test, order.end()});
  }
  if (!t.train.class_names.empty()) {
    t.num_classes = t.train.class_names.size();
  } else {
    for (auto label : t.train.labels) t.num_classes = std::max(t.num_classes, label + 1);
  }
  check_labels(t.train, t.num_classes, c.path);
  check_labels(t.test, t.num_classes, c.test_path.empty() ? c.path : c.test_path);
  return t;
}

TaskData load_text_task(const DataConfig& c) {
  if (c.path.empty())
    throw ConfigError("data.path must name the text file for data.dataset = \"text\"");
  auto corpus = data::read_text_corpus(c.path);
  const std::size_t L = c.seq_len, n = corpus.num_windows(L);
  data::Dataset all;
  all.num_samples = n;
  all.feature_dim = L + 1;
  all.sample_shape = {L + 1};
  all.features.resize(n * (L + 1));
  all.labels.assign(n, 0);
  std::vector<std::int64_t> inputs(L), targets(L);
  for (std::size_t i = 0; i < n; ++i) {
    corpus.window(i, L, inputs.data(), targets.data());
    float* row = all.features.data() + i * (L + 1);
    std::copy(inputs.begin(), inputs.end(), row);
    row[L] = static_cast<float>(targets[L - 1]);
  }
  // The tail of the text is the test split: windows next to each other share context.
  const std::size_t n_test = held_out(n, c.test_fraction, cat(c.path, " in windows of ", L));
  std::vector<std::size_t> rows(n);
  for (std::size_t i = 0; i < n; ++i) rows[i] = i;
  TaskData t;
  t.kind = TaskKind::language_model;
  t.num_classes = static_cast<std::int64_t>(corpus.vocabulary.size());
  t.train = select_rows(all, {rows.begin(), rows.end() - n_test});
  t.test = select_rows(all, {rows.end() - n_test, rows.end()});
  return t;
}

}  // namespace

TaskData load_task_data(const DataConfig& config, std::uint64_t seed) {
  if (config.dataset == "mnist" || config.dataset == "fashion-mnist") return load_idx_task(config);
  if (config.dataset == "csv") return load_csv_task(config, seed);
  if (config.dataset == "text") return load_text_task(config);
  throw ConfigError(
      cat("data.dataset must be mnist, fashion-mnist, csv or text, got '", config.dataset, "'"));
}

}  // namespace distml::train
