// The Communicator: the one interface through which every part of distml moves data.
// It runs over an Engine chosen at run time (mpi, gloo, local) and adds what engines do not
// have: all-reduce algorithms over point-to-point, asynchronous collectives, a start-up
// fingerprint check, per-operation deadlines and a diagnosis of who did not arrive.
//
// Ordering: collectives run in the order a rank issues them, and every rank must issue the
// same collectives in the same order (as in MPI). Point-to-point calls may come from any
// thread and never match collective traffic.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "distml/comm/types.h"
#include "distml/comm/work.h"

namespace distml::comm {

class AlgoContext;
class ShmSegment;

class Engine;
class CollectiveQueue;
class StallInspector;

/// How a communicator is set up. Every rank must pass the same values.
struct CommOptions {
  /// Deadline of every blocking call, and of each asynchronous operation.
  Millis timeout{300'000};
  /// After a timeout, how long a rank listens for the others before naming the missing ones.
  Millis diagnose_grace{3'000};
  /// > 0: after this long in one collective, the rank logs which ranks it waits for, again at
  /// a back-off, and once 2 s before the timeout, whose error then names them
  /// (stall_inspector.h); 0: no inspector.
  Millis stall_warn{0};
  /// A caller's hash (of its config, model shapes, ...) that must agree on every rank.
  std::uint64_t fingerprint = 0;
  /// Before each collective, check that all ranks call the same operation with the same
  /// count, dtype and root (one extra small all-reduce). Off by default, as in c10d.
  bool check_collectives = false;
  /// Tests and experiments on one machine: take ranks [k n, (k + 1) n) as sharing host k, as
  /// the hierarchical all-reduce sees hosts; 0 (the default) takes the real host names.
  int emulated_ranks_per_host = 0;
};

/// Options of one all-reduce.
struct AllreduceOptions {
  ReduceOp op = ReduceOp::sum;
  Algorithm algorithm = Algorithm::automatic;
  /// Pipelining granularity of the ring algorithm.
  std::size_t ring_chunk_bytes = 256 << 10;
};

class Communicator {
 public:
  /// Takes over `engine` and exchanges the start-up fingerprint (distml version, world size
  /// and options.fingerprint); throws CommError on every rank if they differ and
  /// TimeoutError naming the ranks that never joined.
  Communicator(std::unique_ptr<Engine> engine, CommOptions options);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  std::string_view engine_name() const;
  const CommOptions& options() const { return options_; }

  // Point-to-point. Tags are in [0, kMaxTag]; a receive must be posted with the exact size sent.
  static constexpr int kMaxTag = (1 << 20) - 1;
  void send(ConstBuffer data, int dst, int tag);
  void recv(Buffer data, int src, int tag);
  Work isend(ConstBuffer data, int dst, int tag);
  Work irecv(Buffer data, int src, int tag);

  // Collectives. In-place when `in` and `out` are the same memory (or `in` is this rank's
  // block of `out` for allgather, or `out` is this rank's block of `in` for reduce_scatter).
  void allreduce(Buffer data, const AllreduceOptions& options = {});
  void allreduce(ConstBuffer in, Buffer out, const AllreduceOptions& options = {});
  // The other collectives take `algorithm`: native (the engine's own), auto (= native), or
  // their one point-to-point algorithm: tree for broadcast, ring for allgather(v) and
  // reduce_scatter, pairwise for alltoall.
  void broadcast(Buffer data, int root, Algorithm algorithm = Algorithm::automatic);
  /// out.count == size() * in.count.
  void allgather(ConstBuffer in, Buffer out, Algorithm algorithm = Algorithm::automatic);
  /// out.count == sum(counts); counts.size() == size(); in.count == counts[rank()].
  void allgatherv(ConstBuffer in, Buffer out, std::span<const std::size_t> counts,
                  Algorithm algorithm = Algorithm::automatic);
  /// in.count == size() * out.count; rank r receives the reduction of block r.
  void reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op = ReduceOp::sum,
                      Algorithm algorithm = Algorithm::automatic);
  /// in.count == out.count == size() * block; block j of in goes to rank j.
  void alltoall(ConstBuffer in, Buffer out, Algorithm algorithm = Algorithm::automatic);
  void barrier();

  // Asynchronous collectives: same contracts; see work.h for buffer ownership.
  Work iallreduce(Buffer data, const AllreduceOptions& options = {});
  Work iallreduce(ConstBuffer in, Buffer out, const AllreduceOptions& options = {});
  Work ibroadcast(Buffer data, int root, Algorithm algorithm = Algorithm::automatic);
  Work iallgather(ConstBuffer in, Buffer out, Algorithm algorithm = Algorithm::automatic);
  Work ireduce_scatter(ConstBuffer in, Buffer out, ReduceOp op = ReduceOp::sum,
                       Algorithm algorithm = Algorithm::automatic);
  Work ialltoall(ConstBuffer in, Buffer out, Algorithm algorithm = Algorithm::automatic);
  Work ibarrier();

  /// Splits into sub-groups: ranks with the same color form one, ordered by (key, rank).
  /// Collective over this communicator; a negative color joins no group (returns null).
  /// The new communicator has the same options.
  std::unique_ptr<Communicator> split(int color, int key);

  /// The algorithm `automatic` picks for `bytes` on this engine and world size.
  Algorithm choose_algorithm(std::size_t bytes) const;
  /// Each rank's host (0, 1, ... in the order of each host's lowest rank), from the start-up
  /// handshake.
  const std::vector<int>& host_of() const { return host_of_; }
  /// The number of ranks on every host, or 0 where hosts hold different numbers.
  int ranks_per_host() const;

 private:
  struct Op;
  Op allreduce_op(ConstBuffer in, Buffer out, const AllreduceOptions& o) const;
  Op broadcast_op(Buffer data, int root, Algorithm a) const;
  Op allgather_op(ConstBuffer in, Buffer out, Algorithm a) const;
  Op allgatherv_op(ConstBuffer in, Buffer out, std::span<const std::size_t> counts,
                   Algorithm a) const;
  Op reduce_scatter_op(ConstBuffer in, Buffer out, ReduceOp red, Algorithm a) const;
  Op alltoall_op(ConstBuffer in, Buffer out, Algorithm a) const;
  void run_now(Op op);
  Work submit(Op op);
  void run(Op& op);
  void execute(Op& op);
  /// The shared-memory segment of this rank's host (collective over the world: every host's
  /// ranks make theirs at once).
  ShmSegment& host_segment(AlgoContext& ctx);
  void check_agreement(const Op& op, Deadline deadline);
  void mark_broken(const std::string& why);
  void check_usable() const;
  void check_peer(int peer, const char* what) const;
  void check_tag(int tag) const;

  std::unique_ptr<Engine> engine_;
  CommOptions options_;
  std::vector<int> host_of_;
  std::unique_ptr<ShmSegment> shm_;  // this host's ranks', made by the first collective needing it
  std::unique_ptr<CollectiveQueue> queue_;
  std::shared_ptr<StallInspector> inspector_;  // with options.stall_warn; stops before the engine
  std::atomic<std::uint64_t> next_seq_{0};
  std::uint64_t splits_ = 0;
  mutable std::mutex broken_mutex_;
  std::string broken_;  // why the communicator is unusable, after a failure
};

}  // namespace distml::comm
