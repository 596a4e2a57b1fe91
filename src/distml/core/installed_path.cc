#include "distml/core/installed_path.h"

#include <filesystem>

namespace distml {

std::string installed_or_source(const std::string& relative, const std::string& in_source_tree) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "share" / "distml" / relative;
    if (fs::exists(installed, ec)) return installed.string();
  }
  return in_source_tree;
}

}  // namespace distml
