#include "launch.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "distml/comm/engines.h"
#include "distml/comm/local/local_world.h"
#include "distml/core/error.h"
#include "distml/core/parse.h"

namespace distml::cli {
namespace {

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  for (const auto& dir : split_list(path, ':'))
    if (::access((std::filesystem::path(dir) / program).c_str(), X_OK) == 0) return true;
  return false;
}

int total_slots(const std::string& hosts) {
  int slots = 0;
  for (const auto& h : split_list(hosts)) {
    auto colon = h.find(':');
    slots += colon == std::string::npos ? 1 : std::atoi(h.c_str() + colon + 1);
  }
  return slots;
}

[[noreturn]] void exec(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  std::fprintf(stderr, "distml launch: cannot run %s: %s\n", args[0], std::strerror(errno));
  std::_Exit(127);
}

// Forwards SIGINT/SIGTERM/SIGHUP to the ranks through a self-pipe read by the main loop.
int signal_pipe[2] = {-1, -1};
void on_signal(int sig) {
  unsigned char s = static_cast<unsigned char>(sig);
  [[maybe_unused]] auto n = ::write(signal_pipe[1], &s, 1);
}

struct Child {
  pid_t pid = -1;
  int out = -1, err = -1;  // pipes when prefixing output
  std::string out_buf, err_buf;
  bool running = true;
};

// Writes the complete lines of `buf` to `fd`, each prefixed with "[rank] ".
void flush_lines(std::string& buf, int fd, int rank, bool all) {
  size_t start = 0;
  for (;;) {
    size_t nl = buf.find('\n', start);
    if (nl == std::string::npos) break;
    std::string line = cat("[", rank, "] ", buf.substr(start, nl - start + 1));
    [[maybe_unused]] auto n = ::write(fd, line.data(), line.size());
    start = nl + 1;
  }
  buf.erase(0, start);
  if (all && !buf.empty()) {
    std::string line = cat("[", rank, "] ", buf, "\n");
    [[maybe_unused]] auto n = ::write(fd, line.data(), line.size());
    buf.clear();
  }
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Starts the ranks as local processes that meet through a TCPStore on 127.0.0.1.
int launch_local_processes(const LaunchOptions& o) {
  if (!o.hosts.empty() || !o.hostfile.empty())
    throw UsageError(
        "distml launch --engine gloo starts ranks on this machine only; for several hosts use "
        "--engine mpi (mpirun places the processes)");
  if (::pipe(signal_pipe) != 0) throw Error("distml launch: pipe failed");
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);

  const std::string port =
      std::getenv("MASTER_PORT") ? std::getenv("MASTER_PORT") : std::to_string(free_port());
  std::vector<Child> children(o.np);
  for (int r = 0; r < o.np; ++r) {
    int out[2], err[2];
    if (o.prefix_output && (::pipe(out) != 0 || ::pipe(err) != 0))
      throw Error("distml launch: pipe failed");
    pid_t pid = ::fork();
    if (pid < 0) throw Error("distml launch: fork failed");
    if (pid == 0) {
      if (o.prefix_output) {
        ::dup2(out[1], 1);
        ::dup2(err[1], 2);
        ::close(out[0]), ::close(err[0]), ::close(out[1]), ::close(err[1]);
      }
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(o.np).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 0);
      ::setenv("MASTER_PORT", port.c_str(), 1);
      ::setenv(kLaunchedVar, "1", 1);
      ::setenv(kEngineVar, o.engine.c_str(), 1);
      exec(o.command);
    }
    children[r].pid = pid;
    if (o.prefix_output) {
      ::close(out[1]), ::close(err[1]);
      children[r].out = out[0];
      children[r].err = err[0];
    }
  }

  int first_failure = 0;
  auto deadline_kill = std::chrono::steady_clock::time_point::max();
  int running = o.np;
  while (running > 0) {
    std::vector<pollfd> fds{{signal_pipe[0], POLLIN, 0}};
    for (auto& c : children)
      for (int fd : {c.out, c.err})
        if (fd >= 0) fds.push_back({fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 100);
    if (fds[0].revents & POLLIN) {
      unsigned char sig;
      if (::read(signal_pipe[0], &sig, 1) == 1)
        for (auto& c : children)
          if (c.running) ::kill(c.pid, sig);
    }
    for (int r = 0; r < o.np; ++r) {
      auto& c = children[r];
      for (int* fd : {&c.out, &c.err}) {
        if (*fd < 0) continue;
        char buf[4096];
        pollfd p{*fd, POLLIN, 0};
        if (::poll(&p, 1, 0) <= 0) continue;
        ssize_t n = ::read(*fd, buf, sizeof buf);
        std::string& pending = fd == &c.out ? c.out_buf : c.err_buf;
        if (n > 0) {
          pending.append(buf, n);
          flush_lines(pending, fd == &c.out ? 1 : 2, r, false);
        } else {
          flush_lines(pending, fd == &c.out ? 1 : 2, r, true);
          ::close(*fd);
          *fd = -1;
        }
      }
    }
    int status;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      for (auto& c : children) {
        if (c.pid != pid) continue;
        c.running = false;
        --running;
        int code = exit_code_of(status);
        if (code != 0 && first_failure == 0) {
          first_failure = code;
          std::fprintf(stderr, "distml launch: rank %d exited with code %d; stopping the others\n",
                       static_cast<int>(&c - children.data()), code);
          // One rank failed: stop the rest, politely first.
          for (auto& other : children)
            if (other.running) ::kill(other.pid, SIGTERM);
          deadline_kill = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        }
      }
    }
    if (std::chrono::steady_clock::now() > deadline_kill)
      for (auto& c : children)
        if (c.running) ::kill(c.pid, SIGKILL);
  }
  for (auto& c : children)
    for (int fd : {c.out, c.err})
      if (fd >= 0) ::close(fd);
  return first_failure;
}

}  // namespace

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw Error("distml launch: cannot find a free TCP port on 127.0.0.1");
  int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

