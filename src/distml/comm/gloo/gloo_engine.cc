#include "distml/comm/gloo/gloo_engine.h"

#include <gloo/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/address.h>
#include <netdb.h>

#include <cstring>
#include <numeric>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "distml/comm/algorithms/agreement.h"
#include "distml/comm/algorithms/algorithms.h"
#include "distml/comm/half.h"

namespace distml::comm::gloo {
namespace {

enum Kind { kAllreduce, kBroadcast, kAllgather, kAlltoall, kBarrier };
constexpr const char* kKindNames[] = {"allreduce", "broadcast", "allgather", "alltoall", "barrier"};

at::ScalarType scalar_type(DType t) {
  switch (t) {
    case DType::f32: return at::kFloat;
    case DType::f64: return at::kDouble;
    case DType::f16: return at::kHalf;
    case DType::bf16: return at::kBFloat16;
    case DType::i32: return at::kInt;
    case DType::i64: return at::kLong;
    case DType::u8: return at::kByte;
  }
  DML_CHECK(false, "unknown dtype");
}

c10d::ReduceOp reduce_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return c10d::ReduceOp::SUM;
    case ReduceOp::min: return c10d::ReduceOp::MIN;
    case ReduceOp::max: return c10d::ReduceOp::MAX;
    case ReduceOp::prod: return c10d::ReduceOp::PRODUCT;
    case ReduceOp::avg: break;
  }
  DML_CHECK(false, "engines never get avg (the communicator sums and divides)");
}

// A tensor over the caller's memory: no copy. gloo only reads the inputs of collectives.
at::Tensor tensor_of(const void* data, std::size_t count, at::ScalarType type) {
  return torch::from_blob(const_cast<void*>(data), {static_cast<std::int64_t>(count)},
                          torch::TensorOptions().dtype(type));
}

// Data movement does not care about element types: move bytes (bf16 included).
at::Tensor bytes_of(const void* data, std::size_t bytes) {
  return tensor_of(data, bytes, at::kByte);
}

// Every rank sets distml/joined/<rank> and polls until all keys are there.
void await_ranks(c10d::Store& store, const GroupSetup& s) {
  const auto key = [](int r) { return cat("distml/joined/", r); };
  std::vector<std::string> keys;
  for (int r = 0; r < s.size; ++r) keys.push_back(key(r));
  const auto start = Clock::now();
  try {
    store.set(key(s.rank), std::vector<std::uint8_t>{1});
    std::chrono::microseconds nap(500);
    for (bool all = store.check(keys); !all; all = store.check(keys)) {
      if (s.join_deadline.passed()) break;
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(20'000));
    }
    if (!s.join_deadline.passed()) return;
    std::string missing;
    for (int r = 0; r < s.size; ++r)
      if (!store.check({keys[r]})) missing += cat(missing.empty() ? "" : ", ", s.world_ranks[r]);
    if (missing.empty()) return;  // the last one came in just now
    const auto waited = std::chrono::duration_cast<Millis>(Clock::now() - start).count();
    throw TimeoutError(cat(s.what, " (waited ", waited, " ms on rank ", s.world_ranks[s.rank],
                           "): ranks that did not arrive: ", missing));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {  // a TCPStore whose server (rank 0) has gone, ...
    throw CommError(cat(s.what, ": the store failed: ", message_of(e)));
  }
}

// The address of this host that the peers reach: the one gloo's own connections use (chosen by
// GLOO_SOCKET_IFNAME or the host name, gloo_connect.cc).
std::string reachable_host(::gloo::Context& context, int rank) {
  if (context.size == 1) return "127.0.0.1";  // no peers: the mesh listens nowhere
  const auto& pair = context.getPair(rank == 0 ? 1 : 0);
  const auto* address = dynamic_cast<const ::gloo::transport::tcp::Address*>(&pair->address());
  DML_CHECK(address != nullptr, "gloo's transport is not TCP");
  const sockaddr_storage& where = address->getSockaddr();
  char host[NI_MAXHOST];
  const socklen_t length = where.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&where), length, host, sizeof host, nullptr,
                    0, NI_NUMERICHOST) != 0)
    throw CommError("gloo engine: cannot read the address of gloo's connections");
  return host;
}

}  // namespace

std::string message_of(const std::exception& e) {
  if (auto* c10_error = dynamic_cast<const c10::Error*>(&e))
    return c10_error->what_without_backtrace();
  return e.what();
}

