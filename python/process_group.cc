// distml._c10d: the "distml" backend's ProcessGroup, a subclass of torch.distributed's, and
// its creator, which distml/torch.py registers with Backend.register_backend. A module of its
// own, so that `import distml` does not load torch. One file with the class, since compiling
// c10d's headers twice cost half a minute of the build.
#include "process_group.h"

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "distml/comm/engines.h"
#include "distml/comm/gloo/gloo_store_connect.h"
#include "distml/core/error.h"

namespace distml::python {
namespace {

// The Work torch.distributed holds: its state is the future's.
class DistmlWork final : public c10d::Work {
 public:
  DistmlWork(c10d::OpType type, std::vector<at::Tensor> result,
             c10::intrusive_ptr<c10::ivalue::Future> future)
      : Work(-1, type), result_(std::move(result)), future_(std::move(future)) {}

  bool isCompleted() override { return future_->completed(); }
  bool isSuccess() const override { return future_->completed() && !future_->hasError(); }
  std::exception_ptr exception() const override {
    return future_->completed() && future_->hasError() ? future_->exception_ptr() : nullptr;
  }
  // The communicator's own deadline bounds every operation, so the future always completes;
  // c10d's timeout argument adds nothing.
  bool wait(std::chrono::milliseconds) override {
    future_->wait();
    if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
    return true;
  }
  std::vector<at::Tensor> result() override { return result_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<at::Tensor> result_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

comm::DType dtype_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return comm::DType::f32;
    case at::kDouble: return comm::DType::f64;
    case at::kHalf: return comm::DType::f16;
    case at::kBFloat16: return comm::DType::bf16;
    case at::kInt: return comm::DType::i32;
    case at::kLong: return comm::DType::i64;
    case at::kByte:
    case at::kBool: return comm::DType::u8;
    default:
      throw UsageError(cat(
          "the distml backend cannot communicate tensors of type ", c10::toString(t.scalar_type()),
          ": use float32, float64, float16, bfloat16, int32, int64, uint8 or bool"));
  }
}

void check_dense_cpu(const at::Tensor& t) {
  if (!t.device().is_cpu())
    throw UsageError(
        cat("the distml backend communicates CPU tensors; this one is on ", t.device().str()));
  if (!t.is_contiguous() || t.is_sparse())
    throw UsageError(
        "the distml backend communicates dense contiguous tensors: pass .contiguous()");
}

comm::Buffer buffer(const at::Tensor& t) {
  check_dense_cpu(t);
  return {t.data_ptr(), static_cast<std::size_t>(t.numel()), dtype_of(t)};
}

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* op) {
  if (tensors.size() != 1)
    throw UsageError(cat("distml backend ", op, ": one tensor per process, not ", tensors.size()));
  return tensors.front();
}

// The list of a list-form collective (c10d passes one per device; CPU has one).
std::vector<at::Tensor> single_list(const std::vector<std::vector<at::Tensor>>& lists,
                                    const char* op) {
  if (lists.size() != 1)
    throw UsageError(
        cat("distml backend ", op, ": one tensor list per process, not ", lists.size()));
  return lists.front();
}

comm::ReduceOp reduce_op(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return comm::ReduceOp::sum;
    case c10d::ReduceOp::AVG: return comm::ReduceOp::avg;
    case c10d::ReduceOp::PRODUCT: return comm::ReduceOp::prod;
    case c10d::ReduceOp::MIN: return comm::ReduceOp::min;
    case c10d::ReduceOp::MAX: return comm::ReduceOp::max;
    default:
      throw UsageError(
          "the distml backend reduces with SUM, AVG, PRODUCT, MIN or MAX; bitwise and "
          "pre-multiplied sums are not supported");
  }
}

// An all-reduce with c10d's operation and the algorithm `auto` picks.
comm::AllreduceOptions reducing(const c10d::ReduceOp& op) {
  comm::AllreduceOptions o;
  o.op = reduce_op(op);
  return o;
}

