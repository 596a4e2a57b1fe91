// The model's parameters, as the serving ranks' facades take them (ps_binding.cc,
// easgd_binding.cc): writable views of the arrays, without copies.
#pragma once

#include <pybind11/pybind11.h>

#include <vector>

#include "communicator_binding.h"
#include "distml/train/strategies/flat_parameter.h"

namespace distml::python {

/// Each array's memory and shape; `views` keeps the buffers requested while they are used.
inline std::vector<train::FlatParameter> flat_parameters(const std::vector<py::buffer>& arrays,
                                                         std::vector<View>& views) {
  std::vector<train::FlatParameter> flat;
  for (const auto& a : arrays) {
    const View& v = views.emplace_back(a, true, "");
    flat.push_back({v.buffer(), {v.info.shape.begin(), v.info.shape.end()}});
  }
  return flat;
}

}  // namespace distml::python
