// Sub-groups on the mpi engine: MPI_Comm_split must give the Communicator's (key, rank)
// order, and collectives must run inside each group on its own.
#include <gtest/gtest.h>

#include "collective_check.h"
#include "mpi_world.h"

namespace distml::test {
namespace {

using comm::ConstBuffer;
using comm::DType;

TEST(MpiSplit, FormsSubgroupsOrderedByKeyThatRunEveryCollective) {
  auto comm = connect_world();
  // Evens and odds; keys reverse the order within each group.
  auto sub = comm->split(comm->rank() % 2, -comm->rank());
  ASSERT_NE(sub, nullptr);
  const int expected_size = (comm->size() + (comm->rank() % 2 == 0 ? 1 : 0)) / 2;
  EXPECT_EQ(sub->size(), expected_size);
  EXPECT_EQ(sub->engine_name(), "mpi");
  std::vector<std::int32_t> ranks(sub->size());
  std::int32_t me = comm->rank();
  sub->allgather(ConstBuffer{&me, 1, DType::i32}, comm::view(ranks));
  for (std::size_t i = 1; i < ranks.size(); ++i) EXPECT_GT(ranks[i - 1], ranks[i]);

  auto failures = run_collective_grid(
      *sub, {Algorithm::native, Algorithm::ring, Algorithm::halving_doubling, Algorithm::tree},
      {0, 7, 1000});
  for (std::size_t i = 0; i < std::min<std::size_t>(failures.size(), 20); ++i)
    ADD_FAILURE() << failures[i];

  // The parent still works while the children exist.
  std::vector<float> v(100, 1.0f);
  comm->allreduce(comm::view(v));
  EXPECT_EQ(v[0], static_cast<float>(comm->size()));
}

TEST(MpiSplit, RankWithNegativeColorJoinsNoGroupAndSplitsNest) {
  auto comm = connect_world();
  auto solo = comm->split(comm->rank() == 0 ? -1 : 0, 0);
  EXPECT_EQ(solo == nullptr, comm->rank() == 0);
  if (solo) {
    EXPECT_EQ(solo->size(), comm->size() - 1);
    EXPECT_EQ(solo->rank(), comm->rank() - 1);
    auto pairs = solo->split(solo->rank() / 2, solo->rank());
    ASSERT_NE(pairs, nullptr);
    EXPECT_EQ(pairs->rank(), solo->rank() % 2);
    std::vector<std::int64_t> v(5, 1);
    pairs->allreduce(comm::view(v));
    EXPECT_EQ(v[4], pairs->size());
  }
  comm->barrier();
}

}  // namespace
}  // namespace distml::test
