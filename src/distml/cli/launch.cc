#include "launch.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <thread>

#include "child_processes.h"
#include "distml/comm/engines.h"
#include "distml/comm/local/local_world.h"
#include "distml/core/error.h"
#include "distml/core/parse.h"
#include "distml/core/preemption.h"
#include "distml/core/run_id.h"
#include "elastic_hosts.h"
#include "hostfile.h"
#include "job_output.h"
#include "launcher_orders.h"
#include "netns_cluster.h"
#include "remote_shell.h"
#include "slurm.h"

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

// The variables by which a rank that distml launch started itself (no mpirun) finds its
// place: its rank, the world, and the TCPStore where the ranks meet.
std::vector<std::pair<std::string, std::string>> rank_environment(const LaunchOptions& o, int rank,
                                                                  int local_rank, int np,
                                                                  const std::string& master_addr,
                                                                  const std::string& master_port) {
  return {{"RANK", std::to_string(rank)},
          {"LOCAL_RANK", std::to_string(local_rank)},
          {"WORLD_SIZE", std::to_string(np)},
          {"MASTER_ADDR", master_addr},
          {"MASTER_PORT", master_port},
          {kLaunchedVar, "1"},
          {kEngineVar, o.engine}};
}

// The ranks as local processes that meet through a TCPStore on 127.0.0.1; a fresh port for
// every start, so that a restart never meets the previous job's store.
JobEnd launch_local_processes(const LaunchOptions& o, int np) {
  const std::string port =
      std::getenv("MASTER_PORT") ? std::getenv("MASTER_PORT") : std::to_string(free_port());
  const char* addr = std::getenv("MASTER_ADDR");
  std::vector<ChildSpec> specs(np);
  for (int r = 0; r < np; ++r)
    specs[r] = {o.command,
                rank_environment(o, r, r, np, addr ? addr : "127.0.0.1", port),
                cat("rank ", r),
                {}};  // a rank reports nothing for the launcher to read
  return run_children(specs, o.prefix_output, false);
}

// mpirun's own account of the rank that ended the job, from the end of its stderr: "rank 1
// was killed by signal 9 (Killed)" (code 137) or "rank 1 exited with code 3"; nullopt when it
// gave none.
struct MpirunFailure {
  std::string cause;
  int code;
};
std::optional<MpirunFailure> mpirun_failure(const std::string& stderr_tail) {
  static const std::regex killed(
      R"(process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+) \(([^)]*)\))");
  static const std::regex exited(R"(Process name: \[\[\d+,\d+\],(\d+)\]\s+Exit code:\s+(\d+))");
  std::smatch m;
  if (std::regex_search(stderr_tail, m, killed))
    return MpirunFailure{cat("rank ", m[1].str(), " on ", m[2].str(), " was killed by signal ",
                             m[3].str(), " (", m[4].str(), ")"),
                         128 + std::stoi(m[3].str())};
  if (std::regex_search(stderr_tail, m, exited))
    return MpirunFailure{cat("rank ", m[1].str(), " exited with code ", m[2].str()),
                         std::stoi(m[2].str())};
  return std::nullopt;
}

// How long mpirun may take to end after it reported a failure: it waits forever for the daemon
// of a lost host. Once its report names the failing rank and its exit code (which the launcher
// then exits with), what it does next only ends its own run: 2 s for that. Before, ending a job
// took mpirun 1-3 s after its first report on 2 emulated hosts, more than 3 s on a loaded
// machine (a 3 s grace lost a failing rank's exit code in a clean-clone make test), and
// stopping it sooner loses that exit code: 10 s on one machine (where no daemon can be lost),
// 6 s across hosts, so that a lost host ends the job within train.timeout_s + 10 s.
TeardownGrace mpirun_teardown_grace(bool across_hosts) {
  return [across_hosts](const std::string& stderr_tail) -> std::optional<std::chrono::seconds> {
    const auto reported = [&](const char* banner) {
      return stderr_tail.find(banner) != std::string::npos;
    };
    if (!reported("the job has been aborted") && !reported("ORTE has lost communication") &&
        !reported("mpirun noticed that process rank"))
      return std::nullopt;  // the cheap test first: the ranks' output passes through here
    if (mpirun_failure(stderr_tail)) return std::chrono::seconds(2);
    return std::chrono::seconds(across_hosts ? 6 : 10);
  };
}

