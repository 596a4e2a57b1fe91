// The hosts an elastic job may run on, as a discovery script prints them (as Horovod's
// --host-discovery-script does): one host per line, "NAME" or "NAME:SLOTS"; blank lines and
// lines starting with '#' are skipped. distml launch runs the script at each start of the job
// and every 2 s while it runs (cli/launch.cc).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace distml::cli {

struct HostSlots {
  std::string host;
  int slots = 0;  // 0: not given (the host's default)
};

/// The hosts of a discovery script's output. UsageError naming `source`, the line and what was
/// expected on a malformed line, a repeated host or a count of slots below 1.
std::vector<HostSlots> parse_host_list(std::string_view text, const std::string& source);

/// Runs `script` (no arguments; at most 10 s) and parses what it prints. UsageError where it
/// cannot run, fails, takes too long or prints a malformed list.
std::vector<HostSlots> discover_hosts(const std::string& script);

}  // namespace distml::cli
