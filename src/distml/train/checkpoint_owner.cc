#include "distml/train/checkpoint_owner.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

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

void claim_checkpoint_dir(const std::string& dir, const std::vector<std::string>& checkpoints,
                          const std::string& run_id, Arrival arrival, const std::string& key) {
  if (arrival == Arrival::fresh) {
    const auto refuse = [&](const std::string& what) {
      throw UsageError(cat(dir, " holds ", what, ": a new run there would bury it. Continue that ",
                           "run with --resume ", dir, ", or give this one an empty folder (", key,
                           ")"));
    };
    for (const auto& path : checkpoints) {
      const auto writer = checked_file_run_id(path);
      if (writer && *writer == run_id) continue;
      refuse(cat("the checkpoint ", fs::path(path).filename().string(), " of ",
                 !writer           ? "an unreadable run"
                 : writer->empty() ? "an earlier run"
                                   : "run " + *writer));
    }
    if (const auto owner = owner_of(dir); !owner.empty() && owner != run_id)
      refuse(cat("no checkpoint yet but belongs to run ", owner, " (its file ", kOwnerFile, ")"));
  }
  for (const auto& path : remove_stale_temporary_files(dir))
    std::fprintf(stderr, "distml: removed %s, a temporary file its writer left when it died\n",
                 path.c_str());
  if (owner_of(dir) != run_id)
    write_file_atomically((fs::path(dir) / kOwnerFile).string(), {run_id, "\n"});
}

}  // namespace distml::train
