#include "distml/rl/envs/exec_env.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>

#include "distml/core/error.h"

extern char** environ;

namespace distml::rl {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kLongestLine = 64 << 20;

// A line as a message shows it: at most 200 characters.
std::string shown(const std::string& line) {
  return line.size() <= 200 ? line : line.substr(0, 200) + "...";
}

// How a finished process ended, or "" while it runs (waited for up to `wait`).
std::string ending_of(pid_t pid, std::chrono::milliseconds wait) {
  const auto deadline = Clock::now() + wait;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status)) return cat("it exited with status ", WEXITSTATUS(status));
      if (WIFSIGNALED(status)) return cat("it was killed by signal ", WTERMSIG(status));
      return "it ended";
    }
    if (r < 0 || Clock::now() > deadline) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Numbers of a JSON array, flattened; false if it is not an array of numbers.
bool numbers(const Json& j, std::vector<float>& out) {
  if (!j.is_array()) return false;
  for (const Json& v : j) {
    if (!v.is_number()) return false;
    out.push_back(v.get<float>());
  }
  return true;
}

// The space a declaration describes: {"n": K} or {"shape": [...], "low": [...], "high": [...]}.
Space space_of(const Json& j, const char* key, bool bounds_required) {
  const std::string where = cat("its \"", key, "\"");
  if (!j.is_object()) throw EnvError(cat(where, " is not an object"));
  if (j.contains("n")) {
    if (!j["n"].is_number_integer() || j["n"].get<long long>() < 1)
      throw EnvError(cat(where, ": \"n\" must be a whole number >= 1"));
    return Space::discrete(j["n"].get<int>());
  }
  if (!j.contains("shape") || !j["shape"].is_array() || j["shape"].empty())
    throw EnvError(cat(where, " needs \"n\" (discrete) or \"shape\" (a box)"));
  std::size_t size = 1;
  for (const Json& d : j["shape"]) {
    if (!d.is_number_integer() || d.get<long long>() < 1)
      throw EnvError(cat(where, ": \"shape\" must hold whole numbers >= 1"));
    size *= d.get<std::size_t>();
  }
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> low, high;
  if (j.contains("low") || j.contains("high") || bounds_required) {
    if (!numbers(j.value("low", Json()), low) || !numbers(j.value("high", Json()), high) ||
        low.size() != size || high.size() != size)
      throw EnvError(cat(where, " needs \"low\" and \"high\": ", size, " numbers each"));
    for (std::size_t i = 0; i < size; ++i)
      if (!(low[i] <= high[i]) ||
          (bounds_required && !(std::isfinite(low[i]) && std::isfinite(high[i]))))
        throw EnvError(cat(where, ": low[", i, "] = ", low[i], " and high[", i, "] = ", high[i],
                           " are no bounds"));
  } else {
    low.assign(size, -inf);
    high.assign(size, inf);
  }
  return Space::box(std::move(low), std::move(high));
}

}  // namespace

