// The hybrid strategy's row-sharded tables (train/strategies/row_sharded_flat.h) for
// DistributedOptimizer: a table's touched rows go to their owners, which update them and send
// them back to every rank, by the same code as the C++ trainer's.
#include <pybind11/pybind11.h>

#include "communicator_binding.h"
#include "distml/train/strategies/row_sharded_flat.h"

namespace distml::python {

void bind_row_table(py::module_& m) {
  m.attr("HYBRID_FIRST_TABLE_TAG") = train::kFirstTableTag;
  m.def(
      "step_row_table",
      [](Comm& comm, const py::buffer& table, const py::buffer& ids, const py::buffer& values,
         double lr, int tag) {
        View t(table, true, ""), i(ids, false, ""), v(values, false, "");
        if (t.info.ndim != 2)
          throw UsageError(cat("a row-sharded table is [rows, dim], not ", t.info.ndim, "-D"));
        py::gil_scoped_release unlocked;
        return train::step_flat_table(comm.communicator(), t.buffer(), t.info.shape[1],
                                      i.const_buffer(), v.const_buffer(), lr, tag);
      },
      py::arg("comm"), py::arg("table"), py::arg("ids"), py::arg("values"), py::arg("lr"),
      py::arg("tag"),
      "Collective: this rank's gradient rows (ids, values) of `table` to their owners, SGD on "
      "the average at `lr`, the updated rows into every rank's table. Returns the bytes sent.");
}

}  // namespace distml::python
