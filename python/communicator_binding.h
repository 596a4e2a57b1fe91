// The Communicator as pybind11 binds it: buffers viewed without copies, Handles, and the
// collectives with the GIL released. Shared by the module's files (distml_module.cc binds it,
// estimators.cc takes it).
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "distml/comm/communicator.h"
#include "distml/core/error.h"

namespace distml::python {

namespace py = pybind11;

// The element type of a buffer: its format character and size, or `dtype` when given ("bf16"
// travels in 16-bit integers, which NumPy has and bf16 is not).
inline comm::DType dtype_of(const py::buffer_info& info, const std::string& dtype) {
  if (!dtype.empty()) {
    const comm::DType t = comm::parse_dtype(dtype);
    if (comm::dtype_size(t) != static_cast<std::size_t>(info.itemsize))
      throw UsageError(cat("dtype \"", dtype, "\" has ", comm::dtype_size(t),
                           " bytes an element; the array's have ", info.itemsize));
    return t;
  }
  const char f = info.format.empty() ? '?' : info.format.back();  // past '<', '=', '@'
  const auto size = info.itemsize;
  if (f == 'f' && size == 4) return comm::DType::f32;
  if (f == 'd' && size == 8) return comm::DType::f64;
  if (f == 'e' && size == 2) return comm::DType::f16;
  if ((f == 'i' || f == 'l' || f == 'q') && size == 4) return comm::DType::i32;
  if ((f == 'i' || f == 'l' || f == 'q') && size == 8) return comm::DType::i64;
  if ((f == 'B' || f == 'b' || f == '?') && size == 1) return comm::DType::u8;
  throw UsageError(cat("arrays of format '", info.format, "' (", size,
                       " bytes an element) cannot be communicated: use float32, float64, "
                       "float16, bfloat16, int32, int64 or uint8"));
}

// The caller's memory as a distml buffer: contiguous, and writable where it is written.
struct View {
  View(const py::buffer& b, bool writable, const std::string& dtype)
      : info(b.request(writable)), type(dtype_of(info, dtype)) {
    py::ssize_t expected = info.itemsize;
    for (int d = info.ndim - 1; d >= 0; --d) {
      if (info.shape[d] > 1 && info.strides[d] != expected)
        throw UsageError("the array is not contiguous: communicate a contiguous copy");
      expected *= info.shape[d];
    }
  }
  comm::Buffer buffer() const { return {info.ptr, static_cast<std::size_t>(info.size), type}; }
  comm::ConstBuffer const_buffer() const {
    return {info.ptr, static_cast<std::size_t>(info.size), type};
  }
  py::buffer_info info;
  comm::DType type;
};

/// An operation started by an *_async call: wait() blocks without the GIL; the arrays it
/// reads and writes stay alive until it is done.
struct Handle {
  comm::Work work;
  py::object keep_alive;  // the arrays
  bool done = false;

  void wait() {
    if (done) return;
    {
      py::gil_scoped_release unlocked;
      work.wait();
    }
    done = true;
    keep_alive = py::none();
  }
  bool test() { return done || work.test(); }
};

class Comm {
 public:
  explicit Comm(std::unique_ptr<comm::Communicator> c) : comm_(std::move(c)) {}

  comm::Communicator& communicator() const { return *comm_; }
  int rank() const { return comm_->rank(); }
  int size() const { return comm_->size(); }
  std::string engine() const { return std::string(comm_->engine_name()); }
  int local_rank() const {
    const auto& host = comm_->host_of();
    int before = 0;
    for (int r = 0; r < rank(); ++r) before += host[r] == host[rank()];
    return before;
  }

