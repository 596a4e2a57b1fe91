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
#include <fstream>
#include <sstream>
#include <thread>

#include "distml/comm/engines.h"
#include "distml/comm/local/local_world.h"
#include "distml/core/error.h"
#include "distml/core/parse.h"
#include "netns_cluster.h"

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

// A process to start: its command, what to add to its environment, and its name in messages.
struct ChildSpec {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;
  std::string name;
};

// Starts the processes, forwards SIGINT/SIGTERM/SIGHUP to them, and when one fails stops the
// others; returns the first failing exit code, or 0. With `prefix_output` each output line
// is prefixed with the process's index (its rank).
int run_children(const std::vector<ChildSpec>& specs, bool prefix_output) {
  if (::pipe(signal_pipe) != 0) throw Error("distml launch: pipe failed");
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);  // a signal held while the cluster was built

  const int count = static_cast<int>(specs.size());
  std::vector<Child> children(count);
  for (int r = 0; r < count; ++r) {
    int out[2], err[2];
    if (prefix_output && (::pipe(out) != 0 || ::pipe(err) != 0))
      throw Error("distml launch: pipe failed");
    pid_t pid = ::fork();
    if (pid < 0) throw Error("distml launch: fork failed");
    if (pid == 0) {
      if (prefix_output) {
        ::dup2(out[1], 1);
        ::dup2(err[1], 2);
        ::close(out[0]), ::close(err[0]), ::close(out[1]), ::close(err[1]);
      }
      for (const auto& [name, value] : specs[r].env) ::setenv(name.c_str(), value.c_str(), 1);
      exec(specs[r].argv);
    }
    children[r].pid = pid;
    if (prefix_output) {
      ::close(out[1]), ::close(err[1]);
      children[r].out = out[0];
      children[r].err = err[0];
    }
  }

  int first_failure = 0;
  auto deadline_kill = std::chrono::steady_clock::time_point::max();
  int running = count;
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
    for (int r = 0; r < count; ++r) {
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
          std::fprintf(stderr, "distml launch: %s exited with code %d; stopping the others\n",
                       specs[&c - children.data()].name.c_str(), code);
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

// The ranks as local processes that meet through a TCPStore on 127.0.0.1.
int launch_local_processes(const LaunchOptions& o) {
  const std::string port =
      std::getenv("MASTER_PORT") ? std::getenv("MASTER_PORT") : std::to_string(free_port());
  const char* addr = std::getenv("MASTER_ADDR");
  std::vector<ChildSpec> specs(o.np);
  for (int r = 0; r < o.np; ++r)
    specs[r] = {o.command,
                {{"RANK", std::to_string(r)},
                 {"LOCAL_RANK", std::to_string(r)},
                 {"WORLD_SIZE", std::to_string(o.np)},
                 {"MASTER_ADDR", addr ? addr : "127.0.0.1"},
                 {"MASTER_PORT", port},
                 {kLaunchedVar, "1"},
                 {kEngineVar, o.engine}},
                cat("rank ", r)};
  return run_children(specs, o.prefix_output);
}

// The first host a hostfile names (its first word that is not a comment).
std::string first_host(const std::string& hostfile) {
  std::ifstream in(hostfile);
  if (!in) throw UsageError(cat("--hostfile ", hostfile, ": cannot read it"));
  std::string word;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line.substr(0, line.find('#')));
    if (words >> word) return word;
  }
  throw UsageError(cat("--hostfile ", hostfile, ": names no host"));
}

// mpirun's environment: run as root where we are root, and where the ranks of the gloo engine
// meet (rank 0's host, a port).
void prepare_mpirun_environment(const LaunchOptions& o, const std::string& master) {
  if (!on_path("mpirun"))
    throw UsageError(
        "mpirun not found on PATH: install OpenMPI (Debian package openmpi-bin: apt-get install "
        "openmpi-bin)");
  if (::geteuid() == 0) {
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  }
  ::setenv(kLaunchedVar, "1", 1);
  ::setenv(kEngineVar, o.engine.c_str(), 1);
  if (o.engine == "gloo") {
    ::setenv("MASTER_ADDR", master.c_str(), 0);
    ::setenv("MASTER_PORT", "29500", 0);
  }
}

int cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// H hosts of R ranks in network namespaces (netns_cluster.h): mpirun runs on the first host and
// reaches the others through a remote-shell agent; the launcher waits for it, then removes the
// cluster, whether the job succeeded, failed or was interrupted.
int launch_netns_cluster(LaunchOptions o) {
  NetnsClusterOptions shape = parse_cluster_shape(o.netns_cluster);
  shape.bandwidth = o.bandwidth;
  shape.latency = o.latency;
  if (o.np == 0) o.np = shape.hosts * shape.ranks_per_host;
  if (o.np != shape.hosts * shape.ranks_per_host)
    throw UsageError(cat("--np ", o.np, " with --netns-cluster ", o.netns_cluster, ": the cluster ",
                         "runs ", shape.hosts * shape.ranks_per_host, " ranks; leave --np out"));
  // Signals wait until the cluster is whole (run_children takes them), so that an interrupt
  // never leaves half of it behind.
  sigset_t stop;
  sigemptyset(&stop);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop, sig);
  ::sigprocmask(SIG_BLOCK, &stop, nullptr);
  NetnsCluster cluster(shape);
  prepare_mpirun_environment(o, cluster.address(0));
  if (o.engine == "gloo") ::setenv("GLOO_SOCKET_IFNAME", NetnsCluster::kInterface, 1);
  o.hostfile = cluster.mpi_hostfile();
  auto mpirun = mpirun_command(o, cores(), ::geteuid() == 0);
  mpirun.insert(mpirun.begin() + 1,
                {"--mca", "plm_rsh_agent", cluster.mpi_agent(), "--mca", "btl", "self,vader,tcp",
                 "--mca", "btl_tcp_if_include", NetnsCluster::kSubnet, "--mca",
                 "oob_tcp_if_include", NetnsCluster::kSubnet});
  std::fprintf(stderr, "distml launch: %d hosts x %d ranks in network namespaces%s%s\n",
               shape.hosts, shape.ranks_per_host,
               shape.bandwidth.empty() ? "" : ", links shaped to ", shape.bandwidth.c_str());
  return run_children({{cluster.on_host(0, mpirun), {}, "mpirun"}}, false);
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
  // Across hosts the ring and hierarchical all-reduces send 256 KiB chunks over Open MPI's TCP
  // transport. Above its eager limit (64 KiB) each chunk waits for the receiver's
  // acknowledgement, which on a link busy in both directions queues behind the data: an 8 MiB
  // ring all-reduce over 100 Mbit/s took 1.06 s, and 0.72 s (MPI_Allreduce 0.71 s, link bound
  // 0.67 s) with the chunks sent eagerly. A value the user set in the environment wins.
  if ((!o.hosts.empty() || !o.hostfile.empty()) && !std::getenv("OMPI_MCA_btl_tcp_eager_limit"))
    argv.insert(argv.end(), {"--mca", "btl_tcp_eager_limit", "524288"});
  if (slots == 0 || o.np > slots)
    argv.insert(argv.end(), {"--oversubscribe", "--mca", "mpi_yield_when_idle", "1"});
  if (as_root)
    argv.insert(argv.end(),
                {"-x", "OMPI_ALLOW_RUN_AS_ROOT", "-x", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"});
  argv.insert(argv.end(), {"-x", kLaunchedVar, "-x", kEngineVar, "-x", kStdoutTtyVar});
  for (const char* var : {"MASTER_ADDR", "MASTER_PORT", "GLOO_SOCKET_IFNAME"})
    if (std::getenv(var)) argv.insert(argv.end(), {"-x", var});
  if (o.prefix_output) argv.push_back("--tag-output");
  argv.insert(argv.end(), o.command.begin(), o.command.end());
  return argv;
}

int launch(const LaunchOptions& o) {
  if (o.command.empty()) throw UsageError("distml launch: no command given after --");
  if (!o.hosts.empty() && !o.hostfile.empty())
    throw UsageError("give either --hosts or --hostfile, not both");
  if (o.engine == "local")
    throw UsageError("engine 'local' runs ranks as threads of one process and needs no launcher");
  comm::check_engine_name(o.engine);
  ::setenv(kStdoutTtyVar, stdout_is_terminal() ? "1" : "0", 1);
  if (!o.netns_cluster.empty()) {
    if (!o.hosts.empty() || !o.hostfile.empty())
      throw UsageError("--netns-cluster makes its own hosts: leave out --hosts and --hostfile");
    return launch_netns_cluster(o);
  }
  if (!o.bandwidth.empty() || !o.latency.empty())
    throw UsageError("--bandwidth and --latency shape the links of --netns-cluster only");
  if (o.np < 1) throw UsageError(cat("--np/-n must be at least 1, got ", o.np));
  // gloo on one machine: local processes; across hosts, mpirun starts them (the ranks read
  // its rank variables) and they meet at the first host's TCPStore.
  if (o.engine == "gloo" && o.hosts.empty() && o.hostfile.empty()) return launch_local_processes(o);
  std::string master = "127.0.0.1";
  if (!o.hostfile.empty()) master = first_host(o.hostfile);
  if (!o.hosts.empty()) master = split_list(o.hosts).front();
  prepare_mpirun_environment(o, master.substr(0, master.find(':')));
  // mpirun forwards signals to the ranks and exits with the first failing rank's code.
  exec(mpirun_command(o, cores(), ::geteuid() == 0));
}

void add_launch_command(CLI::App& app) {
  auto o = std::make_shared<LaunchOptions>();
  auto* sub = app.add_subcommand(
      "launch",
      "Start N ranks of a command: under mpirun (--engine mpi) or as local processes that "
      "rendezvous through a TCPStore (--engine gloo). Exits with the first failing rank's "
      "code.\nExample: distml launch -n 4 -- ./my_program --flag");
  sub->add_option("-n,--np", o->np, "Number of ranks (with --netns-cluster: implied)");
  auto* hosts = sub->add_option("--hosts", o->hosts,
                                "Hosts and slots, e.g. h1:2,h2:2; mpirun starts the ranks there");
  sub->add_option("--hostfile", o->hostfile, "An OpenMPI hostfile (mpi and gloo)")->excludes(hosts);
  sub->add_option("--engine", o->engine,
                  "mpi (default) or gloo; across hosts gloo's ranks meet at the first host's "
                  "port MASTER_PORT (default 29500) on the interface GLOO_SOCKET_IFNAME");
  sub->add_option("--netns-cluster", o->netns_cluster,
                  "HxR: run on H emulated hosts of R ranks each, in network namespaces on a "
                  "bridge (needs root); removed again when the job ends");
  sub->add_option("--bandwidth", o->bandwidth,
                  "With --netns-cluster: each host's link rate in both directions, e.g. 100mbit");
  sub->add_option("--latency", o->latency,
                  "With --netns-cluster: a one-way delay per link, e.g. 1ms (needs tc netem)");
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
