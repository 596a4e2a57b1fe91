#include "distml/ml/model_file.h"

#include <gtest/gtest.h>

#include "../data/temp_dir.h"
#include "distml/core/error.h"

namespace distml::ml {
namespace {

using data::testing::TempDir;

TEST(ModelFile, RoundTripAndEstimatorCheck) {
  TempDir dir;
  const auto path = dir.file("m.json");
  save_model_file(path, {{"estimator", "kmeans"}, {"k", 3}});
  EXPECT_EQ(load_model_file(path, "kmeans")["k"], 3);
  EXPECT_THROW(load_model_file(path, "logreg"), DataError);
  EXPECT_THROW(load_model_file(dir.write("bad.json", "{not json")), DataError);
  EXPECT_THROW(load_model_file(dir.file("missing.json")), DataError);
}

}  // namespace
}  // namespace distml::ml
