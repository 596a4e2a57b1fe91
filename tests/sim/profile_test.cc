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
  p.parameters = {{"conv1.weight", 600, 4e-3}, {"fc3.bias", 40, 1e-3}};
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
  j["version"] = 2;
  EXPECT_EQ(error_of(j), "p.json: profile version 2; this distml reads version 1");
  EXPECT_NE(error_of(nlohmann::json{{"traceEvents", 1}}).find("not a distml profile"),
            std::string::npos);
}

}  // namespace
}  // namespace distml::sim
