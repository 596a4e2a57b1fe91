// SLURM_* as srun, salloc and sbatch set them (values copied from a Slurm 22.05 job), mapped to
// the rank variables the gloo engine reads; Slurm's host list syntax.
#include "distml/comm/slurm_env.h"

#include <gtest/gtest.h>

#include <map>

#include "distml/core/error.h"

namespace distml::comm {
namespace {

using Vars = std::map<std::string, std::string>;

EnvLookup lookup(const Vars& vars) {
  return [&vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

// Task 1 of `srun -n 4` inside `sbatch -n 8`: the step's count, not the job's, is the world.
const Vars kSrunTask = {{"SLURM_JOB_ID", "4242"},
                        {"SLURM_STEP_ID", "3"},
                        {"SLURM_PROCID", "1"},
                        {"SLURM_LOCALID", "1"},
                        {"SLURM_NTASKS", "4"},
                        {"SLURM_STEP_NUM_TASKS", "4"},
                        {"SLURM_JOB_NODELIST", "n[1-4]"},
                        {"SLURM_STEP_NODELIST", "n[2-3]"}};

TEST(SlurmEnv, ReadsATaskOfAStep) {
  const SlurmEnv s = read_slurm_env(lookup(kSrunTask));
  EXPECT_TRUE(s.in_allocation());
  EXPECT_TRUE(s.in_srun_task());
  EXPECT_EQ(s.procid, 1);
  EXPECT_EQ(s.localid, 1);
  EXPECT_EQ(s.ntasks, 4);
  EXPECT_EQ(s.nodelist, "n[2-3]");  // the step's nodes, where task 0 runs
}

TEST(SlurmEnv, BatchScriptIsAnAllocationButNoTask) {
  // sbatch sets SLURM_PROCID=0 for the script itself, but no step.
  const Vars batch = {{"SLURM_JOB_ID", "7"},
                      {"SLURM_PROCID", "0"},
                      {"SLURM_NTASKS", "6"},
                      {"SLURM_JOB_NODELIST", "a,b"},
                      {"SLURM_STEP_NODELIST", "stale"}};
  const SlurmEnv s = read_slurm_env(lookup(batch));
  EXPECT_TRUE(s.in_allocation());
  EXPECT_FALSE(s.in_srun_task());
  EXPECT_EQ(s.ntasks, 6);
  EXPECT_EQ(s.nodelist, "a,b");
  EXPECT_FALSE(read_slurm_env(lookup({})).in_allocation());
}

TEST(SlurmEnv, MalformedNumberNamesTheVariable) {
  Vars bad = kSrunTask;
  bad["SLURM_PROCID"] = "one";
  try {
    read_slurm_env(lookup(bad));
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("SLURM_PROCID='one'"), std::string::npos) << e.what();
  }
}

TEST(SlurmRankVariables, MapProcidNtasksLocalidAndTheFirstHost) {
  auto vars = slurm_rank_variables(lookup(kSrunTask));
  const Vars got(vars.begin(), vars.end());
  EXPECT_EQ(got.at("RANK"), "1");
  EXPECT_EQ(got.at("WORLD_SIZE"), "4");
  EXPECT_EQ(got.at("LOCAL_RANK"), "1");
  EXPECT_EQ(got.at("MASTER_ADDR"), "n2");
  EXPECT_EQ(got.at("MASTER_PORT"),
            std::to_string(rendezvous_port(read_slurm_env(lookup(kSrunTask)))));
}

TEST(SlurmRankVariables, LeaveWhatIsSetAndYieldToMpirun) {
  Vars given = kSrunTask;
  given["MASTER_PORT"] = "29999";
  given["MASTER_ADDR"] = "head";
  for (const auto& [name, value] : slurm_rank_variables(lookup(given)))
    EXPECT_TRUE(name != "MASTER_PORT" && name != "MASTER_ADDR") << name << "=" << value;
  // mpirun inside an allocation starts its daemons with srun: their tasks' SLURM_PROCID is a
  // node's index, not the rank.
  given["OMPI_COMM_WORLD_RANK"] = "5";
  EXPECT_TRUE(slurm_rank_variables(lookup(given)).empty());
  EXPECT_TRUE(slurm_rank_variables(lookup({{"SLURM_JOB_ID", "1"}, {"SLURM_PROCID", "0"}})).empty());
}

TEST(RendezvousPort, DiffersAcrossNearbyJobsAndStepsAndStaysBelowEphemeralPorts) {
  std::map<int, std::string> seen;
  for (int job = 1000; job < 1100; ++job)
    for (int step = 0; step < 4; ++step) {
      SlurmEnv s;
      s.job_id = std::to_string(job);
      s.step_id = std::to_string(step);
      const int port = rendezvous_port(s);
      EXPECT_GE(port, 1024);
      EXPECT_LT(port, 32768);  // Linux's ephemeral range starts there
      auto [it, fresh] = seen.emplace(port, s.job_id + "." + s.step_id);
      EXPECT_TRUE(fresh) << "job " << job << " step " << step << " shares port " << port << " with "
                         << it->second;
    }
}

TEST(ExpandHostlist, ExpandsRangesListsPaddingAndProducts) {
  using V = std::vector<std::string>;
  EXPECT_EQ(expand_hostlist("vm"), V{"vm"});
  EXPECT_EQ(expand_hostlist("node[1-3,5]"), (V{"node1", "node2", "node3", "node5"}));
  EXPECT_EQ(expand_hostlist("gpu[08-10],login"), (V{"gpu08", "gpu09", "gpu10", "login"}));
  EXPECT_EQ(expand_hostlist("r[1-2]n[1,3]-ib"), (V{"r1n1-ib", "r1n3-ib", "r2n1-ib", "r2n3-ib"}));
  EXPECT_EQ(expand_hostlist("a,b[7]"), (V{"a", "b7"}));
  EXPECT_TRUE(expand_hostlist("").empty());
}

TEST(ExpandHostlist, MalformedListsAreUsageErrorsNamingTheList) {
  for (const char* bad : {"n[1-3", "n1-3]", "n[3-1]", "n[a-b]", "n[[1]]", "n[1-]", "n[1-99999999]",
                          "n[]", "n[1-9000]x[1-9000][]"}) {
    try {
      expand_hostlist(bad);
      ADD_FAILURE() << bad << ": no error";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(MpiUnderSrun, WithoutPmixIsRefusedNamingGloo) {
  EXPECT_TRUE(srun_task_without_pmix(lookup(kSrunTask)));
  try {
    check_mpi_can_start(lookup(kSrunTask));
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--engine gloo"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("srun --mpi=pmix"), std::string::npos) << e.what();
  }
  Vars pmix = kSrunTask;
  pmix["PMIX_RANK"] = "1";  // srun --mpi=pmix
  EXPECT_FALSE(srun_task_without_pmix(lookup(pmix)));
  EXPECT_NO_THROW(check_mpi_can_start(lookup(pmix)));
  EXPECT_NO_THROW(check_mpi_can_start(lookup({{"SLURM_JOB_ID", "9"}})));  // a batch script
}

}  // namespace
}  // namespace distml::comm