// How a job's start ended, said once, as its last lines: the errors its ranks found, each
// message once (every rank that read the same bad file says the same; job_output.h), the
// cause last: the first error, or where a rank was killed, the launcher's account of it (the
// others' errors then only follow from it); without errors, that account alone. First, where
// the launcher kept something off the terminal (mpirun's report), where to find it.
void say_how_it_ended(const JobEnd& end) {
  if (end.code == 0) return;
  if (const auto& log = LaunchLog::get().path(); !log.empty())
    std::fprintf(stderr, "distml launch: details in %s\n", log.c_str());
  auto errors = distinct_errors(end.errors);
  const bool account_last = end.cause_killed || errors.empty();
  if (!account_last) std::rotate(errors.begin(), errors.begin() + 1, errors.end());
  for (const auto& e : errors) std::fprintf(stderr, "%s\n", e.c_str());
  if (account_last && !end.cause.empty())
    std::fprintf(stderr, "distml launch: %s\n", end.cause.c_str());
}

// Runs the job (start()), and after a failure runs it again while restarts are left: each
// start's ranks find the count in DISTML_RESTARTS and resume from their newest checkpoint. With
// --min-np what failed is not replaced: shrink(end) takes it out of the world and returns the
// ranks left, and the job goes on while at least min_np remain. A start that the launcher
// itself stopped at a checkpoint to take in a new host (JobEnd::asked_to_stop) starts again at
// once, and is not a restart. An interrupt or a preemption from outside is never restarted, nor
// exit code 2 (bad input, a checkpoint that cannot resume: the same again at every start). With
// --restart-window W only the restarts of the last W seconds count against --max-restarts.
// Restart n (of the window) waits 2^(n-1) seconds, up to 32, so that a failure that repeats
// (a port still held, a peer still going down) does not spin.
int supervise(const LaunchOptions& o, const std::function<JobEnd()>& start,
              const std::function<int(const JobEnd&)>& shrink) {
  using Clock = std::chrono::steady_clock;
  const int max_restarts =
      o.max_restarts >= 0 ? o.max_restarts : (o.min_np > 0 ? o.np - o.min_np : 0);
  std::vector<Clock::time_point> restarted_at;
  for (int starts = 0;; ++starts) {
    ::setenv(kRestartsVar, std::to_string(starts).c_str(), 1);
    const JobEnd end = start();
    if (end.asked_to_stop && end.code == kPreemptedExitCode) {
      std::fprintf(stderr,
                   "distml launch: the ranks checkpointed; starting again with the new "
                   "host\n");
      continue;
    }
    // Preempted: by a signal to the launcher, or to the ranks alone (a scheduler's).
    if (end.code == 0 || end.interrupted || end.preempted || end.code == kPreemptedExitCode) {
      if (end.code != kPreemptedExitCode) say_how_it_ended(end);
      if (end.code == kPreemptedExitCode)
        std::fprintf(stderr,
                     "distml launch: preempted; the ranks checkpointed: start the same command "
                     "again (with --resume) to go on\n");
      return end.code;
    }
    const std::string cause = end.cause.empty() ? cat("exit code ", end.code) : end.cause;
    if (end.code == 2 && max_restarts > 0) {  // what the ranks exit with (cli/main.cc)
      std::fprintf(stderr,
                   "distml launch: %s: a usage or data error, the same at every start; not "
                   "restarted\n",
                   cause.c_str());
      say_how_it_ended(end);
      return end.code;
    }
    if (o.restart_window_s > 0)
      std::erase_if(restarted_at, [&](Clock::time_point t) {
        return Clock::now() - t > std::chrono::duration<double>(o.restart_window_s);
      });
    if (static_cast<int>(restarted_at.size()) >= max_restarts) {
      if (max_restarts > 0)
        std::fprintf(
            stderr, "distml launch: %s; no restart left (%zu done%s)\n", cause.c_str(),
            restarted_at.size(),
            o.restart_window_s > 0 ? cat(" in the last ", o.restart_window_s, " s").c_str() : "");
      say_how_it_ended(end);
      return end.code;
    }
    const int np = o.min_np > 0 ? shrink(end) : 0;
    if (o.min_np > 0 && np < o.min_np) {
      std::fprintf(stderr, "distml launch: %s; fewer than --min-np %s would be left\n",
                   cause.c_str(), counted(o.min_np, "rank").c_str());
      say_how_it_ended(end);
      return end.code;
    }
    say_how_it_ended(end);
    restarted_at.push_back(Clock::now());
    const std::string count = o.restart_window_s > 0
                                  ? cat(starts + 1, " (", restarted_at.size(), " of ", max_restarts,
                                        " in the last ", o.restart_window_s, " s)")
                                  : cat(restarted_at.size(), " of ", max_restarts);
    std::fprintf(stderr, "distml launch: restart %s after %s%s\n", count.c_str(), cause.c_str(),
                 o.min_np > 0 ? cat("; continuing with ", counted(np, "rank")).c_str() : "");
    const auto recent = static_cast<int>(restarted_at.size());
    std::this_thread::sleep_for(std::chrono::seconds(1 << std::min(recent - 1, 5)));
  }
}

