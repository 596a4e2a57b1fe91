#include "distml/comm/communicator.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <vector>

#include "distml/comm/algorithms/agreement.h"
#include "distml/comm/algorithms/algorithms.h"
#include "distml/comm/auto_policy.h"
#include "distml/comm/collective_queue.h"
#include "distml/comm/diagnose.h"
#include "distml/comm/engine.h"
#include "distml/comm/handshake.h"
#include "distml/comm/protocol_tags.h"
#include "distml/comm/reduce.h"
#include "distml/comm/stall_inspector.h"

namespace distml::comm {
namespace {

// Tags of the communicator's own protocol on the collective channel, far above the few
// hundred that algorithms use.
constexpr int kDiagnoseTag = protocol_tag::kDiagnose;
// Each rank's slot in the shared-memory segment, cut into one part per rank of the host: a
// piece this size stays in the caches between being copied in, reduced and copied out.
// 64-256 KiB measured alike at 2 ranks (docs/benchmarks.md).
constexpr std::size_t kShmSlotBytes = 256u << 10;

enum class Kind : std::uint8_t {
  allreduce,
  broadcast,
  allgather,
  allgatherv,
  reduce_scatter,
  alltoall,
  barrier
};
constexpr const char* kKindNames[] = {"allreduce",      "broadcast", "allgather", "allgatherv",
                                      "reduce_scatter", "alltoall",  "barrier"};

bool same_memory(const void* a, const void* b) { return a == b; }

// Scratch memory of the thread running a collective: one op at a time runs on a thread.
thread_local std::vector<std::byte> tls_scratch;

}  // namespace

struct Communicator::Op {
  Op(Kind k, ConstBuffer i, Buffer o) : kind(k), in(i), out(o) {}
  Kind kind;
  ConstBuffer in;
  Buffer out;
  ReduceOp reduce = ReduceOp::sum;
  Algorithm algorithm = Algorithm::automatic;
  int root = 0;
  std::size_t ring_chunk_bytes = 256 << 10;
  std::vector<std::size_t> counts;
  std::uint64_t seq = 0;

