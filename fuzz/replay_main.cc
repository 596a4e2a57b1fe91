// Replays fuzz inputs through the fuzz targets' own code without libFuzzer or sanitizers: make
// test's check that every seed and every kept regression input (fuzz/corpus, fuzz/regressions)
// still goes through cleanly, built by the main compiler in seconds. The sanitizers and the
// mutation are make fuzz's (fuzz/build.sh with clang++).
//
// Usage: distml_fuzz_replay TARGET PATH...   (a PATH that is a folder: every file in it)
//
// Each target's LLVMFuzzerTestOneInput is compiled under the name distml_fuzz_TARGET
// (tests/fuzz/CMakeLists.txt), listed by the generated replay_targets.h. A failing input ends
// the process as it would end a fuzzer (abort, an uncaught exception, a bad access); the signal
// handler names the input first.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "replay_targets.h"

#define DISTML_DECLARE_TARGET(name) \
  extern "C" int distml_fuzz_##name(const std::uint8_t* data, std::size_t size);
DISTML_FUZZ_TARGETS(DISTML_DECLARE_TARGET)

namespace {

using TargetFunction = int (*)(const std::uint8_t*, std::size_t);

const std::map<std::string_view, TargetFunction>& targets() {
#define DISTML_TARGET_ENTRY(name) {#name, distml_fuzz_##name},
  static const std::map<std::string_view, TargetFunction> all{
      DISTML_FUZZ_TARGETS(DISTML_TARGET_ENTRY)};
#undef DISTML_TARGET_ENTRY
  return all;
}

// The input being replayed, for the signal handler (which may only write(2) what it finds).
char current_input[4096] = "";

void name_input_and_die(int signal) {
  constexpr char prefix[] = "distml_fuzz_replay: this input fails: ";
  (void)!write(STDERR_FILENO, prefix, sizeof prefix - 1);
  (void)!write(STDERR_FILENO, current_input, strnlen(current_input, sizeof current_input));
  (void)!write(STDERR_FILENO, "\n", 1);
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

std::vector<std::filesystem::path> inputs_under(const std::filesystem::path& path) {
  if (!std::filesystem::is_directory(path)) return {path};
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(path))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  const auto target = argc > 1 ? targets().find(argv[1]) : targets().end();
  if (argc < 3 || target == targets().end()) {
    std::fprintf(stderr, "usage: distml_fuzz_replay TARGET PATH...\ntargets:");
    for (const auto& [name, function] : targets()) std::fprintf(stderr, " %s", name.data());
    std::fprintf(stderr, "\n");
    return 2;
  }
  for (int signal : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL})
    std::signal(signal, name_input_and_die);

  std::size_t replayed = 0;
  for (int i = 2; i < argc; ++i) {
    if (!std::filesystem::exists(argv[i])) {
      std::fprintf(stderr, "distml_fuzz_replay: %s: no such file or folder\n", argv[i]);
      return 2;
    }
    for (const auto& input : inputs_under(argv[i])) {
      std::snprintf(current_input, sizeof current_input, "%s", input.c_str());
      std::ifstream file(input, std::ios::binary);
      const std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(file), {}};
      static const std::uint8_t no_byte = 0;  // libFuzzer never passes a null pointer
      target->second(bytes.empty() ? &no_byte : bytes.data(), bytes.size());
      ++replayed;
    }
  }
  std::printf("%s: %zu input(s) replayed, none failed\n", argv[1], replayed);
  return 0;
}