// Room for `count` tensors like `like`, one after another: the staging buffer of the
// list forms of allgather, gather, scatter, reduce_scatter and alltoall.
at::Tensor flat_like(const at::Tensor& like, std::size_t count) {
  check_dense_cpu(like);
  return at::empty({static_cast<int64_t>(count) * like.numel()}, like.options());
}
// A list with one tensor per rank, each like `like`.
void check_rank_list(const std::vector<at::Tensor>& tensors, const at::Tensor& like, int ranks,
                     const char* op) {
  if (tensors.size() != static_cast<std::size_t>(ranks))
    throw UsageError(cat("distml backend ", op, ": the list has ", tensors.size(), " tensors for ",
                         ranks, " ranks"));
  for (const auto& t : tensors)
    if (t.numel() != like.numel() || t.scalar_type() != like.scalar_type())
      throw UsageError(cat("distml backend ", op,
                           ": every tensor of the list must have the "
                           "input's size and type (",
                           like.numel(), " of ", c10::toString(like.scalar_type()), ")"));
}
void copy_out(const at::Tensor& flat, std::vector<at::Tensor>& parts) {
  for (std::size_t i = 0; i < parts.size(); ++i)
    parts[i].copy_(flat.narrow(0, static_cast<int64_t>(i) * parts[i].numel(), parts[i].numel())
                       .view_as(parts[i]));
}
at::Tensor concatenated(const std::vector<at::Tensor>& parts) {
  std::vector<at::Tensor> flat;
  for (const auto& p : parts) flat.push_back(p.reshape({-1}));
  return at::cat(flat);
}

}  // namespace

constexpr std::chrono::microseconds kFirstPoll{20}, kLastPoll{1000};

void FutureRunners::post(std::function<void()> task) {
  std::lock_guard lock(mutex_);
  tasks_.push_back(std::move(task));
  if (static_cast<int>(tasks_.size()) > idle_) {  // a runner for every waiting task
    runners_.emplace_back([this] { run(); });
    ++idle_;  // counted before it starts, so that the next task does not add another
  }
  posted_.notify_one();
}

void FutureRunners::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    posted_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, and nothing left
    auto task = std::move(tasks_.front());
    tasks_.pop_front();
    --idle_;
    lock.unlock();
    task();
    lock.lock();
    ++idle_;
  }
}

void FutureRunners::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  posted_.notify_all();
  for (auto& runner : runners_)
    if (runner.joinable()) runner.join();
}

Completer::Completer(bool in_order, comm::Millis timeout)
    : in_order_(in_order), timeout_(timeout), thread_([this] { run(); }) {}

Completer::~Completer() { stop(); }

void Completer::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  runners_.stop();
}

void Completer::add(Pending p) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back({std::move(p), comm::Deadline::after(timeout_)});
  }
  changed_.notify_all();
}

void Completer::complete(Queued& q) {
  auto future = q.pending.future;
  try {
    q.pending.work.wait(
        std::chrono::duration_cast<comm::Millis>(q.deadline.at - comm::Clock::now()));
    if (q.pending.finish) q.pending.finish();
    runners_.post([future, result = std::move(q.pending.result)] {
      future->markCompleted(c10::IValue(result));
    });
  } catch (...) {
    runners_.post([future, error = std::current_exception()] { future->setError(error); });
  }
}

