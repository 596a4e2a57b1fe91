// Loading the [data] section: the bundled data sets' errors, CSV splits and class names, text
// windows.
#include "distml/train/task_data.h"

#include <gtest/gtest.h>

#include "../data/temp_dir.h"
#include "distml/core/error.h"

namespace distml::train {
namespace {

using data::testing::TempDir;

std::string error_of(const DataConfig& c) {
  try {
    load_task_data(c, 1);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TaskData, MissingMnistNamesThePathAndMakeData) {
  DataConfig c;
  c.path = "/nonexistent/mnist";
  auto what = error_of(c);
  EXPECT_NE(what.find("/nonexistent/mnist/train-images-idx3-ubyte"), std::string::npos) << what;
  EXPECT_NE(what.find("make data"), std::string::npos) << what;
}

TEST(TaskData, CsvSplitsOffTheTestFractionAndKeepsEveryRowOnce) {
  TempDir dir;
  std::string text = "a,b,species\n";
  for (int i = 0; i < 20; ++i)
    text += std::to_string(i) + "," + std::to_string(-i) + "," + (i % 2 ? "cat" : "dog") + "\n";
  DataConfig c;
  c.dataset = "csv";
  c.path = dir.write("pets.csv", text);
  c.label = "species";
  c.test_fraction = 0.25;
  auto t = load_task_data(c, 3);
  EXPECT_EQ(t.num_classes, 2);
  EXPECT_EQ(t.test.num_samples, 5u);
  EXPECT_EQ(t.train.num_samples, 15u);
  std::vector<int> seen(20, 0);
  for (const auto* d : {&t.train, &t.test})
    for (std::size_t i = 0; i < d->num_samples; ++i) {
      const int row = static_cast<int>(d->row(i)[0]);
      ++seen[row];
      EXPECT_EQ(d->class_names[d->labels[i]], row % 2 ? "cat" : "dog");
    }
  for (int row = 0; row < 20; ++row) EXPECT_EQ(seen[row], 1) << "row " << row;
}

TEST(TaskData, CsvTestFileGetsTheTrainingFilesClassIds) {
  TempDir dir;
  DataConfig c;
  c.dataset = "csv";
  c.path = dir.write("train.csv", "x,y\n1,dog\n2,cat\n");
  c.test_path = dir.write("test.csv", "x,y\n3,cat\n4,dog\n");
  auto t = load_task_data(c, 1);
  EXPECT_EQ(t.test.labels, (std::vector<std::int64_t>{1, 0}));  // dog = 0, cat = 1 from train
  c.test_path = dir.write("bad.csv", "x,y\n3,bird\n");
  EXPECT_NE(error_of(c).find("class 'bird' does not occur in the training file"),
            std::string::npos);
}

TEST(TaskData, NegativeCsvLabelIsOutOfRange) {
  TempDir dir;
  DataConfig c;
  c.dataset = "csv";
  c.path = dir.write("train.csv", "x,y\n1,0\n2,-1\n3,1\n");
  c.test_path = c.path;
  EXPECT_NE(error_of(c).find("label -1 of sample 1 is outside [0, 2)"), std::string::npos)
      << error_of(c);
}

TEST(TaskData, TextWindowsHoldInputsThenTheLastTarget) {
  TempDir dir;
  DataConfig c;
  c.dataset = "text";
  c.path = dir.write("t.txt", "abcabcabcabcab");  // 14 characters: 4 windows of 3 (+1)
  c.seq_len = 3;
  c.test_fraction = 0.25;
  auto t = load_task_data(c, 1);
  EXPECT_EQ(t.kind, TaskKind::language_model);
  EXPECT_EQ(t.num_classes, 3);
  ASSERT_EQ(t.train.num_samples, 3u);
  ASSERT_EQ(t.test.num_samples, 1u);
  EXPECT_EQ(t.train.feature_dim, 4u);
  // Window 1: characters 3..6, "abca" (a = 0, b = 1, c = 2).
  const float* w = t.train.row(1);
  EXPECT_EQ(std::vector<float>(w, w + 4), (std::vector<float>{0, 1, 2, 0}));
  const float* last = t.test.row(0);  // window 3: characters 9..12 = "abca"
  EXPECT_EQ(std::vector<float>(last, last + 4), (std::vector<float>{0, 1, 2, 0}));
}

}  // namespace
}  // namespace distml::train
