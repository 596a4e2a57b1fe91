#include "distml/core/error.h"

namespace distml::detail {

void fail_check(const char* file, int line, const std::string& what) {
  throw InternalError(cat(file, ":", line, ": ", what));
}

}  // namespace distml::detail