  // Each collective: a blocking form (the GIL released for its whole length) and an
  // asynchronous one (queued in order on the communicator's own thread).
  void allreduce(const py::buffer& x, const std::string& op, const std::string& algorithm,
                 const std::string& dtype) {
    View v(x, true, dtype);
    const auto o = options(op, algorithm);
    py::gil_scoped_release unlocked;
    comm_->allreduce(v.buffer(), o);
  }
  Handle allreduce_async(const py::buffer& x, const std::string& op, const std::string& algorithm,
                         const std::string& dtype) {
    View v(x, true, dtype);
    return {comm_->iallreduce(v.buffer(), options(op, algorithm)), x};
  }
  void broadcast(const py::buffer& x, int root, const std::string& algorithm,
                 const std::string& dtype) {
    View v(x, true, dtype);
    py::gil_scoped_release unlocked;
    comm_->broadcast(v.buffer(), root, comm::parse_algorithm(algorithm));
  }
  Handle broadcast_async(const py::buffer& x, int root, const std::string& algorithm,
                         const std::string& dtype) {
    View v(x, true, dtype);
    return {comm_->ibroadcast(v.buffer(), root, comm::parse_algorithm(algorithm)), x};
  }
  // allgather, reduce_scatter and alltoall write `out`, whose size the Python layer derives.
  void allgather(const py::buffer& in, const py::buffer& out, const std::string& dtype) {
    auto [i, o] = pair(in, out, dtype);
    py::gil_scoped_release unlocked;
    comm_->allgather(i.const_buffer(), o.buffer());
  }
  Handle allgather_async(const py::buffer& in, const py::buffer& out, const std::string& dtype) {
    auto [i, o] = pair(in, out, dtype);
    return {comm_->iallgather(i.const_buffer(), o.buffer()), py::make_tuple(in, out)};
  }
  void reduce_scatter(const py::buffer& in, const py::buffer& out, const std::string& op,
                      const std::string& dtype) {
    auto [i, o] = pair(in, out, dtype);
    const auto red = comm::parse_reduce_op(op);
    py::gil_scoped_release unlocked;
    comm_->reduce_scatter(i.const_buffer(), o.buffer(), red);
  }
  Handle reduce_scatter_async(const py::buffer& in, const py::buffer& out, const std::string& op,
                              const std::string& dtype) {
    auto [i, o] = pair(in, out, dtype);
    return {comm_->ireduce_scatter(i.const_buffer(), o.buffer(), comm::parse_reduce_op(op)),
            py::make_tuple(in, out)};
  }
  void alltoall(const py::buffer& in, const py::buffer& out, const std::string& dtype) {
    auto [i, o] = pair(in, out, dtype);
    py::gil_scoped_release unlocked;
    comm_->alltoall(i.const_buffer(), o.buffer());
  }
  Handle alltoall_async(const py::buffer& in, const py::buffer& out, const std::string& dtype) {
    auto [i, o] = pair(in, out, dtype);
    return {comm_->ialltoall(i.const_buffer(), o.buffer()), py::make_tuple(in, out)};
  }
  // Point-to-point: the receive names the sender and tag, and has the sent message's size.
  void send(const py::buffer& x, int dst, int tag, const std::string& dtype) {
    View v(x, false, dtype);
    py::gil_scoped_release unlocked;
    comm_->send(v.const_buffer(), dst, tag);
  }
  Handle send_async(const py::buffer& x, int dst, int tag, const std::string& dtype) {
    View v(x, false, dtype);
    return {comm_->isend(v.const_buffer(), dst, tag), x};
  }
  void recv(const py::buffer& x, int src, int tag, const std::string& dtype) {
    View v(x, true, dtype);
    py::gil_scoped_release unlocked;
    comm_->recv(v.buffer(), src, tag);
  }
  Handle recv_async(const py::buffer& x, int src, int tag, const std::string& dtype) {
    View v(x, true, dtype);
    return {comm_->irecv(v.buffer(), src, tag), x};
  }
  void barrier() {
    py::gil_scoped_release unlocked;
    comm_->barrier();
  }
  /// None for color < 0 (the rank joins no group), as Communicator::split.
  py::object split(int color, int key) {
    std::unique_ptr<comm::Communicator> sub;
    {
      py::gil_scoped_release unlocked;
      sub = comm_->split(color, key);
    }
    if (!sub) return py::none();
    return py::cast(Comm(std::move(sub)));
  }

 private:
  static comm::AllreduceOptions options(const std::string& op, const std::string& algorithm) {
    comm::AllreduceOptions o;
    o.op = comm::parse_reduce_op(op);
    o.algorithm = comm::parse_algorithm(algorithm);
    return o;
  }
  static std::pair<View, View> pair(const py::buffer& in, const py::buffer& out,
                                    const std::string& dtype) {
    View i(in, false, dtype), o(out, true, dtype);
    if (i.type != o.type) throw UsageError("the input and output arrays have different dtypes");
    return {std::move(i), std::move(o)};
  }

  std::shared_ptr<comm::Communicator> comm_;
};

}  // namespace distml::python