// mpirun's environment: run as root where we are root.
void prepare_mpirun_environment() {
  if (!on_path("mpirun"))
    throw UsageError(
        "mpirun not found on PATH: install OpenMPI (Debian package openmpi-bin: apt-get install "
        "openmpi-bin)");
  if (::geteuid() == 0) {
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  }
  ::setenv(kLaunchedVar, "1", 1);
  ::setenv(kEngineVar, "mpi", 1);
}

int cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// mpirun forwards signals to the ranks and exits with the first failing rank's code; run as a
// child, not exec'd, so that a lost host cannot leave it waiting forever
// (mpirun_teardown_grace).
JobEnd run_mpirun(const std::vector<std::string>& argv, bool across_hosts) {
  JobEnd end =
      run_children({{argv, {}, "mpirun", mpirun_teardown_grace(across_hosts), true}}, false, true);
  if (const auto failure = mpirun_failure(end.stderr_tail)) {
    end.cause = failure->cause;
    end.code = failure->code;  // also where mpirun was stopped before it could exit with it
  }
  return end;
}

// Where the ranks of a gloo job across hosts run: the address at which the other hosts reach
// a host (the world's first is the rendezvous), and a rank's process placed on a host.
struct HostAccess {
  std::function<std::string(const std::string& host)> address;
  std::function<ChildSpec(const std::string& host, ChildSpec rank)> place;
};

// gloo across hosts, without mpirun: distml launch starts each rank on its host itself
// (`access`), and they meet at the TCPStore of the world's first host, on a fresh port at every
// start (the last start's store may still hold its port). The world is the hosts' at each
// start (elastic_hosts.h): with --min-np the host of a failed rank is left out; with
// --host-discovery a host the script lists that the job lacks joins it at a checkpoint: every
// 2 s the launcher asks the script, and on a new host it orders the ranks to checkpoint and
// stop, as a preemption does (launcher_orders.h), and starts them again on the larger world.
int launch_gloo_on_hosts(const LaunchOptions& o, ElasticHosts& elastic, const HostAccess& access) {
  std::vector<HostSlots> world;  // the running start's
  std::vector<std::string> host_of_rank;
  const char* base_port = std::getenv("MASTER_PORT");
  int starts = 0;
  const auto start = [&] {
    world = elastic.world();
    const int np = ElasticHosts::ranks(world);
    if (np < std::max(o.min_np, 1))
      throw UsageError(cat("the hosts available have ", np, " ranks, fewer than ",
                           o.min_np > 0 ? cat("--min-np ", o.min_np) : std::string("one")));
    const char* fixed_addr = std::getenv("MASTER_ADDR");
    const std::string master = fixed_addr ? fixed_addr : access.address(world.front().host);
    const std::string port = std::to_string((base_port ? std::atoi(base_port) : 29500) + starts++);
    std::vector<ChildSpec> specs;
    host_of_rank.clear();
    for (const auto& h : world)
      for (int local = 0; local < h.slots; ++local) {
        const int rank = static_cast<int>(specs.size());
        auto env = rank_environment(o, rank, local, np, master, port);
        env.emplace_back(kOrdersVar, "stdin");
        specs.push_back(access.place(h.host, {.argv = o.command,
                                              .env = std::move(env),
                                              .name = cat("rank ", rank, " on ", h.host),
                                              .teardown_grace = {},
                                              .orders_on_stdin = true}));
        host_of_rank.push_back(h.host);
      }
    std::string names;
    for (const auto& h : world) names += cat(names.empty() ? "" : ", ", h.host, ":", h.slots);
    std::fprintf(stderr, "distml launch: %s on %s\n", counted(np, "rank").c_str(), names.c_str());
    auto next_look = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    const Watch watch = [&]() {
      if (std::chrono::steady_clock::now() < next_look) return false;
      next_look = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      const std::string host = elastic.joining(world);
      if (host.empty()) return false;
      std::fprintf(stderr,
                   "distml launch: host %s is available: the ranks checkpoint and stop, to start "
                   "again with it\n",
                   host.c_str());
      return true;
    };
    return run_children(specs, o.prefix_output, false, o.host_discovery.empty() ? Watch() : watch);
  };
  const auto shrink = [&](const JobEnd& end) {
    if (end.failed >= 0) elastic.lost(host_of_rank[static_cast<std::size_t>(end.failed)]);
    return ElasticHosts::ranks(elastic.world());
  };
  return supervise(o, start, shrink);
}

