// An environment in another process, env.name = "exec:COMMAND": distml starts COMMAND with
// /bin/sh -c once per environment copy and speaks JSON lines with it over the process's stdin and
// stdout (its stderr stays distml's). The protocol, one JSON object per line:
//  1. The environment's first line declares it and its spaces:
//       {"distml_env": 1, "observation_space": {"shape": [4]}, "action_space": {"n": 2}}
//     "n": discrete actions 0..n-1; or continuous ones with their bounds:
//       "action_space": {"shape": [1], "low": [-2.0], "high": [2.0]}
//     ("observation_space" may carry "low" and "high" too; shapes are flattened.)
//  2. distml sends {"reset": SEED} (an unsigned 64-bit integer); the answer is
//       {"observation": [...]}
//  3. distml sends {"step": [a, ...]} (one number per action dimension; a discrete action is
//     [index]); the answer is
//       {"observation": [...], "reward": R, "terminated": false, "truncated": false}
//  4. Any answer may instead be {"error": "what went wrong"}.
//  5. When distml is done it closes the environment's stdin; the process should then exit (2 s
//     later it is killed, with every process it started).
// An answer that breaks the protocol, a process that exits early, or one silent for
// EnvOptions::timeout_s is an EnvError with the environment's own words or line.
// examples/rl/exec/distml_env.py serves any Gymnasium-style environment this way.
#pragma once

#include <sys/types.h>

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "distml/rl/envs/env.h"

namespace distml::rl {

class ExecEnv final : public Env {
 public:
  /// Starts `command` and reads its declaration; EnvError naming "exec:command" if it does not
  /// start or declares itself wrongly.
  ExecEnv(std::string command, const EnvOptions& options);
  ~ExecEnv() override;
  ExecEnv(const ExecEnv&) = delete;
  ExecEnv& operator=(const ExecEnv&) = delete;

  std::string_view name() const override { return name_; }
  const Space& observation_space() const override { return observation_space_; }
  const Space& action_space() const override { return action_space_; }
  /// EnvError without the environment's name (the caller knows the copy and the step).
  std::vector<float> reset(std::uint64_t seed) override;
  StepResult step(std::span<const float> action) override;

 private:
  // Sends `request` and returns the answer, checked for {"error": ...} (exec_protocol.h).
  nlohmann::json exchange(const nlohmann::json& request);
  std::string read_line();
  void write_line(const std::string& line);
  // EnvError(why), with how the process ended if it has.
  [[noreturn]] void fail(const std::string& why);
  // Closes the socket, lets the process exit (2 s) or kills it, and reaps it.
  void stop();

  std::string name_;
  double timeout_s_;
  int fd_ = -1;  // our end of the socket that is the process's stdin and stdout
  pid_t pid_ = -1;
  std::string buffer_;  // bytes read past the last line
  Space observation_space_, action_space_;
};

}  // namespace distml::rl
