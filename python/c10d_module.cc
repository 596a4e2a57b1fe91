// distml._c10d: the "distml" backend's ProcessGroup as a subclass of torch.distributed's, and
// its creator, which distml/torch.py registers with Backend.register_backend. A module of its
// own, so that `import distml` does not load torch.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>

#include "process_group.h"

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