GlooEngine::GlooEngine(GroupSetup setup) : setup_(std::move(setup)) {
  await_ranks(*setup_.store, setup_);
  auto options = c10d::ProcessGroupGloo::Options::create(setup_.timeout);
  options->devices.push_back(setup_.device);
  options->threads = 1;  // the communicator runs one collective at a time
  try {
    group_ = c10::make_intrusive<GlooGroup>(setup_.store, setup_.rank, setup_.size, options);
  } catch (const std::exception& e) {
    throw CommError(
        cat(setup_.what, ": connecting the gloo process group failed: ", message_of(e)));
  }
  // gloo's own timeout closes every connection of the context when it fires. Our deadlines
  // come first, and after one passes the communicator still needs the connections to find
  // out who is missing; gloo's stays as a backstop behind them.
  group_->context()->setTimeout(setup_.timeout * 2 + std::chrono::seconds(10));
  if (!setup_.mesh)
    setup_.mesh = std::make_shared<PeerMesh>(*setup_.store, setup_.rank, setup_.size,
                                             reachable_host(*group_->context(), setup_.rank),
                                             setup_.join_deadline);
}

GlooEngine::~GlooEngine() {
  // c10d's destructor joins its worker, which stays in an abandoned collective until gloo's
  // backstop: leave the group to the process exit rather than hang here.
  if (abandoned_) (void)group_.release();
}

RequestPtr GlooEngine::isend(Channel ch, const void* data, std::size_t bytes, int dst, int tag) {
  return PeerMesh::send(setup_.mesh, {setup_.group_id, setup_.world_ranks.at(dst), dst}, ch, tag,
                        data, bytes);
}

RequestPtr GlooEngine::irecv(Channel ch, void* data, std::size_t bytes, int src, int tag) {
  return PeerMesh::recv(setup_.mesh, {setup_.group_id, setup_.world_ranks.at(src), src}, ch, tag,
                        data, bytes);
}

void GlooEngine::finish(const c10::intrusive_ptr<c10d::Work>& work, Deadline deadline, int kind) {
  using std::chrono::ceil;
  // c10d reads a zero timeout as "wait forever".
  Millis left = std::max(ceil<Millis>(deadline.at - Clock::now()), Millis(1));
  try {
    work->wait(left);
  } catch (const std::exception& e) {
    if (!work->isCompleted()) {
      abandoned_ = true;
      throw TimeoutError(cat(kKindNames[kind], " (gloo engine): not finished at the deadline"));
    }
    throw CommError(cat(kKindNames[kind], " (gloo engine): ", message_of(e)));
  }
}

void GlooEngine::agree(int kind, std::size_t count, DType dtype, int root, ReduceOp op,
                       Deadline deadline) {
  // Over point-to-point on this thread: two c10d operations would cost twice the hand-off to
  // c10d's worker thread, and a timeout here leaves no c10d operation running.
  AlgoContext ctx(*this, deadline, cat(kKindNames[kind], " (gloo engine)"), scratch_);
  check_agreement(ctx,
                  {kind, static_cast<std::int64_t>(count), static_cast<std::int64_t>(dtype), root,
                   static_cast<std::int64_t>(op)},
                  kKindNames);
}

void GlooEngine::allreduce(Buffer data, ReduceOp op, Deadline deadline) {
  agree(kAllreduce, data.count, data.dtype, 0, op, deadline);
  if (data.count == 0) return;
  c10d::AllreduceOptions options;
  options.reduceOp = reduce_op(op);
  if (data.dtype == DType::bf16) {
    // c10d's gloo has no bf16 reductions ("Invalid scalar type"; f16 it has): reduce a
    // widened f32 copy and round once at the end.
    if (scratch_.size() < data.count * sizeof(float)) scratch_.resize(data.count * sizeof(float));
    auto* wide = reinterpret_cast<float*>(scratch_.data());
    auto* bits = static_cast<std::uint16_t*>(data.data);
    for (std::size_t i = 0; i < data.count; ++i) wide[i] = bf16_to_f32(bits[i]);
    std::vector<at::Tensor> tensors{tensor_of(wide, data.count, at::kFloat)};
    finish(group_->allreduce(tensors, options), deadline, kAllreduce);
    for (std::size_t i = 0; i < data.count; ++i) bits[i] = f32_to_bf16(wide[i]);
    return;
  }
  std::vector<at::Tensor> tensors{tensor_of(data.data, data.count, scalar_type(data.dtype))};
  finish(group_->allreduce(tensors, options), deadline, kAllreduce);
}