// The variables of distml launch that its ranks read, wherever they run.
std::vector<const char*> launcher_variables() {
  std::vector<const char*> names{kLaunchedVar, kEngineVar, kStdoutTtyVar};
  for (const char* var : {kRestartsVar, kMaxRestartsVar, kMinNpVar, kRunIdVar, "MASTER_ADDR",
                          "MASTER_PORT", "GLOO_SOCKET_IFNAME"})
    if (std::getenv(var)) names.push_back(var);
  return names;
}

// gloo on real hosts (--hosts, --hostfile, or a discovery script alone): the ranks of this
// machine start here; the others through the remote shell --rsh, which carries the folder and
// the environment (remote_shell.h). The first host's name must reach it from the others.
int launch_gloo_across_hosts(const LaunchOptions& o) {
  std::vector<HostSlots> hosts;
  if (!o.hosts.empty()) {
    std::string lines = o.hosts;
    std::replace(lines.begin(), lines.end(), ',', '\n');
    hosts = parse_host_list(lines, "--hosts");
    for (auto& h : hosts) h.slots = std::max(h.slots, 1);
  } else if (!o.hostfile.empty()) {
    hosts = read_hostfile(o.hostfile);
  }
  if (o.np > 0) {  // the first np slots
    int left = o.np;
    for (auto& h : hosts) {
      h.slots = std::min(h.slots, left);
      left -= h.slots;
    }
    std::erase_if(hosts, [](const HostSlots& h) { return h.slots == 0; });
    if (left > 0 && o.host_discovery.empty())
      throw UsageError(cat("--np ", o.np, ": the hosts given have only ", o.np - left, " slots"));
  }
  ElasticHosts elastic(hosts, o.host_discovery, o.max_np, /*other_hosts=*/true);
  const std::string dir = std::filesystem::current_path();
  HostAccess access{[](const std::string& host) { return host; },
                    [&](const std::string& host, ChildSpec rank) {
                      if (is_this_host(host)) return rank;
                      for (const char* var : launcher_variables())
                        if (std::none_of(rank.env.begin(), rank.env.end(),
                                         [&](const auto& kv) { return kv.first == var; }))
                          rank.env.emplace_back(var, std::getenv(var));
                      rank.argv = remote_command(o.rsh, host, dir, rank.env, rank.argv);
                      rank.env.clear();
                      return rank;
                    }};
  return launch_gloo_on_hosts(o, elastic, access);
}