void Completer::run() {
  std::unique_lock lock(mutex_);
  auto poll = kFirstPoll;
  for (;;) {
    if (queue_.empty()) {
      if (stopping_) return;
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      continue;
    }
    if (in_order_) {
      Queued oldest = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      complete(oldest);
      lock.lock();
      continue;
    }
    // Point-to-point: whichever has finished or run out of time, polled at a period that
    // grows from 20 us to 1 ms while nothing finishes (transfers through c10d's API are few).
    std::vector<Queued> ready;
    for (auto it = queue_.begin(); it != queue_.end();)
      if (it->pending.work.test() || it->deadline.passed()) {
        ready.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    lock.unlock();
    for (auto& q : ready) complete(q);
    lock.lock();
    poll = ready.empty() ? std::min(poll * 2, kLastPoll) : kFirstPoll;
    changed_.wait_for(lock, poll, [&] { return stopping_; });
  }
}

ProcessGroupDistml::ProcessGroupDistml(std::unique_ptr<comm::Communicator> comm)
    : ProcessGroup(comm->rank(), comm->size()),
      comm_(std::move(comm)),
      collectives_(true, comm_->options().timeout),
      transfers_(false, comm_->options().timeout) {
  init();
}

// Python drops the last reference with the GIL held (destroy_process_group), and a completer
// freeing the last reference to a tensor that has a Python object takes the GIL: joining it
// with the GIL held would deadlock (seen at 3 ranks).
ProcessGroupDistml::~ProcessGroupDistml() {
  std::optional<pybind11::gil_scoped_release> unlocked;
  if (Py_IsInitialized() && PyGILState_Check()) unlocked.emplace();
  collectives_.stop();
  transfers_.stop();
}

c10::intrusive_ptr<ProcessGroupDistml> ProcessGroupDistml::create(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout) {
  comm::CommOptions options;
  options.timeout = timeout;
  const char* engine = std::getenv("DISTML_ENGINE");
  std::unique_ptr<comm::Communicator> comm;
  if (engine && std::string(engine) == "mpi") {
    // MPI starts once per process: its world is the only group it can serve.
    static bool started = false;
    if (started)
      throw UsageError(
          "the distml backend over the mpi engine serves the default group only; for "
          "new_group(backend=\"distml\") launch with --engine gloo");
    started = true;
    comm = comm::connect(options);
    if (comm->rank() != rank || comm->size() != size)
      throw UsageError(cat("torch.distributed says rank ", rank, " of ", size, ", mpirun rank ",
                           comm->rank(), " of ", comm->size(),
                           ": init_process_group must name mpirun's ranks"));
  } else {
    comm = std::make_unique<comm::Communicator>(
        comm::gloo::connect_engine_over(store, rank, size, timeout), options);
  }
  return c10::make_intrusive<ProcessGroupDistml>(std::move(comm));
}

ProcessGroupDistml::WorkPtr ProcessGroupDistml::started(c10d::OpType type, comm::Work work,
                                                        Tensors result,
                                                        std::function<void()> finish,
                                                        bool point_to_point) {
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors());
  auto handle = c10::make_intrusive<DistmlWork>(type, result, future);
  (point_to_point ? transfers_ : collectives_)
      .add({std::move(work), std::move(finish), std::move(result), std::move(future)});
  return handle;
}

ProcessGroupDistml::WorkPtr ProcessGroupDistml::broadcast(Tensors& tensors,
                                                          const c10d::BroadcastOptions& opts) {
  const auto& t = single(tensors, "broadcast");
  return started(c10d::OpType::BROADCAST,
                 comm_->ibroadcast(buffer(t), static_cast<int>(opts.rootRank)), tensors);
}

ProcessGroupDistml::WorkPtr ProcessGroupDistml::allreduce(Tensors& tensors,
                                                          const c10d::AllreduceOptions& opts) {
  const auto& t = single(tensors, "allreduce");
  return started(c10d::OpType::ALLREDUCE, comm_->iallreduce(buffer(t), reducing(opts.reduceOp)),
                 tensors);
}

ProcessGroupDistml::WorkPtr ProcessGroupDistml::allreduce_coalesced(
    Tensors& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  if (tensors.empty()) throw UsageError("distml backend allreduce_coalesced: no tensors");
  at::Tensor flat = concatenated(tensors);
  auto work = comm_->iallreduce(buffer(flat), reducing(opts.reduceOp));
  return started(c10d::OpType::ALLREDUCE_COALESCED, std::move(work), tensors,
                 [flat, tensors]() mutable { copy_out(flat, tensors); });
}

