#include "distml/data/csv_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "distml/core/error.h"
#include "temp_dir.h"

namespace distml::data {
namespace {

using testing::TempDir;

std::string data_error(const std::string& path, const CsvOptions& o = {}) {
  try {
    read_csv(path, o);
  } catch (const DataError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no DataError for " << path;
  return "";
}

TEST(ReadCsv, ReadsNumericFeaturesAndIntegerLabelInLastColumn) {
  TempDir dir;
  const std::string path = dir.write("a.csv", "x,y,label\r\n1.5,-2,0\r\n\r\n3e2, +4 ,2\r\n");
  const Dataset ds = read_csv(path);
  EXPECT_EQ(ds.num_samples, 2u);
  EXPECT_EQ(ds.feature_dim, 2u);
  EXPECT_EQ(ds.features, (std::vector<float>{1.5f, -2.0f, 300.0f, 4.0f}));
  EXPECT_EQ(ds.labels, (std::vector<std::int64_t>{0, 2}));
  EXPECT_TRUE(ds.class_names.empty());
}

TEST(ReadCsv, MapsStringLabelsToIdsInOrderOfFirstAppearance) {
  TempDir dir;
  const std::string path =
      dir.write("iris.csv", "a,b,species\n1,2,virginica\n3,4,\"setosa\"\n5,6,virginica\n7,8,x\n");
  const Dataset ds = read_csv(path);
  EXPECT_EQ(ds.labels, (std::vector<std::int64_t>{0, 1, 0, 2}));
  EXPECT_EQ(ds.class_names, (std::vector<std::string>{"virginica", "setosa", "x"}));
  const Dataset forced = read_csv(dir.write("n.csv", "a,c\n1,5\n2,3\n3,5\n"),
                                  CsvOptions().label_kind(LabelKind::kString));
  EXPECT_EQ(forced.labels, (std::vector<std::int64_t>{0, 1, 0}));
  EXPECT_EQ(forced.class_names, (std::vector<std::string>{"5", "3"}));
}

TEST(ReadCsv, ChoosesTheLabelColumnByNameOrIndex) {
  TempDir dir;
  const std::string path = dir.write("m.csv", "f1,cls,f2\n1,7,2\n3,8,4\n");
  const std::vector<float> features = {1, 2, 3, 4};
  const std::vector<std::int64_t> labels = {7, 8};
  for (const CsvOptions& o : {CsvOptions().label_name("cls"), CsvOptions().label_index(1),
                              CsvOptions().label_index(-2)}) {
    const Dataset ds = read_csv(path, o);
    EXPECT_EQ(ds.features, features);
    EXPECT_EQ(ds.labels, labels);
  }
  EXPECT_NE(data_error(path, CsvOptions().label_name("nope")).find("'nope'"), std::string::npos);
  EXPECT_NE(data_error(path, CsvOptions().label_index(3)).find("index 3"), std::string::npos);
}

TEST(ReadCsv, BadValueNamesFileLineAndColumn) {
  TempDir dir;
  const std::string bad = dir.write("bad.csv", "x,y,label\n1,2,0\n\n3,oops,1\n");
  const std::string msg = data_error(bad);
  EXPECT_NE(msg.find(bad + ":4: column 2 (y)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'oops' is not a number"), std::string::npos) << msg;

  const std::string missing = dir.write("missing.csv", "x,y,label\n1,,0\n");
  EXPECT_NE(data_error(missing).find(":2: column 2 (y): missing value"), std::string::npos);
  const std::string nan = dir.write("nan.csv", "x,y,label\n1,2,0\nnan,2,0\n");
  EXPECT_NE(data_error(nan).find(":3: column 1 (x)"), std::string::npos);
  const std::string fields = dir.write("fields.csv", "x,y,label\n1,2\n");
  EXPECT_NE(data_error(fields).find(":2: 2 fields, expected 3"), std::string::npos);
  const std::string label = dir.write("label.csv", "x,label\n1,2\n1,two\n");
  EXPECT_NE(data_error(label, CsvOptions().label_kind(LabelKind::kInteger))
                .find(":3: column 2 (label): label 'two' is not an integer"),
            std::string::npos);
  EXPECT_NE(data_error(dir.file("absent.csv")).find("absent.csv"), std::string::npos);
}

}  // namespace
}  // namespace distml::data
