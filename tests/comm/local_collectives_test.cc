// Every collective and algorithm on the in-process engine, world sizes 1-8, against the
// serial reference in tests/support.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>

#include "collective_check.h"
#include "distml/comm/local/local_world.h"
#include "distml/core/error.h"

namespace distml::test {
namespace {

using comm::local::run_ranks;

class LocalCollectives : public ::testing::TestWithParam<int> {};

TEST_P(LocalCollectives, MatchSerialReferenceForEveryAlgorithmDtypeOpAndCount) {
  const int world = GetParam();
  std::mutex mutex;
  std::vector<std::string> failures;
  run_ranks(world, {}, [&](Communicator& comm) {
    auto mine = run_collective_grid(comm,
                                    {Algorithm::native, Algorithm::ring,
                                     Algorithm::halving_doubling, Algorithm::tree, Algorithm::shm},
                                    standard_counts());
    std::lock_guard lock(mutex);
    failures.insert(failures.end(), mine.begin(), mine.end());
  });
  for (std::size_t i = 0; i < std::min<std::size_t>(failures.size(), 20); ++i)
    ADD_FAILURE() << failures[i];
  EXPECT_TRUE(failures.empty()) << failures.size() << " failing cases";
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, LocalCollectives, ::testing::Range(1, 9),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

// Hosts emulated on the in-process engine: H hosts x R ranks, R = 1 and H = 1 included.
class HierarchicalAllreduce : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(HierarchicalAllreduce, MatchesSerialReferenceForEveryDtypeOpAndCount) {
  const auto [hosts, per_host] = GetParam();
  std::mutex mutex;
  std::vector<std::string> failures;
  comm::CommOptions options;
  options.emulated_ranks_per_host = per_host;
  run_ranks(hosts * per_host, options, [&](Communicator& comm) {
    EXPECT_EQ(comm.ranks_per_host(), per_host);
    auto mine = run_collective_grid(comm, {Algorithm::hierarchical}, standard_counts());
    std::lock_guard lock(mutex);
    failures.insert(failures.end(), mine.begin(), mine.end());
  });
  for (std::size_t i = 0; i < std::min<std::size_t>(failures.size(), 20); ++i)
    ADD_FAILURE() << failures[i];
  EXPECT_TRUE(failures.empty()) << failures.size() << " failing cases";
}

INSTANTIATE_TEST_SUITE_P(HostsByRanks, HierarchicalAllreduce,
                         ::testing::Values(std::pair{2, 2}, std::pair{3, 1}, std::pair{1, 3},
                                           std::pair{2, 3}, std::pair{3, 2}),
                         [](const auto& info) {
                           return std::to_string(info.param.first) + "x" +
                                  std::to_string(info.param.second);
                         });

TEST(LocalCollectives, SharedMemoryNeedsEveryRankOnOneHost) {
  comm::CommOptions options;
  options.emulated_ranks_per_host = 1;
  run_ranks(2, options, [](Communicator& comm) {
    std::vector<float> a(8, 1.0f);
    EXPECT_THROW(comm.allreduce(comm::view(a), {.algorithm = Algorithm::shm}), UsageError);
  });
}

// The segment is unlinked as soon as every rank has mapped it, so that a job that dies leaves
// nothing behind; a rank that never comes is named at the deadline.
TEST(LocalCollectives, SharedMemoryLeavesNoNameAndNamesTheRankItWaitsFor) {
  comm::CommOptions options;
  options.timeout = comm::Millis(500);
  options.diagnose_grace = comm::Millis(100);
  std::string error;
  run_ranks(2, options, [&](Communicator& comm) {
    std::vector<float> a(1000, 1.0f);
    comm.allreduce(comm::view(a), {.algorithm = Algorithm::shm});
    EXPECT_EQ(a[0], 2.0f);
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm"))
      EXPECT_NE(entry.path().filename().string().rfind(cat("distml-", getpid(), "-"), 0), 0u)
          << entry.path() << " is still there";
    if (comm.rank() == 1) return;  // rank 1 leaves; rank 0 waits in the next one
    try {
      comm.allreduce(comm::view(a), {.algorithm = Algorithm::shm});
    } catch (const TimeoutError& e) {
      error = e.what();
    }
  });
  EXPECT_NE(error.find("shared-memory barrier waiting for ranks 1"), std::string::npos) << error;
}

TEST(LocalCollectives, HierarchicalNeedsTheSameNumberOfRanksOnEveryHost) {
  comm::CommOptions options;
  options.emulated_ranks_per_host = 2;  // 3 ranks: hosts of 2 and 1
  run_ranks(3, options, [](Communicator& comm) {
    EXPECT_EQ(comm.ranks_per_host(), 0);
    std::vector<float> a(8, 1.0f);
    EXPECT_THROW(comm.allreduce(comm::view(a), {.algorithm = Algorithm::hierarchical}), UsageError);
  });
  run_ranks(4, options, [](Communicator& comm) {
    EXPECT_EQ(comm.host_of(), (std::vector<int>{0, 0, 1, 1}));
    EXPECT_EQ(comm.ranks_per_host(), 2);
  });
}

TEST(LocalCollectives, AsyncAllreduceCompletesAndMatchesSync) {
  run_ranks(3, {}, [](Communicator& comm) {
    std::vector<float> a(1000, static_cast<float>(comm.rank() + 1)), b(a);
    auto w1 = comm.iallreduce(comm::view(a));
    auto w2 = comm.iallreduce(comm::view(b), {.op = ReduceOp::max});
    w1.wait();
    w2.wait();
    EXPECT_TRUE(w1.test());
    EXPECT_EQ(a[999], 6.0f);
    EXPECT_EQ(b[0], 3.0f);
    comm.allreduce(comm::view(a));  // a sync call after async ones keeps issue order
    EXPECT_EQ(a[0], 18.0f);
  });
}

TEST(LocalCollectives, PointToPointKeepsOrderPerTag) {
  run_ranks(2, {}, [](Communicator& comm) {
    if (comm.rank() == 0) {
      std::vector<std::int32_t> values(50);
      std::vector<comm::Work> sends;
      for (int i = 0; i < 50; ++i) {
        values[i] = i;
        sends.push_back(comm.isend(comm::ConstBuffer{&values[i], 1, comm::DType::i32}, 1, i % 3));
      }
      for (auto& w : sends) w.wait();
    } else {
      // Receive tag 2 first, then 1, then 0: within a tag, messages arrive in send order.
      for (int tag : {2, 1, 0})
        for (int i = tag; i < 50; i += 3) {
          std::int32_t v = -1;
          comm.recv(comm::Buffer{&v, 1, comm::DType::i32}, 0, tag);
          EXPECT_EQ(v, i);
        }
    }
  });
}

TEST(LocalCollectives, SplitFormsSubgroupsOrderedByKey) {
  run_ranks(5, {}, [](Communicator& comm) {
    // Evens and odds; keys reverse the order within each group.
    auto sub = comm.split(comm.rank() % 2, -comm.rank());
    ASSERT_NE(sub, nullptr);
    const int expected_size = comm.rank() % 2 == 0 ? 3 : 2;
    EXPECT_EQ(sub->size(), expected_size);
    std::vector<std::int32_t> ranks(sub->size());
    std::int32_t me = comm.rank();
    sub->allgather(comm::ConstBuffer{&me, 1, comm::DType::i32}, comm::view(ranks));
    for (std::size_t i = 1; i < ranks.size(); ++i) EXPECT_GT(ranks[i - 1], ranks[i]);
    for (auto algo : {Algorithm::native, Algorithm::ring, Algorithm::halving_doubling})
      EXPECT_TRUE(check_allreduce(*sub, 1001, comm::DType::f32, ReduceOp::sum, algo, true).ok);
    // A split of the split, and a rank that joins no group.
    auto solo = sub->split(sub->rank() == 0 ? -1 : 0, 0);
    EXPECT_EQ(solo == nullptr, sub->rank() == 0);
    if (solo) {
      EXPECT_EQ(solo->size(), sub->size() - 1);
    }
    comm.barrier();
  });
}

}  // namespace
}  // namespace distml::test