std::vector<std::string> mpirun_command(const LaunchOptions& o, int cores, bool as_root) {
  std::vector<std::string> argv{"mpirun", "-n", std::to_string(o.np), "--bind-to", "none"};
  int slots = cores;
  if (!o.hosts.empty()) {
    argv.insert(argv.end(), {"--host", o.hosts});
    slots = total_slots(o.hosts);
  } else if (!o.hostfile.empty()) {
    argv.insert(argv.end(), {"--hostfile", o.hostfile});
    slots = 0;  // unknown: let mpirun decide, but never starve
  }
  if (slots == 0 || o.np > slots)
    argv.insert(argv.end(), {"--oversubscribe", "--mca", "mpi_yield_when_idle", "1"});
  if (as_root)
    argv.insert(argv.end(),
                {"-x", "OMPI_ALLOW_RUN_AS_ROOT", "-x", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"});
  argv.insert(argv.end(), {"-x", kLaunchedVar, "-x", kEngineVar, "-x", kStdoutTtyVar});
  for (const char* var : {"MASTER_ADDR", "MASTER_PORT"})
    if (std::getenv(var)) argv.insert(argv.end(), {"-x", var});
  if (o.prefix_output) argv.push_back("--tag-output");
  argv.insert(argv.end(), o.command.begin(), o.command.end());
  return argv;
}

int launch(const LaunchOptions& o) {
  if (o.np < 1) throw UsageError(cat("--np/-n must be at least 1, got ", o.np));
  if (o.command.empty()) throw UsageError("distml launch: no command given after --");
  if (!o.hosts.empty() && !o.hostfile.empty())
    throw UsageError("give either --hosts or --hostfile, not both");
  if (o.engine == "local")
    throw UsageError("engine 'local' runs ranks as threads of one process and needs no launcher");
  comm::check_engine_name(o.engine);
  ::setenv(kStdoutTtyVar, stdout_is_terminal() ? "1" : "0", 1);
  if (o.engine == "gloo") return launch_local_processes(o);

  if (!on_path("mpirun"))
    throw UsageError(
        "mpirun not found on PATH: install OpenMPI (Debian package openmpi-bin: apt-get install "
        "openmpi-bin)");
  const bool as_root = ::geteuid() == 0;
  if (as_root) {
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  }
  ::setenv(kLaunchedVar, "1", 1);
  ::setenv(kEngineVar, o.engine.c_str(), 1);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // mpirun forwards signals to the ranks and exits with the first failing rank's code.
  exec(mpirun_command(o, cores, as_root));
}

void add_launch_command(CLI::App& app) {
  auto o = std::make_shared<LaunchOptions>();
  auto* sub = app.add_subcommand(
      "launch",
      "Start N ranks of a command: under mpirun (--engine mpi) or as local processes that "
      "rendezvous through a TCPStore (--engine gloo). Exits with the first failing rank's "
      "code.\nExample: distml launch -n 4 -- ./my_program --flag");
  sub->add_option("-n,--np", o->np, "Number of ranks")->required();
  auto* hosts = sub->add_option("--hosts", o->hosts, "Hosts and slots, e.g. h1:2,h2:2 (mpi)");
  sub->add_option("--hostfile", o->hostfile, "An OpenMPI hostfile (mpi)")->excludes(hosts);
  sub->add_option("--engine", o->engine, "mpi (default) or gloo");
  sub->add_flag("--prefix-output", o->prefix_output, "Prefix each output line with its rank");
  sub->add_option("command", o->command, "The command to run, after --")->expected(1, -1);
  sub->callback([o] { std::exit(launch(*o)); });
}

bool stdout_is_terminal() {
  if (const char* v = std::getenv(kStdoutTtyVar)) return std::string_view(v) == "1";
  return ::isatty(1);
}

void relaunch_if_requested(int np, const std::string& engine, int argc, char** argv) {
  if (np <= 0 || engine == "local" || std::getenv(kLaunchedVar)) return;
  std::string self = std::filesystem::read_symlink("/proc/self/exe");
  LaunchOptions o;
  o.np = np;
  o.engine = engine;
  o.command.push_back(self);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--np") {
      ++i;  // drop its value too
      continue;
    }
    if (a.rfind("--np=", 0) == 0) continue;
    o.command.push_back(a);
  }
  std::exit(launch(o));
}

void run_on_ranks(const std::string& engine, int np, const comm::CommOptions& options,
                  const std::function<void(comm::Communicator&)>& body) {
  if (engine == "local") {
    comm::local::run_ranks(std::max(np, 1), options, body);
    return;
  }
  if (engine == "gloo") comm::adopt_mpirun_rank_variables();
  auto comm = comm::connect({engine, ""}, options);
  body(*comm);
}

}  // namespace distml::cli
