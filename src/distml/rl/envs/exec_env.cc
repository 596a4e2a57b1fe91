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
#include "distml/rl/envs/exec_protocol.h"

extern char** environ;

namespace distml::rl {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kLongestLine = 64 << 20;

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
    const std::string line = read_line();
    try {
      auto declared = exec_protocol::read_declaration(line);
      observation_space_ = std::move(declared.observation);
      action_space_ = std::move(declared.action);
    } catch (const EnvError& e) {
      fail(e.what());  // with how the process ended, if it has
    }
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
      fail(buffer_.empty()
               ? "closed its output before answering"
               : cat("closed its output in the middle of a line: ", exec_protocol::shown(buffer_)));
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
}

Json ExecEnv::exchange(const Json& request) {
  write_line(request.dump());
  const std::string line = read_line();
  try {
    return exec_protocol::read_answer(line);
  } catch (const EnvError& e) {
    fail(e.what());
  }
}

std::vector<float> ExecEnv::reset(std::uint64_t seed) {
  return exec_protocol::observation_in(exchange({{"reset", seed}}), observation_space_);
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
  return exec_protocol::step_in(exchange({{"step", a}}), observation_space_);
}

}  // namespace distml::rl