// H hosts of R ranks in network namespaces (netns_cluster.h). gloo's ranks start in them
// directly (launch_gloo_on_hosts); for mpi, mpirun runs on the first host and reaches the others
// through a remote-shell agent. The launcher waits for the job, then removes the cluster,
// whether the job succeeded, failed or was interrupted.
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
  std::fprintf(stderr, "distml launch: %s x %s in network namespaces%s%s\n",
               counted(shape.hosts, "host").c_str(), counted(shape.ranks_per_host, "rank").c_str(),
               shape.bandwidth.empty() ? "" : ", links shaped to ", shape.bandwidth.c_str());
  if (o.engine == "gloo") {
    std::vector<HostSlots> hosts;
    for (int h = 0; h < cluster.hosts(); ++h)
      hosts.push_back({cluster.host_name(h), shape.ranks_per_host});
    ElasticHosts elastic(hosts, o.host_discovery, o.max_np);
    const auto index_of = [&](const std::string& name) {
      int h = 0;
      while (cluster.host_name(h) != name) ++h;
      return h;
    };
    HostAccess access{[&](const std::string& host) { return cluster.address(index_of(host)); },
                      [&](const std::string& host, ChildSpec rank) {
                        rank.argv = cluster.on_host(index_of(host), rank.argv);
                        rank.env.emplace_back("GLOO_SOCKET_IFNAME", NetnsCluster::kInterface);
                        return rank;
                      }};
    return launch_gloo_on_hosts(o, elastic, access);
  }
  prepare_mpirun_environment();
  o.hostfile = cluster.mpi_hostfile();
  auto mpirun = mpirun_command(o, cores(), ::geteuid() == 0);
  mpirun.insert(mpirun.begin() + 1,
                {"--mca", "plm_rsh_agent", cluster.mpi_agent(), "--mca", "btl", "self,vader,tcp",
                 "--mca", "btl_tcp_if_include", NetnsCluster::kSubnet, "--mca",
                 "oob_tcp_if_include", NetnsCluster::kSubnet});
  return supervise(
      o, [&] { return run_mpirun(cluster.on_host(0, mpirun), true); },
      [](const JobEnd&) { return 0; });
}

// Where a job's world can change: gloo only, whose ranks distml launch starts itself and which
// meet afresh at every start (mpi's world is fixed when mpirun starts it). It grows where hosts
// can join: across hosts with a discovery script.
void check_elastic_options(const LaunchOptions& o) {
  if ((o.max_np > 0 || !o.host_discovery.empty()) && o.min_np == 0)
    throw UsageError(
        "--max-np and --host-discovery change the job's world: give --min-np too, the fewest "
        "ranks to go on with");
  if (o.rsh != kDefaultRsh && o.engine != "gloo")
    throw UsageError(
        "--rsh starts the gloo engine's ranks on other hosts; mpirun starts the mpi engine's "
        "(set OMPI_MCA_plm_rsh_agent for its remote shell)");
  if (o.min_np == 0) return;
  if (o.engine != "gloo")
    throw UsageError(
        "--min-np: a job's world changes on the gloo engine, whose ranks meet afresh at every "
        "start; mpi's world is fixed when mpirun starts it");
  const bool one_machine =
      o.hosts.empty() && o.hostfile.empty() && o.netns_cluster.empty() && o.host_discovery.empty();
  if (o.max_np > 0 && one_machine)
    throw UsageError(
        "--max-np bounds a world that grows as hosts join: give --host-discovery (and --hosts, "
        "--hostfile or --netns-cluster for the first hosts)");
  if (o.max_np > 0 && o.max_np < o.min_np)
    throw UsageError(cat("--max-np ", o.max_np, " is less than --min-np ", o.min_np));
  if (one_machine && o.min_np > o.np)
    throw UsageError(cat("--min-np ", o.min_np, " is more than --np ", o.np));
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
  for (const char* var : launcher_variables()) argv.insert(argv.end(), {"-x", var});
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
  this_run_id();  // one run id for every rank and restart (core/run_id.h)
  // The ranks follow (and check) the launcher's restart policy.
  if (o.max_restarts >= 0) ::setenv(kMaxRestartsVar, std::to_string(o.max_restarts).c_str(), 1);
  if (o.min_np > 0) ::setenv(kMinNpVar, std::to_string(o.min_np).c_str(), 1);
  check_elastic_options(o);
  if (!o.netns_cluster.empty()) {
    if (!o.hosts.empty() || !o.hostfile.empty())
      throw UsageError("--netns-cluster makes its own hosts: leave out --hosts and --hostfile");
    return launch_netns_cluster(o);
  }
  if (!o.bandwidth.empty() || !o.latency.empty())
    throw UsageError("--bandwidth and --latency shape the links of --netns-cluster only");
  // Inside a Slurm allocation srun starts the ranks, as many as it has tasks (slurm.h).
  if (const auto slurm = comm::read_slurm_env(); launches_with_srun(o, slurm)) {
    if (o.max_restarts > 0 || o.min_np > 0)
      throw UsageError("--max-restarts and --min-np: not inside a Slurm allocation yet");
    return supervise(
        o, [&] { return run_srun(o, slurm); }, [](const JobEnd&) { return 0; });
  }
  // gloo across hosts: distml launch starts the ranks (no mpirun), and they meet at the first
  // host's TCPStore.
  if (o.engine == "gloo" && (!o.hosts.empty() || !o.hostfile.empty() || !o.host_discovery.empty()))
    return launch_gloo_across_hosts(o);
  if (o.np < 1) throw UsageError(cat("--np/-n must be at least 1, got ", o.np));
  if (o.engine == "gloo") {  // on one machine: local processes
    int np = o.np;
    return supervise(
        o, [&] { return launch_local_processes(o, np); }, [&](const JobEnd&) { return --np; });
  }
  prepare_mpirun_environment();
  const bool across_hosts = !o.hosts.empty() || !o.hostfile.empty();
  // Where a torch.distributed script's env:// rendezvous meets (the c10d backend "distml"
  // and DDP's own): on this machine, a free port; across hosts the user names rank 0's host.
  if (!across_hosts) {
    ::setenv("MASTER_ADDR", "127.0.0.1", 0);
    ::setenv("MASTER_PORT", std::to_string(free_port()).c_str(), 0);
  }
  return supervise(
      o, [&] { return run_mpirun(mpirun_command(o, cores(), ::geteuid() == 0), across_hosts); },
      [](const JobEnd&) { return 0; });
}