// Every rank gets the reduction, which c10d allows (the non-roots' tensors are unspecified).
ProcessGroupDistml::WorkPtr ProcessGroupDistml::reduce(Tensors& tensors,
                                                       const c10d::ReduceOptions& opts) {
  const auto& t = single(tensors, "reduce");
  return started(c10d::OpType::REDUCE, comm_->iallreduce(buffer(t), reducing(opts.reduceOp)),
                 tensors);
}

ProcessGroupDistml::WorkPtr ProcessGroupDistml::allgather(std::vector<Tensors>& outputs,
                                                          Tensors& inputs,
                                                          const c10d::AllgatherOptions&) {
  const auto& in = single(inputs, "allgather");
  Tensors out = single_list(outputs, "allgather");
  check_rank_list(out, in, size_, "allgather");
  at::Tensor flat = flat_like(in, out.size());
  auto work = comm_->iallgather(buffer(in), buffer(flat));
  return started(c10d::OpType::ALLGATHER, std::move(work), out,
                 [flat, out]() mutable { copy_out(flat, out); });
}

ProcessGroupDistml::WorkPtr ProcessGroupDistml::_allgather_base(at::Tensor& output,
                                                                at::Tensor& input,
                                                                const c10d::AllgatherOptions&) {
  if (output.numel() != input.numel() * size_)
    throw UsageError(cat("distml backend all_gather_into_tensor: the output has ", output.numel(),
                         " elements, not ", size_, " x ", input.numel()));
  return started(c10d::OpType::_ALLGATHER_BASE, comm_->iallgather(buffer(input), buffer(output)),
                 {output});
}

// As an allgather whose result only the root keeps.
ProcessGroupDistml::WorkPtr ProcessGroupDistml::gather(std::vector<Tensors>& outputs,
                                                       Tensors& inputs,
                                                       const c10d::GatherOptions& opts) {
  const auto& in = single(inputs, "gather");
  const bool root = rank_ == opts.rootRank;
  Tensors out = root ? single_list(outputs, "gather") : Tensors{};
  if (root) check_rank_list(out, in, size_, "gather");
  at::Tensor flat = flat_like(in, size_);
  auto work = comm_->iallgather(buffer(in), buffer(flat));
  return started(c10d::OpType::GATHER, std::move(work), out,
                 [flat, out]() mutable { copy_out(flat, out); });
}

// As a broadcast of the root's whole list, of which each rank keeps its part.
ProcessGroupDistml::WorkPtr ProcessGroupDistml::scatter(Tensors& outputs,
                                                        std::vector<Tensors>& inputs,
                                                        const c10d::ScatterOptions& opts) {
  const auto& out = single(outputs, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor flat = flat_like(out, size_);
  if (rank_ == root) {
    Tensors in = single_list(inputs, "scatter");
    check_rank_list(in, out, size_, "scatter");
    flat.copy_(concatenated(in));
  }
  auto work = comm_->ibroadcast(buffer(flat), root);
  const int64_t n = out.numel();
  return started(
      c10d::OpType::SCATTER, std::move(work), outputs,
      [flat, out, n, r = rank_]() mutable { out.copy_(flat.narrow(0, r * n, n).view_as(out)); });
}

ProcessGroupDistml::WorkPtr ProcessGroupDistml::reduce_scatter(
    Tensors& outputs, std::vector<Tensors>& inputs, const c10d::ReduceScatterOptions& opts) {
  const auto& out = single(outputs, "reduce_scatter");
  Tensors in = single_list(inputs, "reduce_scatter");
  check_rank_list(in, out, size_, "reduce_scatter");
  at::Tensor flat = concatenated(in);
  auto work = comm_->ireduce_scatter(buffer(flat), buffer(out), reduce_op(opts.reduceOp));
  return started(c10d::OpType::REDUCE_SCATTER, std::move(work), outputs,
                 [flat] {});  // keeps the staging buffer alive until done
}

ProcessGroupDistml::WorkPtr ProcessGroupDistml::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  if (input.numel() != output.numel() * size_)
    throw UsageError(cat("distml backend reduce_scatter_tensor: the input has ", input.numel(),
                         " elements, not ", size_, " x ", output.numel()));
  return started(c10d::OpType::_REDUCE_SCATTER_BASE,
                 comm_->ireduce_scatter(buffer(input), buffer(output), reduce_op(opts.reduceOp)),
                 {output});
}

