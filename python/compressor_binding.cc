// The C++ trainer's gradient compressors (train/compress/compressor.h) for DistributedOptimizer:
// the same payloads, error feedback, random draws and saved state, over the Python optimizer's
// buckets, whose flat buffers are viewed in place.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "communicator_binding.h"
#include "distml/train/compress/compressor.h"

namespace distml::python {
namespace {

using Shapes = std::vector<std::vector<std::int64_t>>;

torch::ScalarType scalar_type(const std::string& dtype) {
  if (dtype == "float32") return torch::kFloat32;
  if (dtype == "float64") return torch::kFloat64;
  throw ConfigError(cat("compression: the parameters are ", dtype,
                        "; compressors take float32 (and some float64)"));
}

class BucketCompressor {
 public:
  // `buckets`: each bucket's parameter shapes, in its order; `dtype`: theirs.
  BucketCompressor(const train::compress::CompressOptions& options,
                   const std::vector<Shapes>& buckets, const std::string& dtype)
      : type_(scalar_type(dtype)) {
    std::vector<train::compress::BucketLayout> layouts;
    for (const Shapes& shapes : buckets) {
      std::vector<torch::Tensor> tensors;  // shapes only: on the meta device, no memory
      for (const auto& shape : shapes)
        tensors.push_back(torch::empty(shape, torch::TensorOptions(type_).device(torch::kMeta)));
      layouts.push_back(train::compress::layout_of(tensors, options));
    }
    elements_.reserve(layouts.size());
    for (const auto& layout : layouts) elements_.push_back(layout.elements);
    compressor_ = train::compress::make_compressor(options, layouts);
    if (!compressor_) throw ConfigError("compression: \"none\" makes no compressor");
  }

  // Collective: `flat` (bucket `bucket`'s gradients laid end to end, then padding) becomes the
  // compressed average over the ranks, for step `step` (1 for the first); returns the bytes
  // this rank sent.
  std::size_t reduce(const py::buffer& flat, std::size_t bucket, std::int64_t step, Comm& comm) {
    View v(flat, true, "");
    if (bucket >= elements_.size())
      throw UsageError(cat("compression: bucket ", bucket, " of ", elements_.size()));
    if (v.info.size < elements_[bucket] || comm::dtype_size(v.type) != torch::elementSize(type_))
      throw UsageError(cat("compression: bucket ", bucket, " needs ", elements_[bucket],
                           " elements of ", c10::toString(type_)));
    const auto grads = torch::from_blob(v.info.ptr, {elements_[bucket]}, type_);
    py::gil_scoped_release unlocked;
    const auto reduced = compressor_->reduce(grads, bucket, step, comm.communicator());
    grads.copy_(reduced.average);
    return reduced.bytes_sent;
  }
  py::bytes save_state() const { return compressor_->save_state(); }
  void load_state(const std::string& state) { compressor_->load_state(state); }

 private:
  torch::ScalarType type_;
  std::vector<std::int64_t> elements_;
  std::unique_ptr<train::compress::Compressor> compressor_;
};

}  // namespace

void bind_compressor(py::module_& m) {
  py::class_<train::compress::CompressOptions>(m, "CompressOptions",
                                               "The [compress] section of a training config.")
      .def(py::init<>())
      .def_readwrite("name", &train::compress::CompressOptions::name)
      .def_readwrite("ratio", &train::compress::CompressOptions::ratio)
      .def_readwrite("levels", &train::compress::CompressOptions::levels)
      .def_readwrite("rank", &train::compress::CompressOptions::rank)
      .def_readwrite("error_feedback", &train::compress::CompressOptions::error_feedback)
      .def_readwrite("warmup_steps", &train::compress::CompressOptions::warmup_steps)
      .def_readwrite("seed", &train::compress::CompressOptions::seed);
  m.def("compressor_names", &train::compress::compressor_names);
  py::class_<BucketCompressor>(m, "BucketCompressor",
                               "A C++ compressor over a Python optimizer's buckets.")
      .def(py::init<const train::compress::CompressOptions&, const std::vector<Shapes>&,
                    const std::string&>(),
           py::arg("options"), py::arg("buckets"), py::arg("dtype"))
      .def("reduce", &BucketCompressor::reduce, py::arg("flat"), py::arg("bucket"), py::arg("step"),
           py::arg("comm"))
      .def("save_state", &BucketCompressor::save_state)
      .def("load_state", &BucketCompressor::load_state);
}

}  // namespace distml::python
