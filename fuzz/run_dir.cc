// Fuzzes what distml report reads of a run directory (cli/run_record.cc, timeline_breakdown.cc):
// metrics.jsonl, done.json and timeline.json, written by a run that may have crashed or been
// edited. An input is metrics.jsonl, then optionally "\n#--done\n" and done.json, then
// optionally "\n#--timeline\n" and timeline.json. Reading the folder either works or ends in a
// UsageError or DataError naming the file.
#include "run_dir.h"

#include <stdlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "distml/core/error.h"
#include "run_record.h"

namespace {

// A folder of this process's own, made once (fuzzing writes there; nothing else does).
const std::string& folder() {
  static const std::string dir = [] {
    std::string name = (std::filesystem::temp_directory_path() / "distml-fuzz-run-XXXXXX").string();
    if (!mkdtemp(name.data())) std::abort();
    return name;
  }();
  return dir;
}

// Writes `text` as `name` in the folder, or removes the file when `present` is false.
void put(const char* name, std::string_view text, bool present) {
  const auto path = std::filesystem::path(folder()) / name;
  if (!present) {
    std::filesystem::remove(path);
    return;
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(text.data(), text.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  constexpr std::string_view kDone = "\n#--done\n", kTimeline = "\n#--timeline\n";
  const std::size_t timeline_at = input.find(kTimeline);
  const std::string_view timeline =
      timeline_at == std::string_view::npos ? "" : input.substr(timeline_at + kTimeline.size());
  input = input.substr(0, timeline_at);
  const std::size_t done_at = input.find(kDone);
  const std::string_view done =
      done_at == std::string_view::npos ? "" : input.substr(done_at + kDone.size());
  put(distml::cli::kRunMetricsFile, input.substr(0, done_at), true);
  put(distml::cli::kRunDoneFile, done, done_at != std::string_view::npos);
  put(distml::cli::kRunTimelineFile, timeline, timeline_at != std::string_view::npos);
  try {
    std::vector<distml::cli::RunRecord> runs{distml::cli::read_run_dir(folder())};
    distml::cli::name_runs(runs);
  } catch (const distml::UsageError&) {
  } catch (const distml::DataError&) {
  }
  return 0;
}
