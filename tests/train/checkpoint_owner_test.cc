#include "distml/train/checkpoint_owner.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "../data/temp_dir.h"
#include "distml/core/error.h"
#include "distml/train/checkpoint_dir.h"
#include "distml/train/checkpoint_file.h"

namespace distml::train {
namespace {

namespace fs = std::filesystem;
using data::testing::TempDir;

std::string folder_of(TempDir& dir) { return fs::path(dir.file("x")).parent_path() / "ckpt"; }

// The id the run goes on as.
std::string claim(const std::string& dir, const std::string& run,
                  Arrival arrival = Arrival::fresh) {
  return claim_checkpoint_dir(dir, checkpoints_newest_first(dir), run, arrival,
                              "train.checkpoint_dir");
}

// The UsageError message of claiming `dir` for a fresh run `run`, empty when there is none.
std::string refusal(const std::string& dir, const std::string& run) {
  try {
    claim(dir, run);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// A process id that belonged to a process that has ended.
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

std::string host() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

TEST(CheckpointOwner, AFreshRunTakesAnEmptyOrMissingFolder) {
  TempDir tmp;
  const auto dir = folder_of(tmp);
  EXPECT_EQ(claim(dir, "run-a"), "run-a");
  EXPECT_EQ(owner_of(dir), "run-a");
  claim(dir, "run-a");  // again, as its restart does
  EXPECT_EQ(owner_of(dir), "run-a");
}

TEST(CheckpointOwner, AFreshRunIsRefusedWhereAnotherRunsCheckpointsAreAndTouchesNothing) {
  TempDir tmp;
  const auto dir = folder_of(tmp);
  write_checked_file(checkpoint_file(dir, 80), "a", "run-a");
  write_checked_file(checkpoint_file(dir, 120), "a", "run-a");
  const auto message = refusal(dir, "run-b");
  for (const auto& part : std::vector<std::string>{"run run-a", "checkpoint-000000000120.dml",
                                                   "--resume " + dir, "train.checkpoint_dir"})
    EXPECT_NE(message.find(part), std::string::npos) << message << " lacks " << part;
  EXPECT_EQ(checkpoints_newest_first(dir).size(), 2u);
  EXPECT_FALSE(fs::exists(fs::path(dir) / kOwnerFile));
}

TEST(CheckpointOwner, CheckpointsWithoutARunIdAreAnotherRuns) {
  TempDir tmp;
  const auto dir = folder_of(tmp);
  write_checked_file(checkpoint_file(dir, 40), "written by an earlier release");
  EXPECT_NE(refusal(dir, "run-b").find("an earlier run"), std::string::npos);
}

// A run that failed before its first checkpoint leaves only its id: nothing to bury.
TEST(CheckpointOwner, AFolderWhoseRunWroteNoCheckpointIsTakenOver) {
  TempDir tmp;
  const auto dir = folder_of(tmp);
  claim(dir, "run-a");
  EXPECT_EQ(refusal(dir, "run-b"), "");
  EXPECT_EQ(owner_of(dir), "run-b");
}

TEST(CheckpointOwner, ARestartFindsItsOwnCheckpoints) {
  TempDir tmp;
  const auto dir = folder_of(tmp);
  claim(dir, "run-a");
  write_checked_file(checkpoint_file(dir, 40), "a", "run-a");
  EXPECT_EQ(refusal(dir, "run-a"), "");
}

TEST(CheckpointOwner, AResumeOfTheFolderContinuesItsRun) {
  TempDir tmp;
  const auto dir = folder_of(tmp);
  claim(dir, "run-a");
  write_checked_file(checkpoint_file(dir, 40), "a", "run-a");
  EXPECT_EQ(claim(dir, "run-b", Arrival::resuming), "run-a");
  EXPECT_EQ(owner_of(dir), "run-a");
  EXPECT_EQ(checkpoints_newest_first(dir).size(), 1u);
  // A folder without an owner (written before run ids) becomes the resuming run's.
  TempDir other;
  const auto old_dir = folder_of(other);
  write_checked_file(checkpoint_file(old_dir, 40), "no run id");
  EXPECT_EQ(claim(old_dir, "run-c", Arrival::resuming), "run-c");
  EXPECT_EQ(owner_of(old_dir), "run-c");
}

// write_file_atomically's temporary files are named PATH.tmp.PID@HOST: a claim removes those
// of distml's own files whose writers died on this host, and no other.
TEST(CheckpointOwner, RemovesOnlyTheTemporaryFilesOfDeadWritersOnThisHost) {
  TempDir tmp;
  const auto dir = folder_of(tmp);
  fs::create_directories(dir);
  const auto dead = std::to_string(dead_pid()), alive = std::to_string(::getppid());
  const auto name = [&](const std::string& suffix) {
    return (fs::path(dir) / ("checkpoint-000000000040.dml.tmp." + suffix)).string();
  };
  const std::string gone[] = {name(dead + "@" + host()),
                              (fs::path(dir) / ("run-id.tmp." + dead + "@" + host())).string()};
  const std::string kept[] = {name(alive + "@" + host()), name(dead + "@another-host"), name(dead),
                              (fs::path(dir) / ("notes.txt.tmp." + dead + "@" + host())).string(),
                              (fs::path(dir) / "notes.tmp.txt").string()};
  for (const auto& path : gone) std::ofstream(path) << "half";
  for (const auto& path : kept) std::ofstream(path) << "half";
  claim(dir, "run-a");
  for (const auto& path : gone) EXPECT_FALSE(fs::exists(path)) << path;
  for (const auto& path : kept) EXPECT_TRUE(fs::exists(path)) << path;
}

TEST(RunId, ComesFromTheEnvironmentOrIsMadeAndSetThere) {
  const char* saved = std::getenv(kRunIdVar);
  const std::string before = saved ? saved : "";
  ::unsetenv(kRunIdVar);
  const auto made = this_run_id();
  EXPECT_EQ(made.size(), 16u);
  EXPECT_EQ(this_run_id(), made);  // set for the processes this one starts
  ::setenv(kRunIdVar, "job-4711", 1);
  EXPECT_EQ(this_run_id(), "job-4711");
  ::setenv(kRunIdVar, "has space", 1);
  EXPECT_THROW(this_run_id(), UsageError);
  ::setenv(kRunIdVar, "seventeen-chars-x", 1);
  EXPECT_THROW(this_run_id(), UsageError);
  if (saved)
    ::setenv(kRunIdVar, before.c_str(), 1);
  else
    ::unsetenv(kRunIdVar);
}

}  // namespace
}  // namespace distml::train
