#include "distml/train/task_data.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "distml/comm/block_range.h"
#include "distml/core/error.h"
#include "distml/core/installed_path.h"
#include "distml/data/csv_reader.h"
#include "distml/data/idx_reader.h"
#include "distml/data/npz_reader.h"
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

// The folder of a bundled data set: data.path (by default data/DATASET) as given where it
// exists; a relative one that does not is looked for where `make data` put it, in distml's
// own folder (the source tree, or PREFIX/share/distml), as `distml rl` finds its tuned
// configs, so that a run from another folder finds the data of the quick start.
std::string bundled_data_dir(const DataConfig& c) {
  const fs::path given = c.path.empty() ? "data/" + c.dataset : c.path;
  std::error_code ec;
  if (given.is_absolute() || fs::exists(given, ec)) return given.string();
  const std::string own =
      installed_or_source(given.string(), (fs::path(DISTML_SOURCE_DIR) / given).string());
  return fs::exists(own, ec) ? own : given.string();
}

TaskData load_idx_task(const DataConfig& c) {
  const std::string dir = bundled_data_dir(c);
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

// A dataset's shape and row count, without its rows.
data::Dataset npz_shape(const data::NpzLayout& layout, std::size_t rows) {
  data::Dataset d;
  d.num_samples = rows;
  d.feature_dim = layout.x.row_elements();
  d.sample_shape.assign(layout.x.shape.begin() + 1, layout.x.shape.end());
  if (d.sample_shape.empty()) d.sample_shape = {1};
  if (layout.float_targets()) {
    d.target_dim = layout.y.row_elements();
    d.target_shape.assign(layout.y.shape.begin() + 1, layout.y.shape.end());
  }
  return d;
}

// Checks the arrays of the train (and test) file now, on every rank alike; the rows are read
// by each rank's shard().
TaskData load_npz_task(const DataConfig& c) {
  if (c.path.empty())
    throw ConfigError("data.path must name the .npz file for data.dataset = \"npz\"");
  const data::NpzFile file(c.path);
  const auto layout = data::npz_layout(file);
  const std::size_t n = layout.x.rows();
  std::size_t n_train = n, test_begin = 0, n_test = 0;
  std::string test_file = c.path;
  if (c.test_path.empty()) {
    n_test = held_out(n, c.test_fraction, c.path);
    n_train = test_begin = n - n_test;
  } else {
    test_file = c.test_path;
    const auto test = data::npz_layout(data::NpzFile(c.test_path));
    if (test.x.row_elements() != layout.x.row_elements() ||
        test.float_targets() != layout.float_targets() ||
        test.y.row_elements() != layout.y.row_elements())
      throw DataError(cat(c.test_path,
                          ": arrays 'x' and 'y' have other row shapes or target kind "
                          "than those of ",
                          c.path));
    n_test = test.x.rows();
  }
  TaskData t;
  t.train = npz_shape(layout, n_train);
  t.test = npz_shape(layout, n_test);
  if (!layout.float_targets()) {  // the classes: every id in the training file
    for (auto id : file.read_ints(layout.y, 0, n)) {
      if (id < 0)
        throw DataError(cat(c.path, ": array 'y' holds class id ", id, "; ids start at 0"));
      t.num_classes = std::max(t.num_classes, id + 1);
    }
  }
  t.shard = [c, test_file, n_train, test_begin, n_test, t](int rank, int ranks) {
    TaskData s = t;
    s.shard = nullptr;
    s.is_shard = true;
    // Every rank trains on as many rows: the n_train mod ranks left over are not read.
    const auto train = comm::block_range(n_train, ranks, rank);
    s.train = data::read_npz_rows(c.path, train.begin, train.begin + n_train / ranks);
    const auto test = comm::block_range(n_test, ranks, rank);
    s.test = data::read_npz_rows(test_file, test_begin + test.begin, test_begin + test.end);
    if (t.num_classes > 0) check_labels(s.test, t.num_classes, test_file);
    return s;
  };
  return t;
}

}  // namespace

TaskData load_task_data(const DataConfig& config, std::uint64_t seed) {
  if (config.dataset == "mnist" || config.dataset == "fashion-mnist") return load_idx_task(config);
  if (config.dataset == "csv") return load_csv_task(config, seed);
  if (config.dataset == "text") return load_text_task(config);
  if (config.dataset == "npz") return load_npz_task(config);
  throw ConfigError(cat("data.dataset must be mnist, fashion-mnist, csv, text or npz, got '",
                        config.dataset, "'"));
}

}  // namespace distml::train