ProcessGroupDistml::WorkPtr ProcessGroupDistml::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions&) {
  if (!output_split_sizes.empty() || !input_split_sizes.empty())
    throw UsageError(
        "distml backend all_to_all_single: uneven splits are not supported; pass equal parts "
        "(no split sizes)");
  if (input.numel() != output.numel() || input.numel() % size_ != 0)
    throw UsageError(
        cat("distml backend all_to_all_single: input and output must have the same "
            "number of elements, a multiple of ",
            size_, " (", input.numel(), ", ", output.numel(), ")"));
  return started(c10d::OpType::ALLTOALL_BASE, comm_->ialltoall(buffer(input), buffer(output)),
                 {output});
}

ProcessGroupDistml::WorkPtr ProcessGroupDistml::alltoall(Tensors& outputs, Tensors& inputs,
                                                         const c10d::AllToAllOptions&) {
  if (inputs.empty()) throw UsageError("distml backend all_to_all: no tensors");
  check_rank_list(inputs, inputs.front(), size_, "all_to_all");
  check_rank_list(outputs, inputs.front(), size_, "all_to_all");
  at::Tensor in = concatenated(inputs);
  at::Tensor flat = at::empty_like(in);
  auto work = comm_->ialltoall(buffer(in), buffer(flat));
  return started(c10d::OpType::ALLTOALL, std::move(work), outputs,
                 [in, flat, outputs]() mutable { copy_out(flat, outputs); });
}

ProcessGroupDistml::WorkPtr ProcessGroupDistml::send(Tensors& tensors, int dst, int tag) {
  const auto& t = single(tensors, "send");
  return started(c10d::OpType::SEND, comm_->isend(buffer(t), dst, tag), tensors, {}, true);
}

ProcessGroupDistml::WorkPtr ProcessGroupDistml::recv(Tensors& tensors, int src, int tag) {
  const auto& t = single(tensors, "recv");
  return started(c10d::OpType::RECV, comm_->irecv(buffer(t), src, tag), tensors, {}, true);
}

ProcessGroupDistml::WorkPtr ProcessGroupDistml::barrier(const c10d::BarrierOptions&) {
  return started(c10d::OpType::BARRIER, comm_->ibarrier(), {});
}

}  // namespace distml::python

namespace py = pybind11;

// torch's Python classes hold their objects by c10::intrusive_ptr (as its own bindings say).
PYBIND11_DECLARE_HOLDER_TYPE(T, c10::intrusive_ptr<T>, true);

PYBIND11_MODULE(_c10d, m) {
  using distml::python::ProcessGroupDistml;
  m.doc() = "the distml backend of torch.distributed (import distml.torch, not this module)";
  // torch.distributed's classes must be registered before a subclass can name its base.
  const py::object base = py::module_::import("torch.distributed").attr("ProcessGroup");
  py::class_<ProcessGroupDistml, c10::intrusive_ptr<ProcessGroupDistml>>(m, "ProcessGroupDistml",
                                                                         base);
  m.def(
      "create",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
         std::chrono::milliseconds timeout) {
        py::gil_scoped_release unlocked;  // the rendezvous waits for the other ranks
        return ProcessGroupDistml::create(store, rank, size, timeout);
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      "A distml process group of rank `rank` of `size` meeting through `store`.");
}
