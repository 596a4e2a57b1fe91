// The compiled half of `import distml` (the module distml._distml): the Communicator over any
// object with the buffer protocol, without copies (NumPy arrays; torch tensors through their
// .numpy() view, which distml/__init__.py takes), the GIL released while a call waits, and
// distml's typed errors as Python exceptions with the same messages.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "distml/comm/engines.h"
#include "distml/core/error.h"
#include "distml/train/bucket_planner.h"

namespace py = pybind11;

namespace distml::python {
namespace {

// The element type of a buffer: its format character and size, or `dtype` when given ("bf16"
// travels in 16-bit integers, which NumPy has and bf16 is not).
comm::DType dtype_of(const py::buffer_info& info, const std::string& dtype) {
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

Comm connect(double timeout_s, double stall_warn_s) {
  comm::CommOptions options;
  if (timeout_s <= 0) throw UsageError(cat("timeout must be positive seconds, not ", timeout_s));
  options.timeout = comm::Millis(static_cast<std::int64_t>(timeout_s * 1000));
  options.stall_warn = comm::Millis(static_cast<std::int64_t>(stall_warn_s * 1000));
  std::unique_ptr<comm::Communicator> c;
  {
    py::gil_scoped_release unlocked;
    c = comm::connect(options);
  }
  return Comm(std::move(c));
}

}  // namespace
}  // namespace distml::python

PYBIND11_MODULE(_distml, m) {
  using namespace distml;
  using python::Comm;
  using python::Handle;
  m.doc() = "distml's communicator (import distml, not this module)";

  // The hierarchy of core/error.h, under the names Python users expect to catch.
  auto error = py::register_exception<Error>(m, "Error", PyExc_RuntimeError);
  auto usage = py::register_exception<UsageError>(m, "UsageError", PyExc_ValueError);
  py::register_exception<ConfigError>(m, "ConfigError", usage.ptr());
  auto comm_error = py::register_exception<CommError>(m, "CommError", error.ptr());
  py::register_exception<TimeoutError>(m, "TimeoutError", comm_error.ptr());
  (void)usage;

  py::class_<Handle>(m, "Handle", "An operation in flight: wait() for it, test() without waiting.")
      .def("wait", &Handle::wait,
           "Blocks (without the GIL) until done; raises what it failed with.")
      .def("test", &Handle::test, "True once done; never blocks.");

  py::class_<Comm>(m, "Communicator")
      .def_property_readonly("rank", &Comm::rank)
      .def_property_readonly("size", &Comm::size)
      .def_property_readonly("local_rank", &Comm::local_rank)
      .def_property_readonly("engine", &Comm::engine)
      .def("allreduce", &Comm::allreduce, py::arg("x"), py::arg("op"), py::arg("algorithm"),
           py::arg("dtype"))
      .def("allreduce_async", &Comm::allreduce_async, py::arg("x"), py::arg("op"),
           py::arg("algorithm"), py::arg("dtype"))
      .def("broadcast", &Comm::broadcast, py::arg("x"), py::arg("root"), py::arg("algorithm"),
           py::arg("dtype"))
      .def("broadcast_async", &Comm::broadcast_async, py::arg("x"), py::arg("root"),
           py::arg("algorithm"), py::arg("dtype"))
      .def("allgather", &Comm::allgather)
      .def("allgather_async", &Comm::allgather_async)
      .def("reduce_scatter", &Comm::reduce_scatter)
      .def("reduce_scatter_async", &Comm::reduce_scatter_async)
      .def("alltoall", &Comm::alltoall)
      .def("alltoall_async", &Comm::alltoall_async)
      .def("barrier", &Comm::barrier)
      .def("split", &Comm::split, py::arg("color"), py::arg("key"));

  m.def(
      "plan_buckets",
      [](const std::vector<std::size_t>& param_bytes, std::size_t first_cap, std::size_t cap) {
        return train::plan_buckets(param_bytes, first_cap, cap).buckets;
      },
      py::arg("param_bytes"), py::arg("first_cap"), py::arg("cap"),
      "The C++ trainer's buckets (train/bucket_planner.h): parameter indices per bucket, in the "
      "order they are reduced.");
  m.def("connect", &python::connect, py::arg("timeout_s"), py::arg("stall_warn_s"),
        "Joins the world that `distml launch` started (comm::connect).");
}