ExecEnv::ExecEnv(std::string command, const EnvOptions& options)
    : name_("exec:" + command), timeout_s_(options.timeout_s) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw EnvError(cat("environment '", name_, "': socketpair: ", std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, sv[1], 0);  // dup2 clears close-on-exec
  posix_spawn_file_actions_adddup2(&actions, sv[1], 1);
  // Its own process group, so that stop() also ends what the shell started (a shell may fork
  // the command rather than exec it, and a killed shell would leave it running).
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  std::string sh = "sh", dash_c = "-c";
  char* argv[] = {sh.data(), dash_c.data(), command.data(), nullptr};
  const int spawned = posix_spawn(&pid_, "/bin/sh", &actions, &attributes, argv, environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  close(sv[1]);
  fd_ = sv[0];
  if (spawned != 0) {
    close(fd_);
    throw EnvError(cat("environment '", name_, "' did not start: ", std::strerror(spawned)));
  }
  try {
    const Json hello = read_message();
    if (!hello.is_object() || hello.value("distml_env", Json()) != 1)
      fail(
          cat("its first line must declare it, like {\"distml_env\": 1, \"observation_space\": "
              "{\"shape\": [4]}, \"action_space\": {\"n\": 2}}; got ",
              shown(hello.dump())));
    observation_space_ = space_of(hello.value("observation_space", Json()), "observation_space",
                                  /*bounds_required=*/false);
    if (observation_space_.is_discrete())
      fail("\"observation_space\" must be a box (\"shape\"), not discrete");
    action_space_ = space_of(hello.value("action_space", Json()), "action_space",
                             /*bounds_required=*/true);
  } catch (const EnvError& e) {
    stop();  // no destructor runs for a constructor that throws
    throw EnvError(cat("environment '", name_, "' did not start: ", e.what()));
  }
}

ExecEnv::~ExecEnv() { stop(); }

void ExecEnv::stop() {
  if (fd_ >= 0) close(fd_);  // the process reads end-of-file and should exit
  fd_ = -1;
  if (pid_ <= 0) return;
  if (ending_of(pid_, std::chrono::milliseconds(2000)).empty()) {
    kill(-pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  } else {
    kill(-pid_, SIGKILL);  // whatever the shell left behind
  }
  pid_ = -1;
}

void ExecEnv::fail(const std::string& why) {
  const std::string ending = ending_of(pid_, std::chrono::milliseconds(500));
  throw EnvError(ending.empty() ? why : cat(why, " (", ending, ")"));
}

void ExecEnv::write_line(const std::string& line) {
  const std::string text = line + "\n";
  std::size_t sent = 0;
  while (sent < text.size()) {
    const ssize_t n = send(fd_, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(cat("cannot be written to: ", std::strerror(errno)));
    sent += static_cast<std::size_t>(n);
  }
}

std::string ExecEnv::read_line() {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
  for (;;) {
    if (const auto end = buffer_.find('\n'); end != std::string::npos) {
      std::string line = buffer_.substr(0, end);
      buffer_.erase(0, end + 1);
      return line;
    }
    if (buffer_.size() > kLongestLine) fail("sent a line longer than 64 MiB");
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) fail(cat("sent no answer within ", timeout_s_, " s"));
    pollfd p{fd_, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) fail(cat("cannot be read: ", std::strerror(errno)));
    if (ready <= 0) continue;
    char chunk[1 << 16];
    const ssize_t n = read(fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(cat("cannot be read: ", std::strerror(errno)));
    if (n == 0)
      fail(buffer_.empty() ? "closed its output before answering"
                           : cat("closed its output in the middle of a line: ", shown(buffer_)));
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
}

Json ExecEnv::read_message() {
  const std::string line = read_line();
  try {
    return Json::parse(line);
  } catch (const Json::parse_error&) {
    fail(cat("sent a line that is not JSON: ", shown(line)));
  }
}

Json ExecEnv::exchange(const Json& request) {
  write_line(request.dump());
  Json answer = read_message();
  if (!answer.is_object()) fail(cat("answered with ", shown(answer.dump()), ", not an object"));
  if (answer.contains("error"))
    fail(cat("reports an error: ", answer["error"].is_string() ? answer["error"].get<std::string>()
                                                               : answer["error"].dump()));
  return answer;
}

std::vector<float> ExecEnv::observation_of(const Json& answer) const {
  std::vector<float> observation;
  if (!numbers(answer.value("observation", Json()), observation) ||
      static_cast<int>(observation.size()) != observation_space_.size())
    throw EnvError(cat("its answer needs \"observation\": ", observation_space_.size(),
                       " numbers; got ", shown(answer.dump())));
  return observation;
}

std::vector<float> ExecEnv::reset(std::uint64_t seed) {
  return observation_of(exchange({{"reset", seed}}));
}

StepResult ExecEnv::step(std::span<const float> action) {
  if (static_cast<int>(action.size()) != action_space_.size())
    throw EnvError(
        cat("an action of ", action.size(), " numbers, expected ", action_space_.size()));
  Json a = Json::array();
  for (float v : action) {
    if (action_space_.is_discrete())
      a.push_back(static_cast<long long>(v));
    else
      a.push_back(v);
  }
  const Json answer = exchange({{"step", a}});
  StepResult r;
  r.observation = observation_of(answer);
  const Json reward = answer.value("reward", Json()),
             terminated = answer.value("terminated", Json()),
             truncated = answer.value("truncated", Json());
  if (!reward.is_number() || !terminated.is_boolean() || !truncated.is_boolean())
    throw EnvError(
        cat("a step's answer needs \"reward\" (a number), \"terminated\" and "
            "\"truncated\" (booleans); got ",
            shown(answer.dump())));
  r.reward = reward.get<double>();
  r.terminated = terminated.get<bool>();
  r.truncated = truncated.get<bool>();
  return r;
}

}  // namespace distml::rl
