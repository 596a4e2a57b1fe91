// The command line a remote shell runs on another host: checked by running it in a local
// shell, which is what the remote shell does with it (as `sh -c LINE`).
#include "remote_shell.h"

#include <gtest/gtest.h>
#include <stdio.h>

#include <filesystem>

#include "../data/temp_dir.h"
#include "distml/core/error.h"

namespace distml::cli {
namespace {

// What `sh -c line` prints.
std::string run_shell(const std::string& line) {
  FILE* out = ::popen(("sh -c " + shell_quote(line)).c_str(), "r");
  std::string text;
  for (char buf[256]; std::fgets(buf, sizeof buf, out);) text += buf;
  EXPECT_EQ(::pclose(out), 0) << line;
  return text;
}

TEST(RemoteShell, QuotesAnyWordSoThatTheShellGivesItBackUnchanged) {
  for (const std::string word :
       {"plain", "two words", "it's", "$HOME `id` \"q\"", "a\\b", "", "'", "line\nbreak", "*"})
    EXPECT_EQ(run_shell("printf '%s|' " + shell_quote(word)), word + "|") << word;
}

TEST(RemoteShell, RunsTheCommandInTheFolderWithTheEnvironment) {
  data::testing::TempDir dir;
  const std::string folder = std::filesystem::path(dir.file("x")).parent_path();
  const auto argv =
      remote_command("ssh -o BatchMode=yes", "n2", folder, {{"RANK", "3"}, {"ODD", "a 'b' $c"}},
                     {"sh", "-c", "printf '%s %s %s' \"$RANK\" \"$ODD\" \"$(pwd -P)\""});
  ASSERT_EQ(argv.size(), 5u);
  EXPECT_EQ(argv[0], "ssh");
  EXPECT_EQ(argv[2], "BatchMode=yes");
  EXPECT_EQ(argv[3], "n2");
  const std::string real_dir = std::filesystem::canonical(folder);
  EXPECT_EQ(run_shell(argv[4]), "3 a 'b' $c " + real_dir);
  EXPECT_THROW(remote_command(" ", "n2", "/", {}, {"x"}), UsageError);
}

TEST(RemoteShell, KnowsThisMachineByNameAndAsLocalhost) {
  char name[256] = {};
  ASSERT_EQ(::gethostname(name, sizeof name - 1), 0);
  EXPECT_TRUE(is_this_host("localhost"));
  EXPECT_TRUE(is_this_host(name));
  EXPECT_FALSE(is_this_host(std::string(name) + "-not"));
}

}  // namespace
}  // namespace distml::cli
