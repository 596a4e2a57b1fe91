// The compiled half of `import distml` (the module distml._distml): the Communicator over any
// object with the buffer protocol, without copies (NumPy arrays; torch tensors through their
// .numpy() view, which distml/__init__.py takes), the GIL released while a call waits, and
// distml's typed errors as Python exceptions with the same messages.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "communicator_binding.h"
#include "distml/comm/engines.h"
#include "distml/core/allocator.h"
#include "distml/core/error.h"
#include "distml/data/sharded_sampler.h"
#include "distml/train/bucket_planner.h"
#include "distml/train/strategies/gossip_topology.h"

namespace py = pybind11;

namespace distml::python {

void bind_estimators(py::module_& m);        // estimators.cc
void bind_compressor(py::module_& m);        // compressor_binding.cc
void bind_parameter_server(py::module_& m);  // ps_binding.cc
void bind_row_table(py::module_& m);         // row_table_binding.cc
void bind_easgd_centre(py::module_& m);      // easgd_binding.cc

namespace {

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
  keep_freed_memory_for_reuse();  // the training loop's tensors reused, not faulted in each step

  // The hierarchy of core/error.h, under the names Python users expect to catch.
  auto error = py::register_exception<Error>(m, "Error", PyExc_RuntimeError);
  auto usage = py::register_exception<UsageError>(m, "UsageError", PyExc_ValueError);
  py::register_exception<ConfigError>(m, "ConfigError", usage.ptr());
  auto comm_error = py::register_exception<CommError>(m, "CommError", error.ptr());
  py::register_exception<TimeoutError>(m, "TimeoutError", comm_error.ptr());
  py::register_exception<DataError>(m, "DataError", error.ptr());

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
      .def("send", &Comm::send)
      .def("send_async", &Comm::send_async)
      .def("recv", &Comm::recv)
      .def("recv_async", &Comm::recv_async)
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
  py::class_<data::ShardedSampler>(m, "ShardedSampler",
                                   "The C++ trainer's sampler (data/sharded_sampler.h).")
      .def(py::init<std::size_t, int, int, std::size_t, std::uint64_t, bool>(),
           py::arg("dataset_size"), py::arg("world_size"), py::arg("rank"),
           py::arg("batch_per_rank"), py::arg("seed"), py::arg("drop_last"))
      .def("steps_per_epoch", &data::ShardedSampler::steps_per_epoch)
      .def(
          "indices",
          py::overload_cast<std::uint64_t, std::size_t>(&data::ShardedSampler::indices, py::const_),
          py::arg("epoch"), py::arg("step"));
  m.def(
      "gossip_offsets",
      [](const std::string& topology, int world) {
        return train::gossip_offsets(train::parse_gossip_topology(topology), world);
      },
      py::arg("topology"), py::arg("world"),
      "The C++ gossip strategy's neighbours (train/strategies/gossip_strategy.h): rank r sends "
      "to r + d and receives from r - d, mod the world, for each offset d.");
  python::bind_estimators(m);
  python::bind_compressor(m);
  python::bind_parameter_server(m);
  python::bind_row_table(m);
  python::bind_easgd_centre(m);
  m.def("connect", &python::connect, py::arg("timeout_s"), py::arg("stall_warn_s"),
        "Joins the world that `distml launch` started (comm::connect).");
}
