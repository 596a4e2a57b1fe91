// A model parameter as memory and a shape, for the facades that callers without torch use (the
// Python module): the parameter server's and asynchronous EASGD's serving ranks.
#pragma once

#include <cstdint>
#include <vector>

#include "distml/comm/communicator.h"

namespace distml::train {

/// A parameter's memory (float32 or float64) and shape.
struct FlatParameter {
  comm::Buffer data;
  std::vector<std::int64_t> shape;
};

}  // namespace distml::train
