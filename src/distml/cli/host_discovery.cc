#include "host_discovery.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include "distml/core/error.h"
#include "distml/core/parse.h"

namespace distml::cli {

std::vector<HostSlots> parse_host_list(std::string_view text, const std::string& source) {
  std::vector<HostSlots> hosts;
  std::set<std::string, std::less<>> seen;
  int number = 0;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    ++number;
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
      line.remove_suffix(1);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front())))
      line.remove_prefix(1);
    if (line.empty() || line.front() == '#') continue;
    const auto bad = [&](const std::string& why) {
      return UsageError(cat(source, ":", number, ": '", line, "': ", why,
                            "; expected a host per line, HOST or HOST:SLOTS"));
    };
    const std::size_t colon = line.find(':');
    HostSlots h{std::string(line.substr(0, colon)), 0};
    if (h.host.empty() || h.host.find_first_of(" \t") != std::string::npos)
      throw bad("not a host name");
    if (colon != std::string_view::npos) {
      const std::string slots(line.substr(colon + 1));
      char* rest = nullptr;
      const long n = std::strtol(slots.c_str(), &rest, 10);
      if (slots.empty() || *rest || n < 1 || n > 1'000'000) throw bad("slots must be a count >= 1");
      h.slots = static_cast<int>(n);
    }
    if (!seen.insert(h.host).second) throw bad("host listed twice");
    hosts.push_back(std::move(h));
  }
  return hosts;
}

std::vector<HostSlots> discover_hosts(const std::string& script) {
  int out[2];
  if (::pipe(out) != 0) throw Error("host discovery: pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw Error("host discovery: fork failed");
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::close(out[0]), ::close(out[1]);
    ::execl(script.c_str(), script.c_str(), static_cast<char*>(nullptr));
    std::fprintf(stderr, "distml launch: cannot run the host discovery script %s: %s\n",
                 script.c_str(), std::strerror(errno));
    std::_Exit(127);
  }
  ::close(out[1]);
  // Its whole output, or a kill at the deadline: a discovery that hangs must not hold the job.
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (timed_out) throw UsageError(cat("host discovery script ", script, ": no answer within 10 s"));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw UsageError(cat("host discovery script ", script, " failed (",
                         WIFEXITED(status) ? cat("exit code ", WEXITSTATUS(status))
                                           : cat("signal ", WTERMSIG(status)),
                         ")"));
  return parse_host_list(text, script);
}

}  // namespace distml::cli
