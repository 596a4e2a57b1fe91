// The C++ trainer's gradient compressors for DistributedOptimizer (train/compress/
// buffer_compressor.h): the same payloads, error feedback, random draws and saved state, over
// the Python optimizer's buckets, whose flat buffers are reduced in place.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "communicator_binding.h"
#include "distml/train/compress/buffer_compressor.h"

namespace distml::python {

void bind_compressor(py::module_& m) {
  using train::compress::BufferCompressor;
  using train::compress::CompressOptions;
  py::class_<CompressOptions>(m, "CompressOptions", "The [compress] section of a training config.")
      .def(py::init<>())
      .def_readwrite("name", &CompressOptions::name)
      .def_readwrite("ratio", &CompressOptions::ratio)
      .def_readwrite("levels", &CompressOptions::levels)
      .def_readwrite("rank", &CompressOptions::rank)
      .def_readwrite("error_feedback", &CompressOptions::error_feedback)
      .def_readwrite("warmup_steps", &CompressOptions::warmup_steps)
      .def_readwrite("seed", &CompressOptions::seed);
  m.def("compressor_names", &train::compress::compressor_names);
  py::class_<BufferCompressor>(m, "BucketCompressor",
                               "A C++ compressor over a Python optimizer's buckets.")
      .def(py::init([](const CompressOptions& options,
                       const std::vector<BufferCompressor::Shapes>& buckets,
                       const std::string& dtype) {
             return std::make_unique<BufferCompressor>(options, buckets, comm::parse_dtype(dtype));
           }),
           py::arg("options"), py::arg("buckets"), py::arg("dtype"))
      .def(
          "reduce",
          [](BufferCompressor& c, const py::buffer& flat, std::size_t bucket, std::int64_t step,
             Comm& comm) {
            View v(flat, true, "");
            py::gil_scoped_release unlocked;
            return c.reduce(v.buffer(), bucket, step, comm.communicator());
          },
          py::arg("flat"), py::arg("bucket"), py::arg("step"), py::arg("comm"),
          "Collective: the bucket's elements at the start of `flat` become their compressed "
          "average, in place; returns the bytes this rank sent.")
      .def(
          "pack",
          [](BufferCompressor& c, const py::buffer& flat, std::size_t bucket, std::int64_t step,
             int rank, const py::buffer& out) {
            View v(flat, false, ""), o(out, true, "");
            c.pack(v.buffer(), bucket, step, rank, o.buffer());
          },
          py::arg("flat"), py::arg("bucket"), py::arg("step"), py::arg("rank"), py::arg("out"),
          "A parameter server worker's push: the bucket's gradients packed into `out`.")
      .def("packed_bytes", &BufferCompressor::packed_bytes, py::arg("bucket"))
      .def("save_state", [](const BufferCompressor& c) { return py::bytes(c.save_state()); })
      .def("load_state", &BufferCompressor::load_state);
}

}  // namespace distml::python
