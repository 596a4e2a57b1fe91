#include "distml/train/checkpoint_owner.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>

#include "distml/core/atomic_file.h"
#include "distml/core/error.h"
#include "distml/train/checkpoint_file.h"

namespace distml::train {
namespace fs = std::filesystem;

std::string owner_of(const std::string& dir) {
  std::ifstream in(fs::path(dir) / kOwnerFile);
  std::string id;
  in >> id;
  return id;
}

std::string claim_checkpoint_dir(const std::string& dir,
                                 const std::vector<std::string>& checkpoints,
                                 const std::string& run_id, Arrival arrival,
                                 const std::string& key) {
  const std::string owner = owner_of(dir);
  if (arrival == Arrival::fresh) {
    for (const auto& path : checkpoints) {
      const auto writer = checked_file_run_id(path);
      if (writer && *writer == run_id) continue;
      throw UsageError(cat(dir, " holds the checkpoint ", fs::path(path).filename().string(),
                           " of ",
                           !writer           ? "an unreadable run"
                           : writer->empty() ? "an earlier run"
                                             : "run " + *writer,
                           ": a new run there would bury it. Continue that run with --resume ", dir,
                           ", or give this one an empty folder (", key, ")"));
    }
    if (!owner.empty() && owner != run_id)
      std::fprintf(stderr,
                   "distml: %s belonged to run %s, which wrote no checkpoint; this run takes it\n",
                   dir.c_str(), owner.c_str());
  }
  // Only distml's own files, of this host: a file of another name may be anyone's.
  static const std::regex ours(R"((checkpoint-\d{12}\.dml|rl_checkpoint\.bin|run-id)\.tmp\..*)");
  for (const auto& path : remove_stale_temporary_files(
           dir, [](const std::string& name) { return std::regex_match(name, ours); }))
    std::fprintf(stderr, "distml: removed %s, a temporary file its writer left when it died\n",
                 path.c_str());
  const std::string id = arrival == Arrival::resuming && !owner.empty() ? owner : run_id;
  if (owner != id) write_file_atomically((fs::path(dir) / kOwnerFile).string(), {id, "\n"});
  return id;
}

}  // namespace distml::train
