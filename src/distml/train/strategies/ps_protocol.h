// What parameter-server workers and servers agree on: who serves which parameters, the
// message tags, and the control words. Both sides derive it from the parameter shapes and
// the config alone, so it is identical on every rank without being sent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/train/optimizer_options.h"

namespace distml::train::ps {

enum class Mode { bsp, asp, ssp };
Mode parse_mode(const std::string& name);  // bsp | asp | ssp, else ConfigError

struct ServerOptions {
  Mode mode = Mode::bsp;
  int staleness = 0;  // ssp: a worker may run this many steps ahead of the slowest
  OptimizerOptions optim;
};

/// Ranks [0, workers) train; ranks [workers, workers + servers) serve.
struct Layout {
  int workers = 0, servers = 0;
  /// Parameter indices of each bucket, in the order backward completes them (bucket_planner).
  std::vector<std::vector<std::size_t>> buckets;
  std::vector<int> server_of;             // bucket -> server index in [0, servers)
  std::vector<std::size_t> elements;      // bucket -> number of elements
  std::vector<std::size_t> server_bytes;  // server index -> bytes of parameters it holds

  /// Buckets of at most `cap` bytes (the first `first_cap`), each given to the server with
  /// the fewest bytes so far: shards balanced by bytes, at bucket granularity.
  static Layout plan(const std::vector<std::size_t>& param_bytes,
                     const std::vector<std::size_t>& param_elements, int workers, int servers,
                     std::size_t first_cap, std::size_t cap);

  int server_rank(std::size_t bucket) const { return workers + server_of[bucket]; }
  /// The buckets server index `s` holds, in bucket order.
  std::vector<std::size_t> buckets_of(int s) const;
  /// The most bytes server index `s`'s optimizer state may take serialised (kStateTag).
  std::size_t max_state_bytes(int s) const;
};

// Tags. Per bucket b: its gradients (worker -> server) and parameters (server -> worker).
inline int push_tag(std::size_t bucket) { return 16 + 2 * static_cast<int>(bucket); }
inline int pull_tag(std::size_t bucket) { return 17 + 2 * static_cast<int>(bucket); }
// Per step, after the buckets: the step header {clock, learning rate} (worker -> server).
constexpr int kStepTag = 1;
// Control words (worker -> server), one double: sync (send me the current parameters once
// every worker has asked), stop (this worker has finished), or save (send me your optimizer
// state, for a checkpoint: worker 0 asks, after a sync).
constexpr int kControlTag = 2;
constexpr double kSync = 1, kStop = 2, kSave = 3;
// A server's optimizer state, as its size (one int64) then its bytes: server -> worker 0 on
// save; worker 0 -> server after a resume, behind the checkpoint's parameters (all of them,
// flat, in parameter order).
constexpr int kStateTag = 3;
// Parameters sent in answer to sync use each bucket's pull tag.

/// What a control word from a worker asks for.
enum class Control { sync, stop, save };
/// CommError naming `worker` and `server_rank` for a word that is none of kSync, kStop, kSave.
Control decode_control(double word, int worker, int server_rank);

/// A state size as announced (one int64) by rank `from`: CommError naming it when the size is
/// negative or above `limit` (Layout::max_state_bytes), before anything is allocated.
std::size_t checked_state_size(std::int64_t size, std::size_t limit, int from);

/// Staleness histogram bins: 0, 1, ..., kStalenessBins - 2, and "that many or more".
constexpr std::size_t kStalenessBins = 32;

/// Collective over `world`: `word` (kSync, kStop) from this worker to every server, blocking.
void tell_servers(comm::Communicator& world, const Layout& layout, double word);

/// Worker 0, after a sync, for a checkpoint: every server's optimizer state (ps_strategy.h,
/// 7.), in server order.
std::vector<std::string> collect_server_states(comm::Communicator& world, const Layout& layout);
/// Worker 0, after a resume: the checkpoint's parameters (every trainable one, flat, in order)
/// and each server's optimizer state (empty: none) to every server.
void send_resume(comm::Communicator& world, const Layout& layout, comm::ConstBuffer params,
                 const std::vector<std::string>& states);
/// A server rank, after a resume, before it serves: send_resume's parameters into `params`,
/// and the returned optimizer state.
std::string receive_resume(comm::Communicator& world, const Layout& layout, comm::Buffer params);

/// What a server measured, summed over servers at the end of the run.
struct ServerReport {
  std::vector<std::int64_t> staleness{std::vector<std::int64_t>(kStalenessBins, 0)};
  std::int64_t max_clock_gap = 0;  // most steps a worker was let ahead of the slowest
  std::int64_t updates = 0;        // optimizer steps applied
};

/// Collective over every rank of `world`, after the servers have stopped: the servers'
/// reports summed (a worker passes an empty one).
ServerReport sum_reports(const ServerReport& mine, comm::Communicator& world);

}  // namespace distml::train::ps
