#include "netns_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include "distml/core/error.h"
#include "distml/core/parse.h"

namespace distml::cli {
namespace {

// A program on PATH, or in the system folders that a non-login root shell may leave out.
std::string find_tool(const std::string& name) {
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH")) dirs = split_list(path, ':');
  for (const char* dir : {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}) dirs.emplace_back(dir);
  for (const auto& dir : dirs) {
    const auto candidate = std::filesystem::path(dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  throw UsageError(cat("distml launch --netns-cluster needs `", name,
                       "` (Debian: iproute2 for ip and tc, util-linux for unshare)"));
}

std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// Runs `argv` to its end with stdout discarded; its stderr, or "" when it succeeded.
std::string run_for_error(const std::vector<std::string>& argv) {
  int err[2];
  if (::pipe(err) != 0) throw Error("distml launch: pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw Error("distml launch: fork failed");
  if (pid == 0) {
    ::dup2(err[1], 2);
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::close(err[0]), ::close(err[1]);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
    std::_Exit(127);
  }
  ::close(err[1]);
  std::string message;
  char buf[512];
  for (ssize_t n; (n = ::read(err[0], buf, sizeof buf)) > 0;) message.append(buf, n);
  ::close(err[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  while (!message.empty() && message.back() == '\n') message.pop_back();
  return message.empty() ? "failed" : message;
}

void run_checked(const std::vector<std::string>& argv) {
  if (auto error = run_for_error(argv); !error.empty())
    throw Error(cat("distml launch --netns-cluster: `", joined(argv), "`: ", error));
}

}  // namespace

NetnsClusterOptions parse_cluster_shape(const std::string& shape) {
  NetnsClusterOptions o;
  const char* end = shape.data() + shape.size();
  auto [x, e1] = std::from_chars(shape.data(), end, o.hosts);
  if (e1 != std::errc() || x == end || *x != 'x' ||
      std::from_chars(x + 1, end, o.ranks_per_host).ptr != end)
    o.hosts = 0;
  if (o.hosts < 1 || o.hosts > 250 || o.ranks_per_host < 1)
    throw UsageError(
        cat("--netns-cluster ", shape,
            ": expected HOSTSxRANKS, e.g. 2x2 (1 to 250 hosts, at least 1 rank each)"));
  return o;
}

double emulated_burst_bytes(const std::string& rate) {
  return std::max(15000.0, rate_bytes_per_second(rate) * 0.004);
}

double rate_bytes_per_second(const std::string& rate) {
  for (const auto& [unit, bits] :
       {std::pair{"gbit", 1e9}, std::pair{"mbit", 1e6}, std::pair{"kbit", 1e3}}) {
    const std::string u = unit;
    if (rate.size() > u.size() && rate.compare(rate.size() - u.size(), u.size(), u) == 0) {
      const std::string number = rate.substr(0, rate.size() - u.size());
      char* end = nullptr;
      const double value = std::strtod(number.c_str(), &end);
      if (end == number.c_str() + number.size() && value > 0 && std::isfinite(value))
        return value * bits / 8;
      break;
    }
  }
  throw UsageError(cat("--bandwidth ", rate, ": expected a rate like 100mbit, 1gbit or 500kbit"));
}

NetnsCluster::NetnsCluster(const NetnsClusterOptions& options)
    : options_(options), prefix_(cat("dml", ::getpid())) {
  if (!options_.bandwidth.empty()) rate_bytes_per_second(options_.bandwidth);  // checks it
  for (const auto& ns : remove_abandoned())
    std::fprintf(stderr,
                 "distml launch: removed network namespace %s, left by a launcher that died\n",
                 ns.c_str());
  try {
    create();
  } catch (...) {
    remove();
    throw;
  }
}

NetnsCluster::~NetnsCluster() { remove(); }

std::string NetnsCluster::host_name(int host) const { return cat("h", host); }

std::string NetnsCluster::address(int host) const { return cat("10.213.0.", host + 1); }

std::string NetnsCluster::namespace_of(int host) const { return cat(prefix_, "-h", host); }

void NetnsCluster::create() {
  const std::string ip = find_tool("ip");
  find_tool("unshare");
  const std::string sw = prefix_ + "-sw";
  if (auto error = run_for_error({ip, "netns", "add", sw}); !error.empty())
    throw UsageError(cat("distml launch --netns-cluster: cannot create a network namespace (",
                         error,
                         "); it needs root or CAP_SYS_ADMIN and a kernel with network namespaces"));
  created_.push_back(sw);
  run_checked({ip, "-n", sw, "link", "add", "br0", "type", "bridge"});
  run_checked({ip, "-n", sw, "link", "set", "br0", "up"});
  for (int h = 0; h < options_.hosts; ++h) {
    const std::string ns = namespace_of(h), port = cat("v", h);
    run_checked({ip, "netns", "add", ns});
    created_.push_back(ns);
    run_checked({ip, "-n", sw, "link", "add", port, "type", "veth", "peer", "name", kInterface,
                 "netns", ns});
    run_checked({ip, "-n", sw, "link", "set", port, "master", "br0", "up"});
    run_checked({ip, "-n", ns, "addr", "add", address(h) + "/24", "dev", kInterface});
    run_checked({ip, "-n", ns, "link", "set", kInterface, "up"});
    run_checked({ip, "-n", ns, "link", "set", "lo", "up"});
    shape(ns, kInterface);  // what the host sends
    shape(sw, port);        // what it receives
  }
}

// netem (delay) at the root where a latency is asked for, the token bucket (rate) under it.
void NetnsCluster::shape(const std::string& ns, const std::string& device) const {
  if (options_.bandwidth.empty() && options_.latency.empty()) return;
  const std::string tc = find_tool("tc");
  std::vector<std::string> parent = {"root"};
  if (!options_.latency.empty()) {
    const auto error = run_for_error({tc, "-n", ns, "qdisc", "add", "dev", device, "root", "handle",
                                      "1:", "netem", "delay", options_.latency});
    if (!error.empty())
      throw UsageError(cat("--latency ", options_.latency, ": tc netem said: ", error,
                           ". Delaying packets needs the kernel's netem module (sch_netem), "
                           "which tc's token bucket cannot stand in for; leave --latency out"));
    parent = {"parent", "1:1"};
  }
  if (options_.bandwidth.empty()) return;
  const auto burst = static_cast<long long>(emulated_burst_bytes(options_.bandwidth));
  std::vector<std::string> argv = {tc, "-n", ns, "qdisc", "add", "dev", device};
  argv.insert(argv.end(), parent.begin(), parent.end());
  argv.insert(argv.end(), {"tbf", "rate", options_.bandwidth, "burst", std::to_string(burst),
                           "latency", "50ms"});
  run_checked(argv);
}

std::vector<std::string> NetnsCluster::on_host(int host,
                                               const std::vector<std::string>& command) const {
  std::vector<std::string> argv = {find_tool("ip"),
                                   "netns",
                                   "exec",
                                   namespace_of(host),
                                   find_tool("unshare"),
                                   "--uts",
                                   "sh",
                                   "-c",
                                   cat("hostname ", host_name(host), " && exec \"$@\""),
                                   "sh"};
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

std::string NetnsCluster::folder() {
  if (folder_.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "distml-netns-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw Error("distml launch: cannot create a temporary folder");
    folder_ = tmpl;
  }
  return folder_;
}

std::string NetnsCluster::mpi_hostfile() {
  const std::string path = folder() + "/hostfile";
  std::ofstream out(path);
  for (int h = 0; h < options_.hosts; ++h)
    out << address(h) << " slots=" << options_.ranks_per_host << "\n";
  if (!out) throw Error(cat("distml launch: cannot write ", path));
  return path;
}

// mpirun starts its daemons through a remote shell: `agent HOST COMMAND...`, the command to be
// read by a shell on HOST, as ssh would.
std::string NetnsCluster::mpi_agent() {
  const std::string path = folder() + "/agent";
  std::ofstream out(path);
  out << "#!/bin/sh\n# mpirun's remote shell on a distml netns cluster.\nhost=$1\nshift\n"
      << "case \"$host\" in\n";
  for (int h = 0; h < options_.hosts; ++h)
    out << "  " << address(h) << ") exec " << find_tool("ip") << " netns exec " << namespace_of(h)
        << " " << find_tool("unshare") << " --uts sh -c \"hostname " << host_name(h)
        << " && $*\" ;;\n";
  out << "  *) echo \"distml netns agent: no host $host\" >&2; exit 1 ;;\nesac\n";
  out.close();
  if (!out || ::chmod(path.c_str(), 0755) != 0)
    throw Error(cat("distml launch: cannot write ", path));
  return path;
}

namespace {

// Every process still in network namespace `ns` (named under /run/netns), killed: what a host
// that lost its link leaves behind (a daemon and ranks that cannot hear the stop), which would
// otherwise outlive the namespace. Matched by the namespace's inode.
void kill_processes_in(const std::string& ns) {
  struct stat target {};
  if (::stat(cat("/run/netns/", ns).c_str(), &target) != 0) return;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename();
    struct stat own {};
    if (pid.find_first_not_of("0123456789") != std::string::npos ||
        ::stat((entry.path() / "ns" / "net").c_str(), &own) != 0)
      continue;
    if (own.st_ino == target.st_ino && own.st_dev == target.st_dev)
      ::kill(static_cast<pid_t>(std::stol(pid)), SIGKILL);
  }
}

}  // namespace

std::vector<std::string> NetnsCluster::remove_abandoned() {
  static const std::regex ours(R"(dml(\d{1,9})-(sw|h\d+))");
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/run/netns", ec)) {
    const std::string ns = entry.path().filename();
    std::smatch m;
    if (!std::regex_match(ns, m, ours)) continue;
    const auto pid = static_cast<pid_t>(std::stol(m[1].str()));
    if (::kill(pid, 0) == 0 || errno == EPERM) continue;  // its launcher still runs
    kill_processes_in(ns);
    if (run_for_error({find_tool("ip"), "netns", "del", ns}).empty()) removed.push_back(ns);
  }
  return removed;
}

void NetnsCluster::remove() noexcept {
  try {
    const std::string ip = find_tool("ip");
    for (const auto& ns : created_) kill_processes_in(ns);
    for (auto it = created_.rbegin(); it != created_.rend(); ++it)
      if (auto error = run_for_error({ip, "netns", "del", *it}); !error.empty())
        std::fprintf(stderr, "distml launch: could not delete network namespace %s: %s\n",
                     it->c_str(), error.c_str());
    created_.clear();
    if (!folder_.empty()) std::filesystem::remove_all(folder_);
    folder_.clear();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "distml launch: cleaning up the netns cluster: %s\n", e.what());
  }
}

}  // namespace distml::cli
