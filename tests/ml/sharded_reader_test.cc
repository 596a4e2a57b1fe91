// Row-sharded readers, standardizer and split against whole-file references at world sizes
// 1..7 (including more ranks than rows), ranks as threads of the local engine.
#include "distml/ml/sharded_reader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <set>

#include "../data/temp_dir.h"
#include "distml/comm/block_range.h"
#include "distml/comm/local/local_world.h"
#include "distml/core/error.h"
#include "distml/data/csv_reader.h"
#include "distml/data/idx_reader.h"
#include "distml/ml/preprocessing.h"

namespace distml::ml {
namespace {

using data::testing::TempDir;

constexpr int kWorlds[] = {1, 2, 3, 4, 7};

// Runs fn on `world` ranks and returns each rank's result, in rank order.
template <class Fn>
auto per_rank(int world, Fn fn) {
  std::vector<decltype(fn(std::declval<comm::Communicator&>()))> out(world);
  comm::local::run_ranks(world, {}, [&](comm::Communicator& c) { out[c.rank()] = fn(c); });
  return out;
}

// Runs fn on `world` ranks and returns each rank's DataError message ("" if none).
template <class Fn>
std::vector<std::string> errors_per_rank(int world, Fn fn) {
  return per_rank(world, [&](comm::Communicator& c) {
    try {
      fn(c);
    } catch (const DataError& e) {
      return std::string(e.what());
    }
    return std::string();
  });
}

// All ranks' rows in rank order, with rank 0's agreed fields.
LocalData concat(const std::vector<LocalData>& shards) {
  LocalData all = shards.at(0);
  all.sparse.reset();
  all.rows = 0;
  all.x.clear();
  all.y.clear();
  all.targets.clear();
  for (const LocalData& sharded : shards) {
    const LocalData s = densified(sharded, "concat");
    EXPECT_EQ(s.features, all.features);
    EXPECT_EQ(s.global_rows, all.global_rows);
    EXPECT_EQ(s.num_classes, all.num_classes);
    EXPECT_EQ(s.class_names, all.class_names);
    EXPECT_EQ(s.feature_names, all.feature_names);
    EXPECT_EQ(s.x.size(), s.rows * s.features);
    all.rows += s.rows;
    all.x.insert(all.x.end(), s.x.begin(), s.x.end());
    all.y.insert(all.y.end(), s.y.begin(), s.y.end());
    all.targets.insert(all.targets.end(), s.targets.begin(), s.targets.end());
  }
  EXPECT_EQ(all.rows, all.global_rows);
  return all;
}

// The label of row i as text, so that first-appearance and sorted dictionaries compare.
std::string label_of(const std::vector<std::string>& names, std::int64_t id) {
  return names.empty() ? std::to_string(id) : names.at(static_cast<std::size_t>(id));
}

// np.unique's order: by number when every class is an integer, else by name.
bool sorted_as_numpy_unique(const std::vector<std::string>& names) {
  const bool numbers = std::all_of(names.begin(), names.end(), [](const std::string& s) {
    return !s.empty() && s.find_first_not_of("-0123456789") == std::string::npos;
  });
  if (!numbers) return std::is_sorted(names.begin(), names.end());
  return std::is_sorted(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    return std::stoll(a) < std::stoll(b);
  });
}

void expect_matches_whole_file(const std::string& path, const CsvShardOptions& o) {
  data::CsvOptions whole_options;
  if (!o.label_name.empty())
    whole_options.label_name(o.label_name);
  else
    whole_options.label_index(o.label_index);
  const data::Dataset whole = data::read_csv(path, whole_options);
  std::vector<std::string> first_names;
  for (int world : kWorlds) {
    SCOPED_TRACE(cat(path, " at world size ", world));
    const LocalData all =
        concat(per_rank(world, [&](comm::Communicator& c) { return read_csv_shard(path, c, o); }));
    ASSERT_EQ(all.rows, whole.num_samples);
    ASSERT_EQ(all.features, whole.feature_dim);
    for (std::size_t i = 0; i < all.x.size(); ++i)
      ASSERT_EQ(static_cast<float>(all.x[i]), whole.features[i]) << "element " << i;
    ASSERT_EQ(all.y.size(), whole.labels.size());
    for (std::size_t i = 0; i < all.y.size(); ++i)
      EXPECT_EQ(label_of(all.class_names, all.y[i]), label_of(whole.class_names, whole.labels[i]));
    EXPECT_TRUE(sorted_as_numpy_unique(all.class_names)) << cat(all.class_names.size(), " classes");
    if (world == 1) first_names = all.class_names;
    EXPECT_EQ(all.class_names, first_names) << "class ids depend on the world size";
  }
}

TEST(ReadCsvShard, IntegerLabelsBlankLinesAndQuotesMatchWholeFile) {
  TempDir dir;
  const auto path = dir.write("a.csv",
                              "\nx1,\"x,2\",label\n1,2,0\n\n3.5,\"4\",2\n-1e3, 6 ,1\n\n\n"
                              "\"7\",8,0\n9,10,2\n");
  expect_matches_whole_file(path, {});
  const auto shards = per_rank(3, [&](comm::Communicator& c) { return read_csv_shard(path, c); });
  EXPECT_EQ(shards[0].num_classes, 3);
  EXPECT_EQ(shards[0].feature_names, (std::vector<std::string>{"x1", "x,2"}));
  EXPECT_EQ(shards[0].class_names, (std::vector<std::string>{"0", "1", "2"}));
}

TEST(ReadCsvShard, CrlfStringLabelsByNameMatchWholeFile) {
  TempDir dir;
  const auto path = dir.write("b.csv",
                              "a,species,b\r\n1,\"setosa\",2\r\n3,virginica,4\r\n\r\n"
                              "5,\"ver \"\"si\"\", color\",6\r\n7,setosa,8\r\n9,virginica,10");
  CsvShardOptions o;
  o.label_name = "species";
  expect_matches_whole_file(path, o);
  const auto shards =
      per_rank(2, [&](comm::Communicator& c) { return read_csv_shard(path, c, o); });
  EXPECT_EQ(shards[1].class_names,
            (std::vector<std::string>{"setosa", "ver \"si\", color", "virginica"}));
  EXPECT_EQ(shards[1].feature_names, (std::vector<std::string>{"a", "b"}));
}

TEST(ReadCsvShard, LargeRandomFileMatchesWholeFileAtEveryCut) {
  TempDir dir;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> value(-100, 100);
  const char* names[] = {"cat", "dog", "emu", "\"gnu, the\""};
  std::string text = "f0,f1,f2,label\r\n";
  for (int i = 0; i < 300; ++i) {
    for (int c = 0; c < 3; ++c) text += cat(value(rng), ",");
    text += names[rng() % 4];
    text += i % 2 == 0 ? "\r\n" : "\n";
    if (i % 37 == 0) text += "\n";
  }
  expect_matches_whole_file(dir.write("big.csv", text), {});
}

TEST(ReadCsvShard, MoreRanksThanRowsLeavesSomeRanksEmpty) {
  TempDir dir;
  const auto path = dir.write("tiny.csv", "x,y\n1,0\n2,1");
  const auto shards = per_rank(7, [&](comm::Communicator& c) { return read_csv_shard(path, c); });
  std::size_t empty = 0;
  for (const LocalData& s : shards) empty += s.rows == 0 ? 1 : 0;
  EXPECT_GE(empty, 5u);
  EXPECT_EQ(concat(shards).x, (std::vector<double>{1, 2}));
  EXPECT_EQ(shards[6].num_classes, 2);

  const auto header_only = dir.write("header.csv", "x,y\n");
  for (const LocalData& s :
       per_rank(3, [&](comm::Communicator& c) { return read_csv_shard(header_only, c); }))
    EXPECT_EQ(s.global_rows, 0u);
}

// Every rank throws the same text, which starts with the whole-file reader's message.
void expect_same_error_everywhere(const std::string& path, const CsvShardOptions& o,
                                  const std::string& expected_start) {
  for (int world : kWorlds) {
    SCOPED_TRACE(cat(path, " at world size ", world));
    const std::vector<std::string> errors =
        errors_per_rank(world, [&](comm::Communicator& c) { read_csv_shard(path, c, o); });
    for (const std::string& e : errors) {
      EXPECT_EQ(e, errors[0]);
      EXPECT_EQ(e.substr(0, expected_start.size()), expected_start) << e;
    }
  }
}

std::string whole_file_error(const std::string& path) {
  try {
    data::read_csv(path);
  } catch (const DataError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ReadCsvShard, BadRowsGiveTheSameErrorWithTheGlobalLineOnEveryRank) {
  TempDir dir;
  std::string head = "a,b,label\n", tail;
  for (int i = 0; i < 30; ++i) (i < 15 ? head : tail) += cat(i, ",", i * 2, ",", i % 3, "\n");
  // The header, 15 rows and a blank line come first, so the first bad line is line 18; a
  // second bad line further on must not win on any rank.
  head += "\n";
  tail += "1,x,0\n";
  const auto ragged = dir.write("ragged.csv", head + "1,2\n" + tail);
  const auto word = dir.write("word.csv", head + "1,abc,0\n" + tail);
  const auto missing = dir.write("missing.csv", head + "1,,0\n" + tail);
  for (const auto& path : {ragged, word, missing}) {
    const std::string expected = whole_file_error(path);
    EXPECT_NE(expected.find(":18: "), std::string::npos) << expected;
    expect_same_error_everywhere(path, {}, expected);
  }
  EXPECT_NE(whole_file_error(word).find("column 2 (b)"), std::string::npos);
}

TEST(ReadCsvShard, UnknownLabelColumnListsTheHeader) {
  TempDir dir;
  const auto path = dir.write("c.csv", "sepal,petal,kind\n1,2,a\n");
  CsvShardOptions o;
  o.label_name = "species";
  expect_same_error_everywhere(path, o, path + ":1: no label column named 'species'");
  const auto errors =
      errors_per_rank(2, [&](comm::Communicator& c) { read_csv_shard(path, c, o); });
  EXPECT_NE(errors[1].find("sepal, petal, kind"), std::string::npos) << errors[1];
}

TEST(ReadCsvShard, MissingOrEmptyFileIsTheSameErrorOnEveryRank) {
  TempDir dir;
  expect_same_error_everywhere(dir.file("absent.csv"), {},
                               dir.file("absent.csv") + ": cannot open");
  const auto empty = dir.write("empty.csv", "\n\r\n");
  expect_same_error_everywhere(empty, {}, empty + ": empty file, expected a header row");
}

// The classes are np.unique(labels): +1/-1 (as in a9a) and {1, 2} (as in covtype.binary) are
// two classes, integers sort by value, and "+1", "1" and "1.0" are one class. The same at
// every world size.
TEST(ReadCsvShard, ClassesAreTheSortedDistinctLabelValues) {
  TempDir dir;
  const auto expect_classes = [&](const std::string& name, const std::string& labels,
                                  const std::vector<std::string>& classes,
                                  const std::vector<std::int64_t>& ids) {
    std::string text = "a,label\n";
    for (std::size_t i = 0, start = 0; start < labels.size(); ++i) {
      const auto end = std::min(labels.find(' ', start), labels.size());
      text += cat(i, ",", labels.substr(start, end - start), "\n");
      start = end + 1;
    }
    const auto path = dir.write(name, text);
    for (int world : kWorlds) {
      const LocalData all =
          concat(per_rank(world, [&](comm::Communicator& c) { return read_csv_shard(path, c); }));
      EXPECT_EQ(all.class_names, classes) << name << " at world size " << world;
      EXPECT_EQ(all.y, ids) << name << " at world size " << world;
    }
  };
  expect_classes("pm1.csv", "+1 -1 -1 1 1.0", {"-1", "1"}, {1, 0, 0, 1, 1});
  expect_classes("12.csv", "2 1 1 2", {"1", "2"}, {1, 0, 0, 1});
  expect_classes("wide.csv", "10 9 2 -3 10", {"-3", "2", "9", "10"}, {3, 2, 1, 0, 3});
  expect_classes("names.csv", "b a 10 9", {"10", "9", "a", "b"}, {3, 2, 0, 1});
}

// A model's columns by name: any order, with or without the label; an unknown or missing
// column is an error. Without a label column every column is a feature.
TEST(ReadCsvShard, ColumnsByNameWithOrWithoutTheLabel) {
  TempDir dir;
  const auto path = dir.write("cols.csv", "b,kind,a\n2,x,1\n4,y,3\n");
  CsvShardOptions o;
  o.features = {"a", "b"};
  o.label_name = "kind";
  auto d = per_rank(1, [&](comm::Communicator& c) { return read_csv_shard(path, c, o); })[0];
  EXPECT_EQ(d.x, (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(d.y, (std::vector<std::int64_t>{0, 1}));
  o.label_name = "";  // a model without a label: "kind" is a column too many
  expect_same_error_everywhere(path, o,
                               path + ":1: column 'kind' is neither a feature of the model");
  o.features = {"a", "c"};
  o.label_name = "kind";
  expect_same_error_everywhere(path, o, path + ":1: no column named 'c' (a feature of the model)");
  const auto unlabelled = dir.write("u.csv", "a,b\n1,2\n3,4\n");
  CsvShardOptions none;
  none.no_label = true;
  d = per_rank(2, [&](comm::Communicator& c) { return read_csv_shard(unlabelled, c, none); })[0];
  EXPECT_EQ(d.features, 2u);
  EXPECT_TRUE(d.y.empty());
  EXPECT_EQ(d.global_rows, 2u);
}

// Spreadsheet exports start with a UTF-8 byte order mark; it is not part of the first name.
TEST(ReadCsvShard, AByteOrderMarkIsNotPartOfTheFirstColumnsName) {
  TempDir dir;
  const auto path = dir.write("bom.csv", "\xEF\xBB\xBFkind,a\nx,1\ny,2\n");
  CsvShardOptions o;
  o.label_name = "kind";
  const auto shards =
      per_rank(2, [&](comm::Communicator& c) { return read_csv_shard(path, c, o); });
  EXPECT_EQ(shards[0].feature_names, (std::vector<std::string>{"a"}));
  EXPECT_EQ(shards[0].class_names, (std::vector<std::string>{"x", "y"}));
}

TEST(ReadCsvShard, FractionalLabelIsARegressionsNotAClass) {
  TempDir dir;
  const auto path = dir.write("real.csv", "a,label\n1,0\n2,1\n3,2.5\n");
  expect_same_error_everywhere(path, {},
                               path +
                                   ":4: column 2 (label): label '2.5' is not a class (an integer "
                                   "or a name); a real-valued label is a regression's (--set "
                                   "loss=squared_error)");
}

// Empty cells, NA, NaN and ? are missing: NaN when allowed (for an imputer), else an error
// that names the cell and the option.
TEST(ReadCsvShard, MissingValuesAreNaNWhenAllowed) {
  TempDir dir;
  const auto path = dir.write("gaps.csv", "a,b,y\n1,,0\nNA,4,1\n3,?,0\n\n5,NaN,1\n");
  expect_same_error_everywhere(path, {},
                               path +
                                   ":2: column 2 (b): missing value, expected a number; --impute "
                                   "mean|median fills missing values with the training column's "
                                   "statistic");
  CsvShardOptions o;
  o.missing_allowed = true;
  for (int world : kWorlds) {
    const LocalData all =
        concat(per_rank(world, [&](comm::Communicator& c) { return read_csv_shard(path, c, o); }));
    const std::vector<bool> missing = {false, true, true, false, false, true, false, true};
    ASSERT_EQ(all.x.size(), missing.size());
    for (std::size_t i = 0; i < missing.size(); ++i)
      EXPECT_EQ(std::isnan(all.x[i]), missing[i]) << "element " << i << ", world " << world;
  }
  // Non-numeric values are still errors.
  const auto word = dir.write("word.csv", "a,y\n1,0\nx,1\n");
  expect_same_error_everywhere(word, o, word + ":3: column 1 (a): 'x' is not a number");
}

TEST(ReadCsvShard, RegressionReadsRealTargets) {
  TempDir dir;
  const auto path = dir.write("r.csv", "x,price\n1,2.5\n2,-3\n3,1e2\n");
  CsvShardOptions o;
  o.regression = true;
  for (int world : kWorlds) {
    const LocalData all =
        concat(per_rank(world, [&](comm::Communicator& c) { return read_csv_shard(path, c, o); }));
    EXPECT_EQ(all.targets, (std::vector<double>{2.5, -3, 100}));
    EXPECT_TRUE(all.y.empty());
  }
}

TEST(ReadLibsvmShard, MatchesADenseExpectation) {
  TempDir dir;
  const auto path = dir.write("s.libsvm",
                              "1 1:0.5 3:2\n# a comment\n0 2:-1\r\n\n2 4:7 1:1  # trailing\n"
                              "1\n0 3:3");
  const std::vector<double> dense = {0.5, 0, 2, 0, 0, -1, 0, 0, 1, 0, 0, 7, 0, 0, 0, 0, 0, 0, 3, 0};
  for (int world : kWorlds) {
    SCOPED_TRACE(world);
    const LocalData all =
        concat(per_rank(world, [&](comm::Communicator& c) { return read_libsvm_shard(path, c); }));
    EXPECT_EQ(all.features, 4u);
    EXPECT_EQ(all.x, dense);
    EXPECT_EQ(all.y, (std::vector<std::int64_t>{1, 0, 2, 1, 0}));
    EXPECT_EQ(all.num_classes, 3);
  }
  LibsvmShardOptions real;
  real.regression = true;
  const auto targets =
      concat(per_rank(3, [&](comm::Communicator& c) { return read_libsvm_shard(path, c, real); }));
  EXPECT_EQ(targets.targets, (std::vector<double>{1, 0, 2, 1, 0}));
  LibsvmShardOptions wide;
  wide.features = 6;
  const auto shards =
      per_rank(2, [&](comm::Communicator& c) { return read_libsvm_shard(path, c, wide); });
  EXPECT_EQ(shards[0].features, 6u);
  const auto bad = dir.write("bad.libsvm", "1 1:2\n0 0:1\n1 x:2\n");
  const auto zero = dir.write("zero.libsvm", "1 1:2\n0 0:1\n");
  LibsvmShardOptions one_based;
  one_based.index_base = 1;
  for (int world : kWorlds) {
    for (const std::string& e :
         errors_per_rank(world, [&](comm::Communicator& c) { read_libsvm_shard(bad, c); }))
      EXPECT_EQ(e.substr(0, bad.size() + 4), bad + ":3: ") << e;
    for (const std::string& e : errors_per_rank(
             world, [&](comm::Communicator& c) { read_libsvm_shard(zero, c, one_based); }))
      EXPECT_NE(e.find(":2: feature index 0 in a file whose indices start at 1"), std::string::npos)
          << e;
  }
}

TEST(ReadLibsvmShard, RowsStaySparseWithEitherIndexBaseAndQid) {
  TempDir dir;
  // XGBoost's conventions: a file with an index 0 is 0-based; qid tags group rows (skipped).
  const auto zero = dir.write("z.libsvm", "1 qid:3 0:1.5 2:2\n-1 qid:3 1:4\n+1 qid:4\n");
  const auto one = dir.write("o.libsvm", "1 qid:3 1:1.5 3:2\n-1 qid:3 2:4\n+1 qid:4\n");
  for (int world : kWorlds) {
    SCOPED_TRACE(world);
    for (const auto& [path, base] : {std::pair{zero, 0}, std::pair{one, 1}}) {
      const auto shards =
          per_rank(world, [&](comm::Communicator& c) { return read_libsvm_shard(path, c); });
      std::size_t stored = 0;
      for (const LocalData& s : shards) {
        ASSERT_TRUE(s.sparse.has_value());
        EXPECT_TRUE(s.x.empty());
        EXPECT_EQ(shape_problem(s, "shard"), "");
        EXPECT_EQ(s.libsvm_index_base, base);
        stored += s.stored();
      }
      EXPECT_EQ(stored, 3u);
      const LocalData all = concat(shards);
      EXPECT_EQ(all.features, 3u);
      EXPECT_EQ(all.x, (std::vector<double>{1.5, 0, 2, 0, 4, 0, 0, 0, 0}));
      EXPECT_EQ(all.class_names, (std::vector<std::string>{"-1", "1"}));
      EXPECT_EQ(all.y, (std::vector<std::int64_t>{1, 0, 1}));
    }
  }
  // A repeated index and an index past a model's features are errors naming the line.
  const auto twice = dir.write("t.libsvm", "1 1:1\n0 2:1 2:3\n");
  LibsvmShardOptions narrow;
  narrow.features = 1;
  for (int world : kWorlds) {
    for (const std::string& e :
         errors_per_rank(world, [&](comm::Communicator& c) { read_libsvm_shard(twice, c); }))
      EXPECT_NE(e.find("t.libsvm:2: feature index 2 appears twice"), std::string::npos) << e;
    for (const std::string& e : errors_per_rank(
             world, [&](comm::Communicator& c) { read_libsvm_shard(twice, c, narrow); }))
      EXPECT_NE(e.find("t.libsvm:2: feature index 2 is beyond the 1 features"), std::string::npos)
          << e;
  }
}

TEST(ReadLibsvmShard, StringLabelsShareOneDictionary) {
  TempDir dir;
  const auto path = dir.write("t.libsvm", "b 1:1\na 1:2\nc 2:1\nb 1:3\n");
  for (int world : kWorlds) {
    const LocalData all =
        concat(per_rank(world, [&](comm::Communicator& c) { return read_libsvm_shard(path, c); }));
    EXPECT_EQ(all.class_names, (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_EQ(all.y, (std::vector<std::int64_t>{1, 0, 2, 1}));
  }
}

std::string idx_bytes(std::uint8_t type, std::vector<std::uint32_t> dims,
                      const std::vector<std::uint8_t>& data) {
  std::string s = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (std::uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) s += static_cast<char>((d >> shift) & 0xff);
  s.append(data.begin(), data.end());
  return s;
}

TEST(ReadIdxShard, RowsEqualTheWholeFileLoad) {
  TempDir dir;
  const std::uint32_t n = 5;
  std::vector<std::uint8_t> pixels(n * 3 * 2), labels(n);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i * 37);
  for (std::size_t i = 0; i < n; ++i) labels[i] = static_cast<std::uint8_t>((i * 3) % 4);
  const auto images_path = dir.write("img.idx", idx_bytes(0x08, {n, 3, 2}, pixels));
  const auto labels_path = dir.write("lab.idx", idx_bytes(0x08, {n}, labels));
  // Labels also as big-endian i32, which must read the same.
  std::vector<std::uint8_t> wide;
  for (std::uint8_t l : labels) wide.insert(wide.end(), {0, 0, 0, l});
  const auto wide_path = dir.write("lab32.idx", idx_bytes(0x0C, {n}, wide));
  const data::Dataset whole = data::load_idx_pair(images_path, labels_path);
  for (int world : kWorlds) {
    SCOPED_TRACE(world);
    const auto shards = per_rank(
        world, [&](comm::Communicator& c) { return read_idx_shard(images_path, labels_path, c); });
    for (int r = 0; r < world; ++r)
      EXPECT_EQ(shards[r].rows, comm::block_range(n, world, r).size());
    const LocalData all = concat(shards);
    EXPECT_EQ(all.features, 6u);
    ASSERT_EQ(all.x.size(), whole.features.size());
    for (std::size_t i = 0; i < all.x.size(); ++i) EXPECT_NEAR(all.x[i], whole.features[i], 1e-6);
    EXPECT_EQ(all.y, whole.labels);
    EXPECT_EQ(all.num_classes, 4);
    const LocalData all32 = concat(per_rank(
        world, [&](comm::Communicator& c) { return read_idx_shard(images_path, wide_path, c); }));
    EXPECT_EQ(all32.y, whole.labels);
  }
}

TEST(ReadIdxShard, GzipAndMismatchedCountsAreErrorsOnEveryRank) {
  TempDir dir;
  const auto images = dir.write("img.idx", idx_bytes(0x08, {2, 2}, {1, 2, 3, 4}));
  const auto three = dir.write("lab.idx", idx_bytes(0x08, {3}, {0, 1, 0}));
  const auto gz = dir.write("img.idx.gz", std::string("\x1f\x8b\x08\x00", 4) + "junk");
  const auto truncated = dir.write("short.idx", idx_bytes(0x08, {3, 2}, {1, 2, 3}));
  const std::pair<std::string, std::string> cases[] = {
      {images, three}, {gz, three}, {truncated, three}};
  const char* expected[] = {"expected equal counts", "gzip", "expected"};
  for (std::size_t k = 0; k < 3; ++k) {
    const auto errors = errors_per_rank(
        3, [&](comm::Communicator& c) { read_idx_shard(cases[k].first, cases[k].second, c); });
    for (const std::string& e : errors) {
      EXPECT_EQ(e, errors[0]);
      EXPECT_NE(e.find(expected[k]), std::string::npos) << e;
    }
  }
}

// Rows [block of n] of a fixed n x 3 matrix whose last column is constant.
LocalData block_of_matrix(std::size_t n, comm::Communicator& c) {
  LocalData d;
  d.features = 3;
  const comm::BlockRange b = comm::block_range(n, c.size(), c.rank());
  for (std::size_t i = b.begin; i < b.end; ++i) {
    d.x.push_back(std::sin(static_cast<double>(i)) * 10 + 3);
    d.x.push_back(static_cast<double>(i) * 0.5);
    d.x.push_back(0.1);
  }
  d.rows = b.size();
  d.global_rows = n;
  return d;
}

TEST(Standardizer, EqualsADirectComputationAtEveryWorldSize) {
  const std::size_t n = 50;
  LocalData whole;
  comm::local::run_ranks(1, {}, [&](comm::Communicator& c) { whole = block_of_matrix(n, c); });
  std::vector<double> mean(3, 0), scale(3, 0);
  for (std::size_t i = 0; i < n; ++i)
    for (int c = 0; c < 3; ++c) mean[c] += whole.x[i * 3 + c] / n;
  for (std::size_t i = 0; i < n; ++i)
    for (int c = 0; c < 3; ++c) scale[c] += std::pow(whole.x[i * 3 + c] - mean[c], 2) / n;
  for (double& s : scale) s = std::sqrt(s);
  scale[2] = 1;  // constant column
  for (int world : kWorlds) {
    const auto fits = per_rank(world, [&](comm::Communicator& c) {
      LocalData d = block_of_matrix(n, c);
      const Standardizer s = fit_standardizer(d, c);
      s.apply(d);
      return std::make_pair(s, d);
    });
    for (const auto& [s, d] : fits) {
      for (int c = 0; c < 3; ++c) {
        EXPECT_NEAR(s.mean[c], mean[c], 1e-12);
        EXPECT_NEAR(s.scale[c], scale[c], 1e-12);
      }
      for (std::size_t i = 0; i < d.rows; ++i) EXPECT_NEAR(d.x[i * 3 + 2], 0.0, 1e-12);
    }
    const Standardizer back = Standardizer::from_json(fits[0].first.to_json());
    EXPECT_EQ(back.mean, fits[0].first.mean);
    EXPECT_EQ(back.scale, fits[0].first.scale);
  }
  EXPECT_THROW(Standardizer::from_json({{"mean", {1.0}}}), DataError);
}

TEST(TrainTestSplit, IsIndependentOfTheWorldSizeAndRoughlySized) {
  const std::size_t n = 1000;
  std::set<double> reference;
  for (int world : {1, 2, 3, 4, 7}) {
    const auto halves = per_rank(world, [&](comm::Communicator& c) {
      LocalData d = block_of_matrix(n, c);
      d.y.assign(d.rows, 1);
      d.num_classes = 2;
      return train_test_split(d, 0.25, 42, c);
    });
    std::set<double> test_rows;  // identified by column 1, which is the global index / 2
    std::size_t train_rows = 0;
    for (const auto& [train, test] : halves) {
      EXPECT_EQ(train.global_rows + test.global_rows, n);
      EXPECT_EQ(test.num_classes, 2);
      EXPECT_EQ(test.y.size(), test.rows);
      for (std::size_t i = 0; i < test.rows; ++i) test_rows.insert(test.row(i)[1]);
      train_rows += train.rows;
    }
    EXPECT_EQ(test_rows.size() + train_rows, n);
    EXPECT_EQ(test_rows.size(), halves[0].second.global_rows);
    EXPECT_NEAR(static_cast<double>(test_rows.size()), 250.0, 60.0);
    if (world == 1) reference = test_rows;
    EXPECT_EQ(test_rows, reference) << "world " << world;
  }
}

TEST(TrainTestSplit, MoreRanksThanRowsAndBadFraction) {
  const auto halves = per_rank(
      7, [&](comm::Communicator& c) { return train_test_split(block_of_matrix(3, c), 0.5, 1, c); });
  for (const auto& [train, test] : halves) EXPECT_EQ(train.global_rows + test.global_rows, 3u);
  EXPECT_THROW(per_rank(2,
                        [&](comm::Communicator& c) {
                          return train_test_split(block_of_matrix(3, c), 1.5, 1, c);
                        }),
               ConfigError);
}

}  // namespace
}  // namespace distml::ml
