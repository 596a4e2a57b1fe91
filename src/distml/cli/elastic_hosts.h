// The hosts of a gloo job across its starts (distml launch on --hosts, --hostfile or
// --netns-cluster, with --min-np, --max-np and --host-discovery). At each start the world is the
// hosts available, in order, each with its ranks, up to --max-np ranks: every host the job was
// given, or those the discovery script lists now (host_discovery.h), less the hosts lost in a
// failed start. A lost host comes back only when the discovery script lists it while the job
// runs: it then joins as a new host does (joining()).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "host_discovery.h"

namespace distml::cli {

class ElasticHosts {
 public:
  /// `hosts`: the hosts the job was given, each with its ranks; `discovery`: a script that lists
  /// those available (empty: all of them); `max_np`: at most this many ranks (0: no bound).
  /// `other_hosts`: whether the script may list hosts the job was not given (real machines, one
  /// rank each unless it says; emulated hosts are only the cluster's).
  ElasticHosts(std::vector<HostSlots> hosts, std::string discovery, int max_np,
               bool other_hosts = false);

  /// The hosts of the next start, each with its ranks. UsageError where the discovery script
  /// fails or lists a host the job was not given (without other_hosts).
  std::vector<HostSlots> world() const;
  /// A failed start lost `host`: it is left out of the next starts.
  void lost(const std::string& host);
  /// While the job runs on `running`: a host the discovery script lists now that `running`
  /// lacks, where --max-np leaves room for it; empty where none (or without a script). It is
  /// no longer counted lost. A failing script is reported once and otherwise ignored: the job
  /// goes on as it is.
  std::string joining(const std::vector<HostSlots>& running);

  static int ranks(const std::vector<HostSlots>& world);

 private:
  std::vector<HostSlots> available() const;

  std::vector<HostSlots> hosts_;
  std::string discovery_;
  int max_np_;
  bool other_hosts_;
  std::set<std::string> lost_;
  bool warned_ = false;  // about a failing discovery script while the job ran
};

}  // namespace distml::cli
