// The messages of the exec: environment protocol (exec_env.h), each read from one line the
// environment's process wrote: what distml reads from outside, kept apart from the process
// handling so that it can be checked (and fuzzed) on its own. Every function throws EnvError
// saying what the line lacks, without the environment's name (ExecEnv adds it).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "distml/rl/envs/env.h"

namespace distml::rl::exec_protocol {

struct Declaration {
  Space observation, action;
};

/// The first line: {"distml_env": 1, "observation_space": {...}, "action_space": {...}}.
Declaration read_declaration(const std::string& line);

/// An answer: a JSON object that is not {"error": ...}.
nlohmann::json read_answer(const std::string& line);

/// The answer's "observation": as many numbers as `space` holds.
std::vector<float> observation_in(const nlohmann::json& answer, const Space& space);

/// A step's answer: the observation, "reward" (a number), "terminated" and "truncated"
/// (booleans).
StepResult step_in(const nlohmann::json& answer, const Space& observation_space);

/// A line as messages show it: at most 200 characters.
std::string shown(const std::string& line);

}  // namespace distml::rl::exec_protocol
