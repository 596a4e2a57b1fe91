#include "distml/train/checkpoint_dir.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <regex>

#include "distml/core/error.h"
#include "distml/train/checkpoint_file.h"

namespace distml::train {
namespace fs = std::filesystem;

std::string checkpoint_file(const std::string& dir, std::int64_t global_step) {
  char name[40];
  std::snprintf(name, sizeof name, "checkpoint-%012lld.dml", static_cast<long long>(global_step));
  return (fs::path(dir) / name).string();
}

std::vector<std::string> checkpoints_newest_first(const std::string& dir) {
  static const std::regex pattern("checkpoint-([0-9]{12})\\.dml");
  std::vector<std::pair<long long, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, m, pattern)) found.emplace_back(std::stoll(m[1]), entry.path());
  }
  std::sort(found.rbegin(), found.rend());
  std::vector<std::string> paths;
  for (auto& [step, path] : found) paths.push_back(std::move(path));
  return paths;
}

std::vector<std::string> checkpoints_of_run(const std::string& dir, const std::string& run_id) {
  std::vector<std::string> own;
  for (auto& path : checkpoints_newest_first(dir))
    if (checked_file_run_id(path) == run_id) own.push_back(std::move(path));
  return own;
}

void keep_newest_checkpoints(const std::string& dir, std::int64_t keep, const std::string& run_id) {
  const auto all = checkpoints_of_run(dir, run_id);
  for (std::size_t i = static_cast<std::size_t>(std::max<std::int64_t>(keep, 1)); i < all.size();
       ++i) {
    std::error_code ec;
    fs::remove(all[i], ec);  // a file that will not go is only kept longer
  }
}

CheckpointRead read_newest_checkpoint(
    const std::string& dir,
    const std::function<void(const std::string&, const std::string&)>& skipped,
    const std::string& written_by) {
  const auto all =
      written_by.empty() ? checkpoints_newest_first(dir) : checkpoints_of_run(dir, written_by);
  if (all.empty())
    throw CheckpointError(cat(dir, ": no checkpoint (checkpoint-<step>.dml) in this directory",
                              written_by.empty() ? "" : cat(" written by run ", written_by)));
  std::string failures;
  for (const auto& path : all) {
    try {
      return {path, read_checked_file(path)};
    } catch (const CheckpointError& e) {
      failures += cat("\n  ", e.what());
      if (&path != &all.back()) skipped(path, e.what());
    }
  }
  throw CheckpointError(cat(dir, ": no checkpoint is whole:", failures));
}

}  // namespace distml::train
