// External environments (exec:COMMAND): the protocol against a well-behaved process, and every
// way a broken one fails: an EnvError with its words or line, how it ended, and no hang.
#include "distml/rl/envs/exec_env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "distml/core/error.h"
#include "distml/rl/envs/exec_protocol.h"
#include "distml/rl/envs/vector_env.h"

namespace distml::rl {
namespace {

using ::testing::HasSubstr;

const std::string kBroken = "python3 " DISTML_TEST_DIR "/broken_env.py ";
const std::string kCorridor = "python3 " DISTML_EXAMPLES_DIR "/rl/exec/corridor.py";

// The message of the EnvError that `fn` throws.
template <class Fn>
std::string env_error_of(Fn fn) {
  try {
    fn();
  } catch (const EnvError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no EnvError";
  return "";
}

TEST(ExecEnv, SpeaksTheProtocolWithAPythonEnvironment) {
  ExecEnv env(kCorridor, {});
  EXPECT_EQ(env.name(), "exec:" + kCorridor);
  ASSERT_TRUE(env.action_space().is_discrete());
  EXPECT_EQ(env.action_space().n, 2);
  EXPECT_EQ(env.observation_space().size(), 1);
  EXPECT_EQ(env.observation_space().high[0], 1.0f);
  EXPECT_EQ(env.reset(4), std::vector<float>{0.1f});  // seed 4: cell 4 % 3 = 1
  StepResult r;
  for (int t = 0; t < 9; ++t) r = env.step(std::vector<float>{1});
  EXPECT_TRUE(r.terminated);
  EXPECT_FALSE(r.truncated);
  // Python's 1.0 - 0.01 is the double nearest 0.99, json writes it as "0.99" and the parser reads
  // that nearest double back: equal up to the last bit, so 1e-12 only allows for the text trip.
  EXPECT_NEAR(r.reward, 0.99, 1e-12);
  EXPECT_EQ(r.observation, std::vector<float>{1.0f});
}

TEST(ExecEnv, ABrokenDeclarationOrACommandThatDoesNotRunFailsAtStart) {
  EXPECT_THAT(env_error_of([] { ExecEnv env(kBroken + "hello 0", {}); }),
              HasSubstr("did not start: its \"action_space\" is not an object"));
  EXPECT_THAT(env_error_of([] { ExecEnv env("printf 'hello\\n'", {}); }),
              HasSubstr("did not start: sent a line that is not JSON: hello"));
  const std::string missing = env_error_of([] { ExecEnv env("no-such-command-here", {}); });
  EXPECT_THAT(missing, HasSubstr("environment 'exec:no-such-command-here' did not start"));
  EXPECT_THAT(missing, HasSubstr("exited with status 127"));
}

// Through VectorEnv, as actors step it: the error names the environment, the copy and the step.
TEST(ExecEnv, EveryBreakageMidEpisodeNamesTheEnvironmentAndTheStep) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"bad-line", "sent a line that is not JSON: observation = 0.5"},
      {"exit", "closed its output before answering (it exited with status 3)"},
      {"error", "reports an error: the simulator blew up"},
      {"short", "its answer needs \"observation\": 1 numbers"},
  };
  for (const auto& [mode, words] : cases) {
    VectorEnv envs("exec:" + kBroken + mode + " 3", 1, 1);
    const std::string message = env_error_of([&] {
      for (int t = 0; t < 5; ++t) envs.step(std::vector<float>{1});
    });
    EXPECT_THAT(message, HasSubstr("environment 'exec:" + kBroken + mode + " 3'")) << mode;
    EXPECT_THAT(message, HasSubstr("copy 0, step 3 of episode 1")) << mode;
    EXPECT_THAT(message, HasSubstr(words)) << mode;
  }
}

TEST(ExecEnv, ASilentEnvironmentTimesOut) {
  ExecEnv env(kBroken + "hang 1", {.timeout_s = 0.5});
  env.reset(0);
  // Without the timeout this step would wait out the process's hour of sleep and the test's
  // own time limit would fail it; stopping the env must end the sleeping process too.
  EXPECT_THAT(env_error_of([&] { env.step(std::vector<float>{0}); }),
              HasSubstr("sent no answer within 0.5 s"));
}

// What an environment writes that breaks the protocol's numbers: a number beyond a double,
// one beyond a float where floats are read, a space too large to allocate. Each is an
// EnvError saying so (found by fuzz/exec_protocol.cc).
TEST(ExecProtocol, NumbersAndSpacesBeyondWhatTheyAreReadIntoAreRefused) {
  EXPECT_THAT(env_error_of([] { exec_protocol::read_declaration(R"({"distml_env": 1e400})"); }),
              HasSubstr("not JSON"));
  EXPECT_THAT(env_error_of([] {
                exec_protocol::read_declaration(
                    R"({"distml_env": 1, "observation_space": {"shape": [4000000000, 4]},)"
                    R"( "action_space": {"n": 2}})");
              }),
              HasSubstr("holds more than 16777216 values"));
  const auto declared = exec_protocol::read_declaration(
      R"({"distml_env": 1, "observation_space": {"shape": [1]}, "action_space": {"n": 2}})");
  EXPECT_THAT(env_error_of([&] {
                exec_protocol::observation_in(
                    exec_protocol::read_answer(R"({"observation": [1e300]})"),
                    declared.observation);
              }),
              HasSubstr("needs \"observation\": 1 numbers"));
}

}  // namespace
}  // namespace distml::rl
