// The launcher's tidying of its ranks' standard error (job_output.h).
#include "job_output.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../data/temp_dir.h"

namespace distml::cli {
namespace {

TEST(StderrFilter, HoldsErrorLinesBackAndPassesTheRestAsItComes) {
  std::vector<std::string> errors;
  StderrFilter filter(errors);
  EXPECT_EQ(filter.take("warming up\ndistml: error: rank 1: bad"), "warming up\n");
  EXPECT_EQ(filter.take(" file\nstep 3 [==>  ]\r"), "step 3 [==>  ]\r");  // a bar, unfinished
  EXPECT_EQ(filter.finish(), "");
  EXPECT_EQ(errors, std::vector<std::string>{"distml: error: rank 1: bad file"});
}

TEST(StderrFilter, KeepsMpirunsAndSlurmsReportsOffTheTerminalInTheLaunchLog) {
  data::testing::TempDir dir;  // the log's folder, where the log opens first
  const std::string folder = std::filesystem::path(dir.file("x")).parent_path();
  ::setenv("TMPDIR", folder.c_str(), 1);
  std::vector<std::string> errors;
  StderrFilter filter(errors);
  const std::string dashes(74, '-');
  EXPECT_EQ(filter.take(dashes + "\nPrimary job terminated normally, but 1 process returned\n" +
                        dashes + "\nafter\n"),
            "after\n");
  EXPECT_EQ(filter.take("---"), "");  // may become a line of dashes
  EXPECT_EQ(filter.take("x\n"), "---x\n");
  // Slurm's report, srun's own lines and slurmstepd's through a task's (tagged) stream.
  EXPECT_EQ(filter.take("srun: error: node1: task 1: Exited with exit code 2\n"
                        " 1: slurmstepd: error: *** STEP 5.0 ON node1 CANCELLED ***\n"
                        "slurmstepd-node1: error: *** STEP 6.0 ON node1 CANCELLED ***\n"),
            "");
  EXPECT_TRUE(errors.empty());
  ASSERT_EQ(std::filesystem::path(LaunchLog::get().path()).parent_path(), folder);
  std::stringstream log;
  log << std::ifstream(LaunchLog::get().path()).rdbuf();
  EXPECT_NE(log.str().find("Primary job terminated normally"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("STEP 5.0 ON node1 CANCELLED"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("STEP 6.0 ON node1 CANCELLED"), std::string::npos) << log.str();
}

TEST(StderrFilter, LooksPastTheTagsOfSrunAndMpirun) {
  std::vector<std::string> errors;
  StderrFilter filter(errors);
  EXPECT_EQ(filter.take("0: distml: error: rank 0: no file\n"
                        "[1,1]<stderr>:distml: error: rank 1: no file\n"
                        "12: step 3\n"
                        " 3"),  // may become a tagged error line
            "12: step 3\n");
  EXPECT_EQ(filter.take(": distml: error: rank 3: late\n"), "");
  EXPECT_EQ(errors, (std::vector<std::string>{"distml: error: rank 0: no file",
                                              "distml: error: rank 1: no file",
                                              "distml: error: rank 3: late"}));
}

TEST(DistinctErrors, SaysEachMessageOnceNamingTheFirstRank) {
  EXPECT_EQ(
      distinct_errors({"distml: error: rank 1: no file", "distml: error: rank 0: no file",
                       "distml: error: rank 0: reset by peer", "distml: error: plain"}),
      (std::vector<std::string>{"distml: error: rank 1: no file",
                                "distml: error: rank 0: reset by peer", "distml: error: plain"}));
}

}  // namespace
}  // namespace distml::cli
