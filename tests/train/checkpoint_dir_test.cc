#include "distml/train/checkpoint_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "../data/temp_dir.h"
#include "distml/core/error.h"
#include "distml/train/checkpoint_file.h"

namespace distml::train {
namespace {

using data::testing::TempDir;
using Skipped = std::vector<std::pair<std::string, std::string>>;

// The payload starts after the 36-byte header (checkpoint_file.h).
constexpr std::streamoff kInsidePayload = 38;

void damage_byte(const std::string& path, std::streamoff at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(at);
  f.put('\x7f');
}

TEST(CheckpointDir, ListsOnlyCheckpointFilesNewestFirstByStep) {
  TempDir dir;
  const std::string root = std::filesystem::path(dir.file("x")).parent_path().string();
  for (long step : {9, 120, 40}) write_checked_file(checkpoint_file(root, step), "x");
  std::ofstream(root + "/checkpoint-000000000200.dml.tmp") << "half";  // not whole
  std::ofstream(root + "/notes.txt") << "mine";
  EXPECT_EQ(checkpoints_newest_first(root),
            (std::vector<std::string>{checkpoint_file(root, 120), checkpoint_file(root, 40),
                                      checkpoint_file(root, 9)}));
  EXPECT_TRUE(checkpoints_newest_first(root + "/missing").empty());
}

TEST(CheckpointDir, KeepsTheNewestAndLeavesOtherFiles) {
  TempDir dir;
  const std::string root = std::filesystem::path(dir.file("x")).parent_path().string();
  for (long step : {10, 20, 30, 40}) write_checked_file(checkpoint_file(root, step), "x", "me");
  std::ofstream(root + "/notes.txt") << "mine";
  keep_newest_checkpoints(root, 2, "me");
  EXPECT_EQ(checkpoints_newest_first(root),
            (std::vector<std::string>{checkpoint_file(root, 40), checkpoint_file(root, 30)}));
  EXPECT_TRUE(std::filesystem::exists(root + "/notes.txt"));
}

// What an older run left (steps 80 and 120, one without a run id as earlier releases wrote
// them) stays: a run deletes only its own files, even where the others have higher steps.
TEST(CheckpointDir, KeepsOnlyItsOwnNewestAndNeverDeletesAnotherRunsFiles) {
  TempDir dir;
  const std::string root = std::filesystem::path(dir.file("x")).parent_path().string();
  write_checked_file(checkpoint_file(root, 80), "old", "old-run");
  write_checked_file(checkpoint_file(root, 120), "older");
  for (long step : {20, 40, 60}) write_checked_file(checkpoint_file(root, step), "new", "new-run");
  keep_newest_checkpoints(root, 2, "new-run");
  EXPECT_EQ(checkpoints_newest_first(root),
            (std::vector<std::string>{checkpoint_file(root, 120), checkpoint_file(root, 80),
                                      checkpoint_file(root, 60), checkpoint_file(root, 40)}));
  EXPECT_EQ(checkpoints_of_run(root, "new-run"),
            (std::vector<std::string>{checkpoint_file(root, 60), checkpoint_file(root, 40)}));
}

TEST(CheckpointDir, ReadsTheNewestOfOneRunWhenAsked) {
  TempDir dir;
  const std::string root = std::filesystem::path(dir.file("x")).parent_path().string();
  write_checked_file(checkpoint_file(root, 40), "mine", "me");
  write_checked_file(checkpoint_file(root, 80), "another run's", "other");
  EXPECT_EQ(read_newest_checkpoint(root, {}, "me").payload, "mine");
  EXPECT_EQ(read_newest_checkpoint(root, {}).payload, "another run's");
  EXPECT_THROW(read_newest_checkpoint(root, {}, "third"), CheckpointError);
}

TEST(CheckpointDir, SkipsADamagedNewestCheckpointForTheOneBefore) {
  TempDir dir;
  const std::string root = std::filesystem::path(dir.file("x")).parent_path().string();
  write_checked_file(checkpoint_file(root, 40), "step forty");
  write_checked_file(checkpoint_file(root, 80), "step eighty");
  damage_byte(checkpoint_file(root, 80), kInsidePayload);
  Skipped skipped;
  const auto read = read_newest_checkpoint(
      root, [&](const std::string& p, const std::string& why) { skipped.emplace_back(p, why); });
  EXPECT_EQ(read.path, checkpoint_file(root, 40));
  EXPECT_EQ(read.payload, "step forty");
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].first, checkpoint_file(root, 80));
  EXPECT_NE(skipped[0].second.find("checksum"), std::string::npos) << skipped[0].second;
}

TEST(CheckpointDir, NoWholeCheckpointIsAnErrorNamingEachFile) {
  TempDir dir;
  const std::string root = std::filesystem::path(dir.file("x")).parent_path().string();
  EXPECT_THROW(read_newest_checkpoint(root, {}), CheckpointError);
  write_checked_file(checkpoint_file(root, 5), "five");
  std::filesystem::resize_file(checkpoint_file(root, 5), 10);  // a truncated header
  try {
    read_newest_checkpoint(root, [](auto&&...) { ADD_FAILURE() << "the last is not skipped"; });
    FAIL() << "expected a CheckpointError";
  } catch (const CheckpointError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("no checkpoint is whole"), std::string::npos) << message;
    EXPECT_NE(message.find(checkpoint_file(root, 5)), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace distml::train