void add_launch_command(CLI::App& app) {
  auto o = std::make_shared<LaunchOptions>();
  auto* sub = app.add_subcommand(
      "launch",
      "Start N ranks of a command: under mpirun (--engine mpi) or as local processes that "
      "rendezvous through a TCPStore (--engine gloo). Exits with the first failing rank's "
      "code.\nExample: distml launch -n 4 -- ./my_program --flag");
  sub->add_option("-n,--np", o->np,
                  "Number of ranks (with --netns-cluster: implied; inside a Slurm allocation: "
                  "SLURM_NTASKS by default, started with srun)");
  auto* hosts = sub->add_option("--hosts", o->hosts,
                                "Hosts and slots, e.g. h1:2,h2:2, filled in order: mpirun starts "
                                "the mpi engine's ranks there, distml launch the gloo engine's "
                                "(through --rsh)");
  sub->add_option("--hostfile", o->hostfile,
                  "An OpenMPI hostfile (a host per line, NAME [slots=N]), as --hosts")
      ->excludes(hosts);
  sub->add_option("--engine", o->engine,
                  "mpi (default) or gloo; across hosts gloo's ranks meet at the first host's "
                  "port MASTER_PORT (default 29500, one more at each restart) on the interface "
                  "GLOO_SOCKET_IFNAME");
  sub->add_option("--rsh", o->rsh,
                  "gloo across hosts: the remote shell that starts a rank on another host, run "
                  "as RSH HOST 'cd DIR && exec env VARS COMMAND'; its standard input carries "
                  "the launcher's orders (default: ssh -o BatchMode=yes)");
  sub->add_option("--netns-cluster", o->netns_cluster,
                  "HxR: run on H emulated hosts of R ranks each, in network namespaces on a "
                  "bridge (needs root); removed again when the job ends");
  sub->add_option("--bandwidth", o->bandwidth,
                  "With --netns-cluster: each host's link rate in both directions, e.g. 100mbit");
  sub->add_option("--latency", o->latency,
                  "With --netns-cluster: a one-way delay per link, e.g. 1ms (needs tc netem)");
  sub->add_flag("--prefix-output", o->prefix_output, "Prefix each output line with its rank");
  add_restart_options(*sub, *o);
  sub->add_option("--max-np", o->max_np,
                  "With --engine gloo, --min-np and --host-discovery: a world that grows stays "
                  "within N ranks")
      ->check(CLI::PositiveNumber);
  sub->add_option("--host-discovery", o->host_discovery,
                  "With --engine gloo and --min-np: a script printing the hosts available, one "
                  "per line (h1 or h1:SLOTS), run at each start and every 2 s; a host it lists "
                  "that the job lacks joins at a checkpoint (the ranks checkpoint, stop and start "
                  "again with it), one it no longer lists is left out at the next start. On "
                  "--netns-cluster it names the cluster's hosts (h0, h1, ...)")
      ->check(CLI::ExistingFile);
  sub->add_option("command", o->command, "The command to run, after --")->expected(1, -1);
  sub->callback([o] { std::exit(launch(*o)); });
}

