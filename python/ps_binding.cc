// The C++ trainer's parameter server (train/strategies/ps_strategy.h) for DistributedOptimizer:
// the layout and tags both sides derive, and the server's side (ps_flat_server.h), which
// updates the model's parameters in place; Python runs the worker's side (distml/_ps.py).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "communicator_binding.h"
#include "distml/train/strategies/ps_flat_server.h"
#include "flat_parameters.h"

namespace distml::python {
namespace {

py::dict report_dict(const train::ps::ServerReport& r) {
  py::dict d;
  d["updates"] = r.updates;
  d["max_clock_gap"] = r.max_clock_gap;
  d["staleness"] = r.staleness;
  return d;
}

}  // namespace

void bind_parameter_server(py::module_& m) {
  using train::ps::Layout;
  py::class_<Layout>(m, "PsLayout", "Who serves which bucket (train/strategies/ps_protocol.h).")
      .def(py::init(&Layout::plan), py::arg("param_bytes"), py::arg("param_elements"),
           py::arg("workers"), py::arg("servers"), py::arg("first_cap"), py::arg("cap"))
      .def_readonly("workers", &Layout::workers)
      .def_readonly("servers", &Layout::servers)
      .def_readonly("buckets", &Layout::buckets)
      .def_readonly("elements", &Layout::elements)
      .def_readonly("server_bytes", &Layout::server_bytes)
      .def("server_rank", &Layout::server_rank, py::arg("bucket"));
  m.def("ps_push_tag", &train::ps::push_tag);
  m.def("ps_pull_tag", &train::ps::pull_tag);
  m.attr("PS_STEP_TAG") = train::ps::kStepTag;
  m.def(
      "ps_tell_servers",
      [](Comm& comm, const Layout& layout, const std::string& word) {
        const double w = word == "sync" ? train::ps::kSync : word == "stop" ? train::ps::kStop : 0;
        if (w == 0) throw UsageError(cat("ps_tell_servers: \"sync\" or \"stop\", not ", word));
        py::gil_scoped_release unlocked;
        train::ps::tell_servers(comm.communicator(), layout, w);
      },
      py::arg("comm"), py::arg("layout"), py::arg("word"));
  m.def(
      "ps_sum_reports",
      [](Comm& comm) {
        train::ps::ServerReport summed;
        {
          py::gil_scoped_release unlocked;
          summed = train::ps::sum_reports({}, comm.communicator());
        }
        return report_dict(summed);
      },
      py::arg("comm"), "A worker's part of the end of the run: the servers' reports summed.");
  m.def(
      "ps_serve",
      [](Comm& comm, const Layout& layout, const std::vector<py::buffer>& params,
         const std::string& mode, int staleness, const train::OptimizerOptions& optim, bool resumed,
         const std::optional<train::compress::CompressOptions>& compress) {
        std::vector<View> views;
        const auto flat = flat_parameters(params, views);
        const train::ps::ServerOptions options{train::ps::parse_mode(mode), staleness, optim};
        train::ps::ServerReport summed;
        {
          py::gil_scoped_release unlocked;
          summed = train::ps::serve_flat(comm.communicator(), layout, flat, options, resumed,
                                         compress ? &*compress : nullptr);
        }
        return report_dict(summed);
      },
      py::arg("comm"), py::arg("layout"), py::arg("params"), py::arg("mode"), py::arg("staleness"),
      py::arg("optim"), py::arg("resumed"), py::arg("compress"),
      "A server rank's part: serves until every worker has stopped, then the reports summed.");
  m.def(
      "ps_collect_states",
      [](Comm& comm, const Layout& layout) {
        std::vector<std::string> states;
        {
          py::gil_scoped_release unlocked;
          states = train::ps::collect_server_states(comm.communicator(), layout);
        }
        py::list out;
        for (const auto& s : states) out.append(py::bytes(s));
        return out;
      },
      py::arg("comm"), py::arg("layout"), "Worker 0, after a sync: every server's state.");
  m.def(
      "ps_send_resume",
      [](Comm& comm, const Layout& layout, const py::buffer& params,
         const std::vector<std::string>& states) {
        View v(params, false, "");
        py::gil_scoped_release unlocked;
        train::ps::send_resume(comm.communicator(), layout, v.const_buffer(), states);
      },
      py::arg("comm"), py::arg("layout"), py::arg("params"), py::arg("states"),
      "Worker 0, after a resume: the parameters (flat) and each server's state.");
  py::class_<train::OptimizerOptions>(m, "OptimizerOptions")
      .def(py::init<>())
      .def_readwrite("name", &train::OptimizerOptions::name)
      .def_readwrite("lr", &train::OptimizerOptions::lr)
      .def_readwrite("momentum", &train::OptimizerOptions::momentum)
      .def_readwrite("nesterov", &train::OptimizerOptions::nesterov)
      .def_readwrite("weight_decay", &train::OptimizerOptions::weight_decay)
      .def_readwrite("beta1", &train::OptimizerOptions::beta1)
      .def_readwrite("beta2", &train::OptimizerOptions::beta2)
      .def_readwrite("eps", &train::OptimizerOptions::eps);
}

}  // namespace distml::python
