// Files distml reads at run time (the report's plotting bundles, the tuned RL configs): beside
// an installed command under PREFIX/share/distml (make install), else in the source tree the
// binary was built from.
#pragma once

#include <string>

namespace distml {

/// PREFIX/share/distml/`relative` when the running executable is PREFIX/bin/... and that
/// exists; otherwise `in_source_tree`.
std::string installed_or_source(const std::string& relative, const std::string& in_source_tree);

}  // namespace distml