void GlooEngine::broadcast(Buffer data, int root, Deadline deadline) {
  agree(kBroadcast, data.count, data.dtype, root, ReduceOp::sum, deadline);
  if (data.count == 0) return;
  std::vector<at::Tensor> tensors{bytes_of(data.data, data.bytes())};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  finish(group_->broadcast(tensors, options), deadline, kBroadcast);
}

void GlooEngine::allgather(ConstBuffer in, Buffer out, Deadline deadline) {
  agree(kAllgather, in.count, in.dtype, 0, ReduceOp::sum, deadline);
  if (in.count == 0) return;
  // c10d 1.13's gloo has no _allgather_base; allgather into views of `out`.
  std::vector<at::Tensor> inputs{bytes_of(in.data, in.bytes())};
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int q = 0; q < size(); ++q)
    outputs[0].push_back(bytes_of(static_cast<std::byte*>(out.data) + q * in.bytes(), in.bytes()));
  finish(group_->allgather(outputs, inputs), deadline, kAllgather);
}

void GlooEngine::alltoall(ConstBuffer in, Buffer out, Deadline deadline) {
  agree(kAlltoall, in.count, in.dtype, 0, ReduceOp::sum, deadline);
  if (in.count == 0) return;
  at::Tensor input = bytes_of(in.data, in.bytes()), output = bytes_of(out.data, out.bytes());
  std::vector<std::int64_t> equal_split;  // empty: size() equal blocks
  finish(group_->alltoall_base(output, input, equal_split, equal_split), deadline, kAlltoall);
}

// The agreement check is itself a barrier (nobody leaves its all-reduce before all have
// entered); c10d's barrier after it would only add a second round.
void GlooEngine::barrier(Deadline deadline) {
  agree(kBarrier, 0, DType::u8, 0, ReduceOp::sum, deadline);
}

// c10d 1.13's ProcessGroupGloo has neither reduce_scatter nor allgather with per-rank counts:
// both run the ring algorithms over this engine's point-to-point transfers.
void GlooEngine::reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op, Deadline deadline) {
  AlgoContext ctx(*this, deadline, "reduce_scatter (gloo engine, ring)", scratch_);
  ring_reduce_scatter(ctx, in, out, op);
}

void GlooEngine::allgatherv(ConstBuffer in, Buffer out, std::span<const std::size_t> counts,
                            Deadline deadline) {
  const std::size_t es = dtype_size(out.dtype);
  const std::size_t offset = std::accumulate(counts.begin(), counts.begin() + rank(), 0ul);
  auto* mine = static_cast<std::byte*>(out.data) + offset * es;
  if (in.count && in.data != mine) std::memcpy(mine, in.data, in.bytes());
  AlgoContext ctx(*this, deadline, "allgatherv (gloo engine, ring)", scratch_);
  ring_allgatherv(ctx, out, counts);
}

std::unique_ptr<Engine> GlooEngine::split(const SplitGroup& g, Deadline deadline) {
  std::unique_ptr<Engine> child;
  if (g.color >= 0) {
    GroupSetup s;
    // The prefix store holds the parent's store, so the sub-group keeps it alive.
    s.store = c10::make_intrusive<c10d::PrefixStore>(cat("distml/split/", g.split_id, "/", g.color),
                                                     setup_.store);
    s.rank = g.new_rank;
    s.size = static_cast<int>(g.members.size());
    s.timeout = setup_.timeout;
    s.join_deadline = deadline;
    s.device = setup_.device;
    s.mesh = setup_.mesh;
    s.group_id = sub_group_id(setup_.group_id, g.split_id, g.color);
    for (int m : g.members) s.world_ranks.push_back(setup_.world_ranks[m]);
    s.what = cat("gloo split ", g.split_id, " (color ", g.color, ")");
    child = std::make_unique<GlooEngine>(std::move(s));
  }
  // Every sub-group has connected before anyone leaves: the store may live in rank 0, and a
  // rank 0 that went on and exited would take it away from a sub-group still connecting.
  barrier(deadline);
  return child;
}

}  // namespace distml::comm::gloo
