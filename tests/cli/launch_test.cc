#include "launch.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "bench_report.h"

namespace distml::cli {
namespace {

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(MpirunCommand, OversubscribesAndYieldsOnlyWithMoreRanksThanCores) {
  LaunchOptions o;
  o.np = 4;
  o.command = {"prog", "--x"};
  auto over = mpirun_command(o, 2, false);
  EXPECT_TRUE(has(over, "--oversubscribe"));
  EXPECT_TRUE(has(over, "mpi_yield_when_idle"));
  EXPECT_TRUE(has(over, "none"));  // --bind-to none
  EXPECT_EQ(over.back(), "--x");
  o.np = 2;
  auto fits = mpirun_command(o, 2, false);
  EXPECT_FALSE(has(fits, "--oversubscribe"));
}

TEST(MpirunCommand, PassesRootVariablesAndHosts) {
  LaunchOptions o;
  o.np = 4;
  o.hosts = "h1:2,h2:2";
  o.command = {"prog"};
  auto argv = mpirun_command(o, 1, true);
  EXPECT_TRUE(has(argv, "OMPI_ALLOW_RUN_AS_ROOT"));
  EXPECT_TRUE(has(argv, "h1:2,h2:2"));
  EXPECT_FALSE(has(argv, "--oversubscribe"));  // 4 slots for 4 ranks
  EXPECT_TRUE(has(argv, "btl_tcp_eager_limit"));  // chunks go eagerly across hosts
  o.np = 5;
  EXPECT_TRUE(has(mpirun_command(o, 1, true), "--oversubscribe"));
  o.hosts.clear();
  EXPECT_FALSE(has(mpirun_command(o, 1, true), "btl_tcp_eager_limit"));  // one host: no TCP
}

TEST(BenchReport, BusBandwidthFactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(bus_factor("allreduce", 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor("allgather", 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor("broadcast", 4), 1.0);
  BenchRow r{"allreduce", "mpi", "ring", 1 << 20, 2, 100.0, 50.0};
  auto j = to_json(r);
  EXPECT_DOUBLE_EQ(j["ratio_vs_baseline"].get<double>(), 0.5);
  EXPECT_NEAR(j["algbw_gbps"].get<double>(), 10.48576, 1e-9);
}

}  // namespace
}  // namespace distml::cli
