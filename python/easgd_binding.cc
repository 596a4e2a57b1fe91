// Asynchronous EASGD's centre rank (train/strategies/easgd_centre_flat.h) for
// DistributedOptimizer: the protocol's tags and words, which the workers' side (distml/_easgd.py)
// uses, and the centre's side, the C++ trainer's own, over the model's parameters in place.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <vector>

#include "communicator_binding.h"
#include "distml/train/strategies/easgd_centre_flat.h"
#include "flat_parameters.h"

namespace distml::python {

void bind_easgd_centre(py::module_& m) {
  using namespace train::easgd;
  m.attr("EASGD_EXCHANGE_TAG") = kExchangeTag;
  m.attr("EASGD_CONTROL_TAG") = kControlTag;
  m.attr("EASGD_RESUME_TAG") = kResumeTag;
  m.attr("EASGD_SYNC") = kSync;
  m.attr("EASGD_STOP") = kStop;
  m.def(
      "easgd_serve",
      [](Comm& comm, const std::vector<py::buffer>& params, double alpha, bool resumed) {
        std::vector<View> views;
        const auto flat = flat_parameters(params, views);
        py::gil_scoped_release unlocked;
        serve_centre_flat(comm.communicator(), flat, alpha, resumed);
      },
      py::arg("comm"), py::arg("params"), py::arg("alpha"), py::arg("resumed"),
      "The centre rank's part: serves until every worker has stopped; the centre in params.");
}

}  // namespace distml::python
