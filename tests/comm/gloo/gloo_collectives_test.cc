// Every collective and algorithm on the gloo engine, ranks as processes, against the serial
// reference in tests/support; sub-groups after split.
#include <gtest/gtest.h>

#include "collective_check.h"
#include "gloo_ranks.h"

namespace distml::test {
namespace {

std::string join_lines(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

// Children report "" when every case matched, else the failing cases, one per line.
void expect_all_ok(const std::vector<RankOutcome>& outcomes) {
  for (std::size_t r = 0; r < outcomes.size(); ++r) {
    EXPECT_EQ(outcomes[r].exit_code, 0) << "rank " << r << describe(outcomes);
    EXPECT_EQ(outcomes[r].report, "") << "rank " << r << " failed cases:\n"
                                      << outcomes[r].report.substr(0, 4000);
  }
}

const std::vector<Algorithm> kAllreduceAlgorithms = {Algorithm::native, Algorithm::ring,
                                                     Algorithm::halving_doubling, Algorithm::tree};

class GlooCollectives : public ::testing::TestWithParam<int> {};

TEST_P(GlooCollectives, MatchSerialReferenceForEveryAlgorithmDtypeOpAndCount) {
  GlooWorld world;
  world.size = GetParam();
  expect_all_ok(run_gloo_world(world, [](Communicator& comm) {
    return join_lines(run_collective_grid(comm, kAllreduceAlgorithms, standard_counts()));
  }));
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, GlooCollectives, ::testing::Values(2, 3),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

TEST(GlooCollectives, RendezvousThroughTcpStoreOnLoopback) {
  GlooWorld world;
  world.size = 2;
  world.tcp_store = true;
  expect_all_ok(run_gloo_world(world, [](Communicator& comm) {
    return join_lines(run_collective_grid(comm, kAllreduceAlgorithms, {0, 7, 1000}));
  }));
}

TEST(GlooCollectives, AsyncCollectivesCompleteInIssueOrder) {
  GlooWorld world;
  world.size = 3;
  expect_all_ok(run_gloo_world(world, [](Communicator& comm) {
    std::vector<float> a(1000, static_cast<float>(comm.rank() + 1)), b(a);
    auto w1 = comm.iallreduce(comm::view(a));
    auto w2 = comm.iallreduce(comm::view(b), {.op = ReduceOp::max, .algorithm = Algorithm::ring});
    w1.wait();
    w2.wait();
    comm.allreduce(comm::view(a));
    std::string bad;
    if (b[0] != 3.0f) bad += cat("max gave ", b[0], "\n");
    if (a[999] != 18.0f) bad += cat("sum of sums gave ", a[999], "\n");
    return bad;
  }));
}

TEST(GlooCollectives, SplitFormsSubgroupsOrderedByKeyWithWorkingCollectives) {
  GlooWorld world;
  world.size = 3;
  expect_all_ok(run_gloo_world(world, [](Communicator& comm) {
    std::string bad;
    // Evens {0, 2} and odds {1}; keys reverse the order within each group.
    auto sub = comm.split(comm.rank() % 2, -comm.rank());
    if (!sub) return std::string("no sub-communicator");
    const int expected_size = comm.rank() % 2 == 0 ? 2 : 1;
    if (sub->size() != expected_size) bad += cat("sub size ", sub->size(), "\n");
    std::vector<std::int32_t> ranks(sub->size());
    std::int32_t me = comm.rank();
    sub->allgather(comm::ConstBuffer{&me, 1, DType::i32}, comm::view(ranks));
    for (std::size_t i = 1; i < ranks.size(); ++i)
      if (ranks[i - 1] <= ranks[i])
        bad += cat("key order broken: ", ranks[i - 1], ", ", ranks[i], "\n");
    for (Algorithm a : kAllreduceAlgorithms)
      for (DType t : {DType::f32, DType::bf16}) {
        auto c = check_allreduce(*sub, 1001, t, ReduceOp::sum, a, true);
        if (!c.ok) bad += c.detail + "\n";
      }
    auto c = check_reduce_scatter(*sub, 13, DType::f64, ReduceOp::max, Algorithm::native);
    if (!c.ok) bad += c.detail + "\n";
    // A split of the whole world with one rank left out, then a split of the split.
    auto pair = comm.split(comm.rank() == 1 ? -1 : 0, 0);
    if ((pair == nullptr) != (comm.rank() == 1)) bad += "negative color got a communicator\n";
    if (pair) {
      auto again = pair->split(0, pair->rank());
      for (Algorithm a : {Algorithm::native, Algorithm::ring}) {
        auto d = check_allreduce(*again, 65537, DType::f32, ReduceOp::max, a, false);
        if (!d.ok) bad += d.detail + "\n";
      }
    }
    comm.barrier();
    return bad;
  }));
}

}  // namespace
}  // namespace distml::test