bool stdout_is_terminal() {
  if (const char* v = std::getenv(kStdoutTtyVar)) return std::string_view(v) == "1";
  return ::isatty(1);
}

void add_restart_options(CLI::App& command, LaunchOptions& o, bool elastic) {
  command
      .add_option("--max-restarts", o.max_restarts,
                  "When a rank dies (signal, out of memory, non-zero exit other than 2, lost "
                  "host), stop the others and start the job again after 1, 2, 4 ... s, up to N "
                  "times; a run resumes from its newest whole checkpoint (train.checkpoint_dir "
                  "and train.checkpoint_every, run.* for rl). Exit 2 (bad input) and a preemption "
                  "(exit 75) are not restarted")
      ->check(CLI::NonNegativeNumber);
  command
      .add_option("--restart-window", o.restart_window_s,
                  "Seconds: only the restarts of the last S seconds count against "
                  "--max-restarts (a long run may then fail now and then without running out)")
      ->check(CLI::PositiveNumber);
  if (!elastic) return;
  command
      .add_option("--min-np", o.min_np,
                  "gloo only: a lost rank (across hosts, its host) is not replaced; the job "
                  "resumes from its checkpoint with the ranks left while at least M remain "
                  "(elastic)")
      ->check(CLI::PositiveNumber);
}

void adopt_launcher_policy(LaunchOptions& s) {
  if (!std::getenv(kLaunchedVar)) return;
  const auto adopt = [](const char* var, int& value, int unset) {
    const char* given = std::getenv(var);
    if (!given || value != unset) return;
    char* end = nullptr;
    const long n = std::strtol(given, &end, 10);
    if (end == given || *end || n < 0 || n > 1'000'000)
      throw UsageError(cat(var, "='", given, "': expected a count set by distml launch"));
    value = static_cast<int>(n);
  };
  adopt(kMaxRestartsVar, s.max_restarts, -1);
  adopt(kMinNpVar, s.min_np, 0);
}

void check_restart_options(const LaunchOptions& s, const std::string& engine, bool np_given,
                           const CheckpointKeys& checkpoints) {
  if (s.max_restarts <= 0 && s.min_np == 0) return;
  const char* flag = s.min_np > 0 ? "--min-np" : "--max-restarts";
  if (engine == "local")
    throw UsageError(cat(flag,
                         " restarts processes: the local engine runs ranks as threads of "
                         "one; use --engine mpi or gloo"));
  const std::string section = checkpoints.section;
  if (checkpoints.dir.empty())
    throw UsageError(cat(flag, " resumes from the newest checkpoint: set ", section,
                         ".checkpoint_dir (and ", section, ".checkpoint_every)"));
  if (checkpoints.every <= 0)
    throw UsageError(cat(flag, " resumes from the newest checkpoint, but with ", section,
                         ".checkpoint_every = 0 the only one is written at the end: every "
                         "restart would start over; set ",
                         section, ".checkpoint_every"));
  if (!np_given && !std::getenv(kLaunchedVar))
    throw UsageError(cat(flag, " needs --np: distml then launches the ranks and restarts them"));
}

int restarts_so_far() {
  const char* v = std::getenv(kRestartsVar);
  return v && std::getenv(kLaunchedVar) ? std::atoi(v) : 0;
}

void relaunch_if_requested(int np, const std::string& engine, int argc, char** argv,
                           const LaunchOptions& supervision) {
  if (np <= 0 || engine == "local" || std::getenv(kLaunchedVar)) return;
  std::string self = std::filesystem::read_symlink("/proc/self/exe");
  LaunchOptions o = supervision;
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
  if (engine == "gloo") {
    comm::adopt_mpirun_rank_variables();
    comm::adopt_slurm_rank_variables();  // a task srun started: its rank from SLURM_PROCID
  }
  auto comm = comm::connect({engine, ""}, options);
  body(*comm);
}

}  // namespace distml::cli
