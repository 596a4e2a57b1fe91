// distml's classical estimators on NumPy arrays: each rank passes its own rows, and fit and
// score are collective over a Communicator, as in `distml fit`. Labels arrive as text and get
// their class ids the way the file readers give them (shard::assign_labels: the classes over
// all ranks, sorted by number when every label is an integer, else by name), so that a model
// fitted here equals the one `distml fit` fits on the same rows.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "communicator_binding.h"
#include "distml/ml/estimator.h"
#include "distml/ml/shard_text.h"

namespace distml::python {
namespace {

using Rows = py::array_t<double, py::array::c_style | py::array::forcecast>;

// This rank's rows as the estimators take them (a copy: LocalData owns its values).
ml::LocalData local_data(const Rows& x) {
  if (x.ndim() != 2)
    throw UsageError(cat("X must be a 2-d array (rows x features), not ", x.ndim(), "-d"));
  ml::LocalData d;
  d.rows = static_cast<std::size_t>(x.shape(0));
  d.features = static_cast<std::size_t>(x.shape(1));
  d.x.assign(x.data(), x.data() + x.size());
  return d;
}

void check_label_count(const std::vector<std::string>& labels, std::size_t rows) {
  if (labels.size() != rows)
    throw UsageError(cat("y has ", labels.size(), " labels for ", rows, " rows of X"));
}

// Labels as text with where each came from, for assign_labels' messages.
ml::shard::RawLabels raw_labels(const std::vector<std::string>& labels, std::size_t rows) {
  check_label_count(labels, rows);
  ml::shard::RawLabels raw;
  raw.values = labels;
  for (std::size_t i = 0; i < labels.size(); ++i) raw.origins.push_back(cat("y[", i, "]"));
  return raw;
}

class Estimator {
 public:
  explicit Estimator(const std::string& name) : e_(ml::make_estimator(name)) {}

  std::string name() const { return e_->name(); }
  bool supervised() const { return e_->supervised(); }
  bool regression() const { return e_->regression(); }
  void set(const std::string& key, const std::string& value) { e_->set(key, value); }

  /// Collective. Returns the class names (class id i is names[i]); empty for regression and
  /// unsupervised estimators.
  std::vector<std::string> fit(const Comm& c, const Rows& x,
                               const std::optional<std::vector<std::string>>& labels) {
    auto d = local_data(x);
    auto& comm = c.communicator();
    {
      py::gil_scoped_release unlocked;
      agree_rows(d, comm);
      if (e_->supervised()) {
        if (!labels) throw UsageError(cat(e_->name(), " learns from labels: pass y"));
        ml::shard::assign_labels(comm, raw_labels(*labels, d.rows), e_->regression(), d);
      }
      e_->fit(d, comm);
    }
    classes_ = d.class_names;
    return classes_;
  }

  py::array_t<std::int64_t> predict(const Rows& x) const {
    const auto ids = e_->predict(local_data(x));
    return py::array_t<std::int64_t>(static_cast<py::ssize_t>(ids.size()), ids.data());
  }
  py::array_t<double> predict_values(const Rows& x) const {
    const auto v = e_->predict_values(local_data(x));
    return py::array_t<double>(static_cast<py::ssize_t>(v.size()), v.data());
  }
  py::array_t<double> predict_proba(const Rows& x) const {
    const auto d = local_data(x);
    const auto p = e_->predict_proba(d);
    const auto classes = static_cast<py::ssize_t>(d.rows ? p.size() / d.rows : classes_.size());
    py::array_t<double> out({static_cast<py::ssize_t>(d.rows), classes});
    std::copy(p.begin(), p.end(), out.mutable_data());
    return out;
  }

  /// Collective: accuracy over every rank's rows (a label the fit did not see counts as an
  /// error), R^2 for regression, minus the inertia for k-means.
  double score(const Comm& c, const Rows& x,
               const std::optional<std::vector<std::string>>& labels) const {
    auto d = local_data(x);
    auto& comm = c.communicator();
    py::gil_scoped_release unlocked;
    agree_rows(d, comm);
    if (e_->supervised()) {
      if (!labels) throw UsageError(cat(e_->name(), " scores against labels: pass y"));
      if (e_->regression()) {
        ml::shard::assign_labels(comm, raw_labels(*labels, d.rows), true, d);
      } else {
        d.num_classes = static_cast<std::int64_t>(classes_.size());
        d.class_names = classes_;
        check_label_count(*labels, d.rows);
        for (const auto& label : *labels) {
          const auto at = std::find(classes_.begin(), classes_.end(), label);
          d.y.push_back(at - classes_.begin());  // == size(): never predicted
        }
      }
    }
    return e_->score(d, comm);
  }

  int iterations() const { return e_->iterations(); }
  std::string to_json() const { return e_->to_json().dump(); }

 private:
  static void agree_rows(ml::LocalData& d, comm::Communicator& comm) {
    const auto features = static_cast<std::int64_t>(d.features);
    std::int64_t extremes[2] = {features, -features};  // the max and minus the min
    comm.allreduce(comm::Buffer{extremes, 2, comm::DType::i64}, {.op = comm::ReduceOp::max});
    if (extremes[0] != -extremes[1])
      throw UsageError(cat("the ranks' X have different numbers of features (", -extremes[1],
                           " to ", extremes[0], ")"));
    ml::shard::count_global_rows(comm, d);
  }

  std::unique_ptr<ml::Estimator> e_;
  std::vector<std::string> classes_;
};

}  // namespace

void bind_estimators(py::module_& m) {
  py::class_<Estimator>(m, "Estimator", "A classical estimator (ml/estimator.h) by name.")
      .def(py::init<const std::string&>(), py::arg("name"))
      .def_property_readonly("name", &Estimator::name)
      .def_property_readonly("supervised", &Estimator::supervised)
      .def_property_readonly("regression", &Estimator::regression)
      .def_property_readonly("iterations", &Estimator::iterations)
      .def("set", &Estimator::set, py::arg("key"), py::arg("value"))
      .def("fit", &Estimator::fit, py::arg("comm"), py::arg("x"), py::arg("labels"))
      .def("predict", &Estimator::predict, py::arg("x"))
      .def("predict_values", &Estimator::predict_values, py::arg("x"))
      .def("predict_proba", &Estimator::predict_proba, py::arg("x"))
      .def("score", &Estimator::score, py::arg("comm"), py::arg("x"), py::arg("labels"))
      .def("to_json", &Estimator::to_json);
  m.def("estimator_names", &ml::estimator_names);
}

}  // namespace distml::python
