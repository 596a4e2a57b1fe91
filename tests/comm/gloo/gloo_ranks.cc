#include "gloo_ranks.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "distml/comm/engine.h"
#include "distml/comm/gloo/gloo_connect.h"
#include "distml/core/error.h"

namespace distml::test {
namespace {

namespace fs = std::filesystem;

std::string error_type(const std::exception& e) {
  if (dynamic_cast<const TimeoutError*>(&e)) return "TimeoutError";
  if (dynamic_cast<const CommError*>(&e)) return "CommError";
  if (dynamic_cast<const UsageError*>(&e)) return "UsageError";
  if (dynamic_cast<const Error*>(&e)) return "Error";
  return "std::exception";
}

// A port nobody listens on right now (the kernel picks it; a race with another process
// taking it in between is possible but unlikely).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot find a free port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Body of a child: never returns into the test framework.
[[noreturn]] void run_child(int rank, int size, const fs::path& dir,
                            const std::function<std::string(int)>& fn) {
  ::setenv("RANK", std::to_string(rank).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(size).c_str(), 1);
  std::string report;
  int code = 0;
  try {
    report = fn(rank);
  } catch (const std::exception& e) {
    report = cat(error_type(e), ": ", e.what());
    code = 3;
  } catch (...) {
    report = "unknown exception";
    code = 4;
  }
  {
    std::ofstream out(dir / cat("rank", rank, ".report"));
    out << report;
  }
  std::_Exit(code);  // no atexit handlers, no gtest teardown in the child
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::vector<RankOutcome> run_processes(int size, const std::vector<int>& absent,
                                       std::chrono::seconds limit,
                                       const std::function<std::string(int)>& fn) {
  char pattern[] = "/tmp/distml-gloo-test-XXXXXX";
  if (!::mkdtemp(pattern)) throw std::runtime_error("mkdtemp failed");
  const fs::path dir = pattern;
  ::setenv("DISTML_TEST_FILE_STORE", (dir / "store").c_str(), 1);

  std::vector<pid_t> pids(size, -1);
  for (int r = 0; r < size; ++r) {
    if (std::find(absent.begin(), absent.end(), r) != absent.end()) continue;
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) run_child(r, size, dir, fn);
    pids[r] = pid;
  }

  std::vector<RankOutcome> outcomes(size);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int running =
      static_cast<int>(std::count_if(pids.begin(), pids.end(), [](pid_t p) { return p > 0; }));
  while (running > 0) {
    const bool late = std::chrono::steady_clock::now() >= deadline;
    for (int r = 0; r < size; ++r) {
      if (pids[r] <= 0) continue;
      if (late) {
        ::kill(pids[r], SIGKILL);
        outcomes[r].killed_at_limit = true;
      }
      int status = 0;
      pid_t got = ::waitpid(pids[r], &status, late ? 0 : WNOHANG);
      if (got != pids[r]) continue;
      if (WIFEXITED(status)) outcomes[r].exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) outcomes[r].signal = WTERMSIG(status);
      pids[r] = -1;
      --running;
    }
    if (running > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  for (int r = 0; r < size; ++r) {
    const fs::path report = dir / cat("rank", r, ".report");
    if (fs::exists(report)) outcomes[r].report = read_file(report);
    outcomes[r].threw = outcomes[r].exit_code == 3;
  }
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  ::unsetenv("DISTML_TEST_FILE_STORE");
  return outcomes;
}

std::vector<RankOutcome> run_gloo_engines(const GlooWorld& world,
                                          const std::function<std::string(comm::Engine&)>& fn) {
  if (world.tcp_store) {
    ::setenv("MASTER_ADDR", "127.0.0.1", 1);
    ::setenv("MASTER_PORT", std::to_string(free_port()).c_str(), 1);
  }
  return run_processes(world.size, world.absent, world.limit, [&](int) {
    const char* store = std::getenv("DISTML_TEST_FILE_STORE");
    auto engine = comm::gloo::connect_engine(world.tcp_store ? "" : store, world.options.timeout);
    return fn(*engine);
  });
}

std::vector<RankOutcome> run_gloo_world(const GlooWorld& world,
                                        const std::function<std::string(comm::Communicator&)>& fn) {
  if (world.tcp_store) {
    ::setenv("MASTER_ADDR", "127.0.0.1", 1);
    ::setenv("MASTER_PORT", std::to_string(free_port()).c_str(), 1);
  }
  return run_processes(world.size, world.absent, world.limit, [&](int) {
    const char* store = std::getenv("DISTML_TEST_FILE_STORE");
    comm::Communicator comm(
        comm::gloo::connect_engine(world.tcp_store ? "" : store, world.options.timeout),
        world.options);
    return fn(comm);
  });
}

std::string describe(const std::vector<RankOutcome>& outcomes) {
  std::string s;
  for (std::size_t r = 0; r < outcomes.size(); ++r) {
    const auto& o = outcomes[r];
    s +=
        cat("\n  rank ", r, ": exit ", o.exit_code, o.signal ? cat(" signal ", o.signal) : "",
            o.killed_at_limit ? " (killed at the time limit)" : "", ": ", o.report.substr(0, 2000));
  }
  return s;
}

}  // namespace distml::test
