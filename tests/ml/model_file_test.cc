#include "distml/ml/model_file.h"

#include <gtest/gtest.h>

#include "../data/temp_dir.h"
#include "distml/core/error.h"
#include "distml/ml/saved_model.h"

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

// What distml predict reads of a model file, and what a damaged one gives: a DataError naming
// the file and the field, not an untyped error or undefined behaviour (found by
// fuzz/model_json.cc): an integer field holding a number beyond an int, an option its fit
// would have refused, an imputer for another number of features.
TEST(SavedModel, ADamagedModelFileIsADataErrorNamingTheFileAndField) {
  TempDir dir;
  const nlohmann::json kmeans = {
      {"estimator", "kmeans"},
      {"version", 1},
      {"options", {{"k", 1}}},
      {"features", 2},
      {"centroids", {{0.0, 0.5}}},
      {"iterations", 1},
      {"inertia", 0.0},
      {"preprocessing", {{"features", 2}, {"class_names", nlohmann::json::array()}}}};
  const auto path = dir.file("kmeans.json");
  save_model_file(path, kmeans);
  const auto read = read_saved_model(path);
  EXPECT_EQ(read.features, 2u);
  EXPECT_EQ(read.estimator_name, "kmeans");
  const auto refused = [&](nlohmann::json model, const std::string& says) {
    save_model_file(path, model);
    try {
      read_saved_model(path);
      ADD_FAILURE() << "read: " << model.dump();
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  auto model = kmeans;
  model["iterations"] = -2.2e96;
  refused(model, "field \"iterations\" is -2.2e+96, not a whole number");
  model = kmeans;
  model["options"]["max_iter"] = 1e99;
  refused(model, "option \"max_iter\" is 1e+99, not a whole number");
  model = kmeans;
  model["preprocessing"]["features"] = 1.5;
  refused(model, "field \"features\" is 1.5");
  model = kmeans;
  model["preprocessing"]["imputer"] = {{"strategy", "mean"}, {"values", {1.0, 2.0, 3.0}}};
  refused(model, "another number of features");
  model = kmeans;
  model.erase("preprocessing");
  refused(model, "\"preprocessing\"");
}

}  // namespace
}  // namespace distml::ml