  std::string name() const {
    return cat(kKindNames[static_cast<int>(kind)], " #", seq, " (", algorithm_name(algorithm), ", ",
               in.bytes(), " bytes ", dtype_name(in.dtype), ")");
  }
};

// ---------------------------------------------------------------------------------------------
// Construction.

Communicator::Communicator(std::unique_ptr<Engine> engine, CommOptions options)
    : engine_(std::move(engine)), options_(options), queue_(std::make_unique<CollectiveQueue>()) {
  DML_CHECK(engine_ != nullptr, "communicator needs an engine");
  if (options_.timeout.count() <= 0) throw UsageError("communicator timeout must be positive");
  host_of_ = exchange_fingerprint(*engine_, options_);
  // The last ask leaves the answers (1 s) and a tick of the inspector time before the timeout.
  const Millis last_ask =
      options_.timeout > Millis{4'000} ? options_.timeout - Millis{2'000} : options_.timeout / 2;
  if (options_.stall_warn.count() > 0 && size() > 1)
    inspector_ = std::make_shared<StallInspector>(
        *engine_, options_.stall_warn, last_ask,
        [](const std::string& line) { std::fprintf(stderr, "distml: %s\n", line.c_str()); });
}

int Communicator::ranks_per_host() const {
  const int hosts = *std::max_element(host_of_.begin(), host_of_.end()) + 1;
  for (int h = 0; h < hosts; ++h)
    if (std::count(host_of_.begin(), host_of_.end(), h) * hosts != size()) return 0;
  return size() / hosts;
}

Communicator::~Communicator() = default;

int Communicator::rank() const { return engine_->rank(); }
int Communicator::size() const { return engine_->size(); }
std::string_view Communicator::engine_name() const { return engine_->name(); }

void Communicator::check_usable() const {
  std::lock_guard lock(broken_mutex_);
  if (!broken_.empty())
    throw CommError(cat("communicator unusable after an earlier failure: ", broken_));
}

void Communicator::check_peer(int peer, const char* what) const {
  if (peer < 0 || peer >= size())
    throw UsageError(cat(what, ": rank ", peer, " is outside the world of ", size(), " ranks"));
}

void Communicator::check_tag(int tag) const {
  if (tag < 0 || tag > kMaxTag)
    throw UsageError(cat("tag ", tag, " is outside [0, ", kMaxTag, "]"));
}

// ---------------------------------------------------------------------------------------------
// Point-to-point.

Work Communicator::isend(ConstBuffer data, int dst, int tag) {
  check_usable();
  check_peer(dst, "send");
  check_tag(tag);
  return Work(engine_->isend(Channel::user, data.data, data.bytes(), dst, tag), options_.timeout);
}

Work Communicator::irecv(Buffer data, int src, int tag) {
  check_usable();
  check_peer(src, "recv");
  check_tag(tag);
  return Work(engine_->irecv(Channel::user, data.data, data.bytes(), src, tag), options_.timeout);
}

void Communicator::send(ConstBuffer data, int dst, int tag) { isend(data, dst, tag).wait(); }
void Communicator::recv(Buffer data, int src, int tag) { irecv(data, src, tag).wait(); }

// ---------------------------------------------------------------------------------------------
// Collectives: validate, then run in order (inline or queued), with diagnosis on timeout.

namespace {

void check_dtypes(ConstBuffer in, Buffer out, const char* what) {
  if (in.dtype != out.dtype)
    throw UsageError(
        cat(what, ": input is ", dtype_name(in.dtype), " but output is ", dtype_name(out.dtype)));
}

void check_count(std::size_t got, std::size_t want, const char* what, const char* which) {
  if (got != want)
    throw UsageError(cat(what, ": ", which, " has ", got, " elements, expected ", want));
}

// Which algorithms each collective has besides native and auto.
Algorithm resolve(Kind kind, Algorithm a) {
  Algorithm p2p = Algorithm::native;
  switch (kind) {
    case Kind::broadcast: p2p = Algorithm::tree; break;
    case Kind::allgather:
    case Kind::allgatherv:
    case Kind::reduce_scatter: p2p = Algorithm::ring; break;
    case Kind::alltoall: p2p = Algorithm::pairwise; break;
    default: break;
  }
  if (a == Algorithm::automatic) return Algorithm::native;
  if (a == Algorithm::native || a == p2p) return a;
  throw UsageError(cat(kKindNames[static_cast<int>(kind)], " has no algorithm '", algorithm_name(a),
                       "' (valid: native, ",
                       p2p == Algorithm::native ? "" : cat(algorithm_name(p2p), ", "), "auto)"));
}

}  // namespace

Algorithm Communicator::choose_algorithm(std::size_t bytes) const {
  const int per_host = ranks_per_host();
  const int hosts = *std::max_element(host_of_.begin(), host_of_.end()) + 1;
  return auto_allreduce_algorithm(engine_->name(), size(), bytes, hosts, per_host);
}

void Communicator::check_agreement(const Op& op, Deadline deadline) {
  AlgoContext ctx(
      *engine_, deadline, [&op] { return op.name(); }, tls_scratch);
  comm::check_agreement(
      ctx,
      {static_cast<std::int64_t>(op.kind), static_cast<std::int64_t>(op.in.count),
       static_cast<std::int64_t>(op.in.dtype), op.root, static_cast<std::int64_t>(op.reduce)},
      kKindNames);
}

ShmSegment& Communicator::host_segment(AlgoContext& ctx) {
  if (!shm_) {
    std::vector<int> local;
    for (int r = 0; r < size(); ++r)
      if (host_of_[r] == host_of_[rank()]) local.push_back(r);
    AlgoContext group = ctx.group(std::move(local));
    shm_ = ShmSegment::create(group, kShmSlotBytes / group.size());
  }
  return *shm_;
}

void Communicator::execute(Op& op) {
  const Deadline deadline = Deadline::after(options_.timeout);
  if (options_.check_collectives) check_agreement(op, deadline);
  AlgoContext ctx(
      *engine_, deadline, [&op] { return op.name(); }, tls_scratch);
  const std::size_t es = dtype_size(op.out.dtype);
  auto* out = static_cast<std::byte*>(op.out.data);
  switch (op.kind) {
    case Kind::allreduce: {
      if (!same_memory(op.in.data, op.out.data) && op.in.count)
        std::memcpy(op.out.data, op.in.data, op.in.bytes());
      const ReduceOp red = op.reduce == ReduceOp::avg ? ReduceOp::sum : op.reduce;
      switch (op.algorithm) {
        case Algorithm::native: engine_->allreduce(op.out, red, deadline); break;
        case Algorithm::ring: ring_allreduce(ctx, op.out, red, op.ring_chunk_bytes); break;
        case Algorithm::halving_doubling: halving_doubling_allreduce(ctx, op.out, red); break;
        case Algorithm::tree: tree_allreduce(ctx, op.out, red); break;
        case Algorithm::hierarchical:
          hierarchical_allreduce(ctx, op.out, red, host_of_, host_segment(ctx),
                                 op.ring_chunk_bytes);
          break;
        case Algorithm::shm:
          shm_collective(ctx, host_segment(ctx), op.out, red, ShmStep::allreduce);
          break;
        default: DML_CHECK(false, "unresolved algorithm ", algorithm_name(op.algorithm));
      }
      if (op.reduce == ReduceOp::avg) divide_by(op.out.data, op.out.count, op.out.dtype, size());
      return;
    }
    case Kind::broadcast:
      if (op.algorithm == Algorithm::tree) return tree_broadcast(ctx, op.out, op.root);
      return engine_->broadcast(op.out, op.root, deadline);
    case Kind::allgather:
    case Kind::allgatherv: {
      std::size_t offset = std::accumulate(op.counts.begin(), op.counts.begin() + rank(), 0ul);
      if (op.algorithm == Algorithm::ring) {
        if (!same_memory(op.in.data, out + offset * es) && op.in.count)
          std::memmove(out + offset * es, op.in.data, op.in.bytes());
        return ring_allgatherv(ctx, op.out, op.counts);
      }
      ConstBuffer in = op.in;
      if (same_memory(op.in.data, out + offset * es) && op.in.count) {  // engines want distinct
        std::byte* copy = ctx.scratch(op.in.bytes());
        std::memcpy(copy, op.in.data, op.in.bytes());
        in.data = copy;
      }
      if (op.kind == Kind::allgather) return engine_->allgather(in, op.out, deadline);
      return engine_->allgatherv(in, op.out, op.counts, deadline);
    }
    case Kind::reduce_scatter: {
      ConstBuffer in = op.in;
      const ReduceOp red = op.reduce == ReduceOp::avg ? ReduceOp::sum : op.reduce;
      if (op.algorithm == Algorithm::ring) {
        ring_reduce_scatter(ctx, in, op.out, red);  // works on a copy: aliasing is fine
      } else {
        auto* in_bytes = static_cast<const std::byte*>(op.in.data);
        if (op.out.data >= in_bytes && op.out.data < in_bytes + op.in.bytes()) {
          std::byte* copy = ctx.scratch(op.in.bytes());
          std::memcpy(copy, op.in.data, op.in.bytes());
          in.data = copy;
        }
        engine_->reduce_scatter(in, op.out, red, deadline);
      }
      if (op.reduce == ReduceOp::avg) divide_by(op.out.data, op.out.count, op.out.dtype, size());
      return;
    }
    case Kind::alltoall: {
      ConstBuffer in = op.in;
      if (same_memory(op.in.data, op.out.data) && op.in.count) {
        std::byte* copy = ctx.scratch(op.in.bytes());
        std::memcpy(copy, op.in.data, op.in.bytes());
        in.data = copy;
      }
      if (op.algorithm == Algorithm::pairwise) return pairwise_alltoall(ctx, in, op.out);
      return engine_->alltoall(in, op.out, deadline);
    }
    case Kind::barrier: return engine_->barrier(deadline);
  }
}

void Communicator::run(Op& op) {
  check_usable();
  struct Inspected {  // tells the inspector which operation this rank waits in
    StallInspector* inspector;
    ~Inspected() {
      if (inspector) inspector->left();
    }
  } inspected{inspector_.get()};
  if (inspector_) inspector_->entered(op.seq, op.name());
  try {
    execute(op);
  } catch (const TimeoutError& e) {
    // The inspector asked the peers 2 s ago (stall_inspector.h): its report names the ranks
    // waited for, and a short exchange still tells the others that this rank arrived.
    const std::string report = inspector_ ? inspector_->last_report() : "";
    const Millis grace =
        report.empty() ? options_.diagnose_grace : std::min(options_.diagnose_grace, Millis{500});
    const std::string missing = diagnose_missing(*engine_, op.seq, kDiagnoseTag, grace);
    std::string msg = cat(e.what(), " on rank ", rank(), " after ", options_.timeout.count(),
                          " ms; ", report.empty() ? missing : report);
    mark_broken(msg);
    throw TimeoutError(msg);
  } catch (const CommError& e) {
    mark_broken(e.what());  // peers may be left half-way through: nothing after this is safe
    throw;
  }
}

void Communicator::mark_broken(const std::string& why) {
  std::lock_guard lock(broken_mutex_);
  if (broken_.empty()) broken_ = why;
}

void Communicator::run_now(Op op) {
  op.seq = next_seq_++;
  queue_->run_sync([&] { run(op); });
}

Work Communicator::submit(Op op) {
  op.seq = next_seq_++;
  auto shared = std::make_shared<Op>(std::move(op));
  auto name = shared->name();
  std::function<std::string()> diagnosis;
  if (inspector_)
    diagnosis = [inspector = std::weak_ptr(inspector_)] {
      auto alive = inspector.lock();
      return alive ? alive->last_report() : std::string();
    };
  return Work(queue_->run_async([this, shared] { run(*shared); }, name), options_.timeout,
              std::move(diagnosis));
}

// ---------------------------------------------------------------------------------------------
// The public collectives: argument checks, then an Op.

Communicator::Op Communicator::allreduce_op(ConstBuffer in, Buffer out,
                                            const AllreduceOptions& o) const {
  check_dtypes(in, out, "allreduce");
  check_count(out.count, in.count, "allreduce", "output");
  Op op{Kind::allreduce, in, out};
  op.reduce = o.op;
  op.algorithm = o.algorithm == Algorithm::automatic ? choose_algorithm(in.bytes()) : o.algorithm;
  if (op.algorithm == Algorithm::pairwise)
    throw UsageError(
        "allreduce has no algorithm 'pairwise' (valid: native, ring, hd, tree, hierarchical, "
        "shm, auto)");
  if (op.algorithm == Algorithm::hierarchical && ranks_per_host() == 0)
    throw UsageError(
        "the hierarchical all-reduce needs the same number of ranks on every host; "
        "choose another algorithm for this placement");
  if (op.algorithm == Algorithm::shm && ranks_per_host() != size())
    throw UsageError(
        "the shared-memory all-reduce needs every rank on one host; across hosts use "
        "'hierarchical', which reduces through shared memory within each host");
  op.ring_chunk_bytes = std::max<std::size_t>(o.ring_chunk_bytes, 1);
  return op;
}

Communicator::Op Communicator::broadcast_op(Buffer data, int root, Algorithm a) const {
  check_peer(root, "broadcast root");
  Op op{Kind::broadcast, data, data};
  op.root = root;
  op.algorithm = resolve(Kind::broadcast, a);
  return op;
}

Communicator::Op Communicator::allgather_op(ConstBuffer in, Buffer out, Algorithm a) const {
  check_dtypes(in, out, "allgather");
  check_count(out.count, in.count * size(), "allgather", "output");
  Op op{Kind::allgather, in, out};
  op.counts.assign(size(), in.count);
  op.algorithm = resolve(Kind::allgather, a);
  return op;
}

Communicator::Op Communicator::allgatherv_op(ConstBuffer in, Buffer out,
                                             std::span<const std::size_t> counts,
                                             Algorithm a) const {
  check_dtypes(in, out, "allgatherv");
  check_count(counts.size(), size(), "allgatherv", "counts");
  check_count(in.count, counts[rank()], "allgatherv", "input");
  check_count(out.count, std::accumulate(counts.begin(), counts.end(), 0ul), "allgatherv",
              "output");
  Op op{Kind::allgatherv, in, out};
  op.counts.assign(counts.begin(), counts.end());
  op.algorithm = resolve(Kind::allgatherv, a);
  return op;
}

Communicator::Op Communicator::reduce_scatter_op(ConstBuffer in, Buffer out, ReduceOp red,
                                                 Algorithm a) const {
  check_dtypes(in, out, "reduce_scatter");
  check_count(in.count, out.count * size(), "reduce_scatter", "input");
  Op op{Kind::reduce_scatter, in, out};
  op.reduce = red;
  op.algorithm = resolve(Kind::reduce_scatter, a);
  return op;
}

Communicator::Op Communicator::alltoall_op(ConstBuffer in, Buffer out, Algorithm a) const {
  check_dtypes(in, out, "alltoall");
  check_count(out.count, in.count, "alltoall", "output");
  if (in.count % size() != 0)
    throw UsageError(
        cat("alltoall: ", in.count, " elements do not split into ", size(), " equal blocks"));
  Op op{Kind::alltoall, in, out};
  op.algorithm = resolve(Kind::alltoall, a);
  return op;
}

void Communicator::allreduce(Buffer data, const AllreduceOptions& o) {
  run_now(allreduce_op(data, data, o));
}
void Communicator::allreduce(ConstBuffer in, Buffer out, const AllreduceOptions& o) {
  run_now(allreduce_op(in, out, o));
}
void Communicator::broadcast(Buffer data, int root, Algorithm a) {
  run_now(broadcast_op(data, root, a));
}
void Communicator::allgather(ConstBuffer in, Buffer out, Algorithm a) {
  run_now(allgather_op(in, out, a));
}
void Communicator::allgatherv(ConstBuffer in, Buffer out, std::span<const std::size_t> counts,
                              Algorithm a) {
  run_now(allgatherv_op(in, out, counts, a));
}
void Communicator::reduce_scatter(ConstBuffer in, Buffer out, ReduceOp red, Algorithm a) {
  run_now(reduce_scatter_op(in, out, red, a));
}
void Communicator::alltoall(ConstBuffer in, Buffer out, Algorithm a) {
  run_now(alltoall_op(in, out, a));
}
void Communicator::barrier() { run_now(Op{Kind::barrier, {}, {}}); }

Work Communicator::iallreduce(Buffer data, const AllreduceOptions& o) {
  return submit(allreduce_op(data, data, o));
}
Work Communicator::iallreduce(ConstBuffer in, Buffer out, const AllreduceOptions& o) {
  return submit(allreduce_op(in, out, o));
}
Work Communicator::ibroadcast(Buffer data, int root, Algorithm a) {
  return submit(broadcast_op(data, root, a));
}
Work Communicator::iallgather(ConstBuffer in, Buffer out, Algorithm a) {
  return submit(allgather_op(in, out, a));
}
Work Communicator::ireduce_scatter(ConstBuffer in, Buffer out, ReduceOp red, Algorithm a) {
  return submit(reduce_scatter_op(in, out, red, a));
}
Work Communicator::ialltoall(ConstBuffer in, Buffer out, Algorithm a) {
  return submit(alltoall_op(in, out, a));
}
Work Communicator::ibarrier() { return submit(Op{Kind::barrier, {}, {}}); }

// ---------------------------------------------------------------------------------------------
// Sub-groups.

std::unique_ptr<Communicator> Communicator::split(int color, int key) {
  check_usable();
  const int p = size();
  std::int32_t mine[2] = {color, key};
  std::vector<std::int32_t> all(2 * p);
  allgather(ConstBuffer{mine, 2, DType::i32}, Buffer{all.data(), all.size(), DType::i32});
  SplitGroup group;
  group.color = color;
  group.key = key;
  group.split_id = splits_++;
  for (int r = 0; r < p; ++r)
    if (all[2 * r] == color) group.members.push_back(r);
  std::stable_sort(group.members.begin(), group.members.end(),
                   [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
  group.new_rank = static_cast<int>(std::find(group.members.begin(), group.members.end(), rank()) -
                                    group.members.begin());
  auto engine = engine_->split(group, Deadline::after(options_.timeout));
  if (color < 0) return nullptr;
  CommOptions options = options_;
  options.stall_warn = Millis{0};  // only the world is inspected: sub-groups' stalls show there
  return std::make_unique<Communicator>(std::move(engine), options);
}

}  // namespace distml::comm
