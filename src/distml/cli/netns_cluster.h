// Hosts on one machine, for `distml launch --netns-cluster HxR`: H network namespaces, each
// with its own address and (through `unshare --uts`) its own host name, joined by a bridge.
// Each host's link can be shaped with a token bucket (tc tbf) in both directions, so that a run
// on one machine sees what a cluster's links would give it: 100 Mbit/s between volunteers,
// 1-25 Gbit/s between racks.
//
// Layout (P = "dml<launcher pid>"): namespace P-sw holds the bridge br0; host h is namespace
// P-h<h>, whose eth0 (address 10.213.0.<h+1>/24) is one end of a veth pair whose other end, v<h>,
// sits on br0. Nothing is created in the launcher's own namespace, so deleting the namespaces
// removes every link and queue with them. The destructor deletes them, and the files written
// for mpirun (a hostfile and its remote-shell agent) with their folder.
//
// Latency: tc's netem, which delays packets, is a kernel module many machines lack (this one
// did); tbf's own "latency" only bounds how long a packet may queue. So links are shaped in
// bandwidth only, and a latency is refused where netem is missing rather than faked.
#pragma once

#include <string>
#include <vector>

namespace distml::cli {

struct NetnsClusterOptions {
  int hosts = 2;
  int ranks_per_host = 1;
  std::string bandwidth;  // tc rate, e.g. "100mbit"; empty: links unshaped
  std::string latency;    // netem delay, e.g. "1ms"; empty: none
};

/// "2x4" -> hosts 2, ranks_per_host 4. UsageError otherwise.
NetnsClusterOptions parse_cluster_shape(const std::string& shape);

/// Bytes per second of a tc rate ("100mbit", "1gbit", "500kbit"). UsageError otherwise.
double rate_bytes_per_second(const std::string& rate);

/// The token bucket's burst of an emulated host's link at `rate`: 4 ms of the rate (what tbf
/// needs to reach it at the kernel's 250 Hz tick), at least ten full frames.
double emulated_burst_bytes(const std::string& rate);

/// The share of an emulated link's rate that carries TCP's payload: tbf counts whole Ethernet
/// frames, and at the veths' MTU of 1500 each TCP segment's 1448 bytes of payload travel with
/// 66 of headers (Ethernet 14, IPv4 20, TCP with timestamps 32).
constexpr double kEmulatedPayloadShare = 1448.0 / 1514.0;

class NetnsCluster {
 public:
  /// Removes the namespaces of clusters whose launcher is no longer alive (killed before it
  /// could remove them), with what still runs in them; returns their names. Run at the start
  /// of every cluster.
  static std::vector<std::string> remove_abandoned();

  /// Creates the namespaces, links and queues; on any failure removes what it made and throws
  /// (UsageError where the machine cannot: no `ip`, not allowed to create namespaces).
  explicit NetnsCluster(const NetnsClusterOptions& options);
  ~NetnsCluster();
  NetnsCluster(const NetnsCluster&) = delete;
  NetnsCluster& operator=(const NetnsCluster&) = delete;

  int hosts() const { return options_.hosts; }
  std::string host_name(int host) const;  // "h0"
  std::string address(int host) const;    // "10.213.0.1"
  static constexpr const char* kSubnet = "10.213.0.0/24";
  static constexpr const char* kInterface = "eth0";  // every host's link

  /// `command` run on `host`: in its namespace, with its host name.
  std::vector<std::string> on_host(int host, const std::vector<std::string>& command) const;
  /// A hostfile listing every host's address with ranks_per_host slots, and mpirun's remote
  /// shell agent that runs a command on the host an address names (written on first use).
  std::string mpi_hostfile();
  std::string mpi_agent();

 private:
  std::string namespace_of(int host) const;
  void create();
  void shape(const std::string& ns, const std::string& device) const;
  void remove() noexcept;
  std::string folder();

  NetnsClusterOptions options_;
  std::string prefix_;
  std::vector<std::string> created_;  // namespaces, in creation order
  std::string folder_;                // the mpi files, once written
};

}  // namespace distml::cli
