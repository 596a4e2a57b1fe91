// The profile's JSON: written and read back, and every mistake named by its key.
#include "distml/sim/profile.h"

#include <gtest/gtest.h>

#include "distml/core/error.h"

namespace distml::sim {
namespace {

Profile sample() {
  Profile p;
  p.model = "lenet5";
  p.dtype = "float32";
  p.engine = "gloo";
  p.batch_size = 64;
  p.steps = 99;
  p.data_s = 1e-4;
  p.forward_s = 2e-3;
  p.backward_s = 4e-3;
  p.optimizer_s = 5e-4;
  p.step_s = 7e-3;
  p.parameters = {{"conv1.weight", 600, 4e-3, {6, 1, 5, 5}}, {"fc3.bias", 40, 1e-3}};
  p.layer_names = {"conv1", "fc3"};
  p.layers = {{16, {{1e-3, 2e-3, 4096, 600, 1e-5, 1e-6}, {2e-4, 3e-4, 40, 40, 1e-6, 1e-7}}},
              {64, {{4e-3, 8e-3, 16384, 600, 1e-5, 1e-6}, {6e-4, 9e-4, 160, 40, 1e-6, 1e-7}}}};
  return p;
}

std::string error_of(const nlohmann::json& j) {
  try {
    profile_from_json(j, "p.json");
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

TEST(Profile, ReadsBackWhatItWrites) {
  const auto j = profile_json(sample());
  const auto back = profile_from_json(j, "p.json");
  EXPECT_EQ(profile_json(back), j);
  EXPECT_EQ(back.gradient_bytes(), 640);
}

TEST(Profile, NamesTheKeyThatIsMissingOrWrong) {
  auto j = profile_json(sample());
  j.erase("backward_s");
  EXPECT_EQ(error_of(j), "p.json: no \"backward_s\"");
  j = profile_json(sample());
  j["steps"] = "many";
  EXPECT_EQ(error_of(j), "p.json: \"steps\" is \"many\", not a number");
  j = profile_json(sample());
  j["parameters"][1]["bytes"] = -4;
  EXPECT_EQ(error_of(j), "p.json: parameters[1]: \"bytes\" is negative (-4)");
  j = profile_json(sample());
  j["parameters"][0]["shape"] = {6, -1};
  EXPECT_EQ(error_of(j), "p.json: parameters[0]: \"shape\" is [6,-1], not a list of sizes");
  j = profile_json(sample());
  j["version"] = 2;
  EXPECT_EQ(error_of(j), "p.json: profile version 2; this distml reads version 1");
  EXPECT_NE(error_of(nlohmann::json{{"traceEvents", 1}}).find("not a distml profile"),
            std::string::npos);
  j = profile_json(sample());
  j["layers"][1]["costs"].erase(1);
  EXPECT_EQ(error_of(j), "p.json: layers[1]: expected \"costs\", one per layer name (2)");
  j = profile_json(sample());
  j["layers"][1]["rows"] = 8;
  EXPECT_EQ(error_of(j), "p.json: layers[1]: \"rows\" must be at least 1 and ascending");
}

TEST(Profile, LayersAtAMicroBatchScaleTheNearestMeasuredAbove) {
  const Profile p = sample();
  // 8 rows: the 16-row measurement at half its times and activations, its parameters whole.
  const auto at8 = p.layers_at(8);
  ASSERT_EQ(at8.size(), 2u);
  EXPECT_DOUBLE_EQ(at8[0].forward_s, 0.5e-3);
  EXPECT_DOUBLE_EQ(at8[0].output_bytes, 2048);
  EXPECT_DOUBLE_EQ(at8[0].parameter_bytes, 600);
  EXPECT_DOUBLE_EQ(p.layers_at(32)[1].backward_s, 9e-4 / 2);  // from the 64 rows
  EXPECT_DOUBLE_EQ(p.layers_at(64)[0].backward_s, 8e-3);      // as measured
  EXPECT_DOUBLE_EQ(p.layers_at(128)[0].forward_s, 8e-3);      // past the largest: scaled up
  EXPECT_TRUE(Profile{}.layers_at(8).empty());
}

}  // namespace
}  // namespace distml::sim
