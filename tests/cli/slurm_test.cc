// `distml launch` inside a Slurm allocation: the srun command it runs, and when it runs one.
#include "slurm.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "distml/core/error.h"

namespace distml::cli {
namespace {

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

comm::SlurmEnv allocation(int ntasks) {
  comm::SlurmEnv s;
  s.job_id = "12";
  s.procid = 0;  // sbatch sets it for the script too
  s.ntasks = ntasks;
  s.nodelist = "n[1-2]";
  return s;
}

TEST(LaunchesWithSrun, InsideAnAllocationUnlessHostsAreGiven) {
  LaunchOptions o;
  EXPECT_TRUE(launches_with_srun(o, allocation(4)));
  EXPECT_FALSE(launches_with_srun(o, comm::SlurmEnv{}));
  o.hosts = "h1:2";
  EXPECT_FALSE(launches_with_srun(o, allocation(4)));
  o.hosts.clear();
  o.hostfile = "hosts";
  EXPECT_FALSE(launches_with_srun(o, allocation(4)));
  o.hostfile.clear();
  o.netns_cluster = "2x2";
  EXPECT_FALSE(launches_with_srun(o, allocation(4)));
}

TEST(SrunCommand, TakesTheAllocationsTaskCountUnlessNpIsGiven) {
  LaunchOptions o;
  o.engine = "gloo";
  o.command = {"prog", "--x"};
  auto argv = srun_command(o, allocation(4));
  EXPECT_EQ(argv.front(), "srun");
  EXPECT_EQ(*(std::find(argv.begin(), argv.end(), "--ntasks") + 1), "4");
  EXPECT_EQ(*(std::find(argv.begin(), argv.end(), "--mpi") + 1), "none");
  EXPECT_TRUE(has(argv, "--kill-on-bad-exit=1"));
  EXPECT_FALSE(has(argv, "--label"));
  EXPECT_EQ(argv.back(), "--x");
  o.np = 2;
  o.prefix_output = true;
  argv = srun_command(o, allocation(4));
  EXPECT_EQ(*(std::find(argv.begin(), argv.end(), "--ntasks") + 1), "2");
  EXPECT_TRUE(has(argv, "--label"));
}

TEST(SrunCommand, GivesTheMpiEnginePmix) {
  LaunchOptions o;  // engine mpi by default
  o.command = {"prog"};
  auto argv = srun_command(o, allocation(2));
  EXPECT_EQ(*(std::find(argv.begin(), argv.end(), "--mpi") + 1), "pmix");
}

TEST(SrunCommand, RefusesAnUnknownCountAndNestingInATask) {
  LaunchOptions o;
  o.command = {"prog"};
  EXPECT_THROW(srun_command(o, allocation(0)), UsageError);  // salloc without -n, no -n
  comm::SlurmEnv task{.job_id = "12", .step_id = "0", .ntasks = 2, .procid = 1, .nodelist = "n1"};
  try {
    srun_command(o, task);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("each task is a rank already"), std::string::npos)
        << e.what();
  }
  task.ntasks = 1;  // one task (srun --pty bash): it may start a step of its own
  EXPECT_NO_THROW(srun_command(o, task));
}

// The words are Slurm 22.05's (Debian 12), as the one-node cluster test sees them.
TEST(SrunFailure, NamesTheFailedTaskAsARank) {
  // The first failure is the job's: srun then kills the other task (143), and exits with the
  // highest code.
  const auto exited = srun_failure(
      "srun: error: node1: task 1: Exited with exit code 2\n"
      "srun: launch/slurm: _step_signal: Terminating StepId=9.0\n"
      "srun: error: node1: task 0: Terminated\n");
  ASSERT_TRUE(exited);
  EXPECT_EQ(exited->cause, "rank 1 on node1 exited with code 2");
  EXPECT_EQ(exited->code, 2);
  const auto killed = srun_failure("srun: error: node2: tasks 0-1: Killed\n");
  ASSERT_TRUE(killed);
  EXPECT_EQ(killed->cause, "rank 0 on node2 ended: Killed");
  EXPECT_FALSE(killed->code);
  EXPECT_FALSE(srun_failure("srun: Job step aborted: Waiting up to 32 seconds\n"));
}

}  // namespace
}  // namespace distml::cli
