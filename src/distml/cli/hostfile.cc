#include "hostfile.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "distml/core/error.h"

namespace distml::cli {
namespace {

// The N of `slots=N` (at `where`): a count >= 1.
int count_of(const std::string& value, const std::string& where) {
  char* rest = nullptr;
  const long n = std::strtol(value.c_str(), &rest, 10);
  if (value.empty() || *rest || n < 1 || n > 1'000'000)
    throw UsageError(cat(where, ": '", value, "' is not a count >= 1"));
  return static_cast<int>(n);
}

}  // namespace

std::vector<HostSlots> read_hostfile(const std::string& hostfile) {
  std::ifstream in(hostfile);
  if (!in) throw UsageError(cat("--hostfile ", hostfile, ": cannot read it"));
  std::vector<HostSlots> hosts;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    const std::string where = cat("--hostfile ", hostfile, ":", ++number);
    std::istringstream words(line.substr(0, line.find('#')));
    HostSlots host{"", 1};
    if (!(words >> host.host)) continue;
    for (std::string word; words >> word;) {
      const auto eq = word.find('=');
      const std::string key = word.substr(0, eq);
      if (eq == std::string::npos || (key != "slots" && key != "max_slots"))
        throw UsageError(
            cat(where, ": '", word, "': expected slots=N or max_slots=N after the ", "host name"));
      const int n = count_of(word.substr(eq + 1), where);
      if (key == "slots") host.slots = n;
    }
    const auto same = std::find_if(hosts.begin(), hosts.end(),
                                   [&](const HostSlots& h) { return h.host == host.host; });
    if (same == hosts.end())
      hosts.push_back(host);
    else if ((same->slots += host.slots) > 1'000'000)  // as mpirun counts a host named twice
      throw UsageError(cat(where, ": more than 1000000 slots on ", host.host));
  }
  if (hosts.empty()) throw UsageError(cat("--hostfile ", hostfile, ": names no host"));
  return hosts;
}

}  // namespace distml::cli
