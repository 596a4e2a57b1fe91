#include "distml/comm/auto_policy.h"

#include <gtest/gtest.h>

namespace distml::comm {
namespace {

TEST(AutoPolicy, MpiUsesItsOwnCollectiveUntilHalvingDoublingIsFaster) {
  EXPECT_EQ(auto_allreduce_algorithm("mpi", 2, 1024), Algorithm::native);
  EXPECT_EQ(auto_allreduce_algorithm("mpi", 4, 16u << 20), Algorithm::native);
  EXPECT_EQ(auto_allreduce_algorithm("mpi", 3, 64u << 20), Algorithm::halving_doubling);
}

TEST(AutoPolicy, OneRankNeverCommunicates) {
  for (auto engine : {"mpi", "gloo", "local"})
    EXPECT_EQ(auto_allreduce_algorithm(engine, 1, 64u << 20), Algorithm::native);
}

TEST(AutoPolicy, GlooOnOneHostGoesThroughSharedMemory) {
  for (std::size_t bytes : {std::size_t{4}, std::size_t{512} << 10, std::size_t{64} << 20})
    EXPECT_EQ(auto_allreduce_algorithm("gloo", 3, bytes, 1, 3), Algorithm::shm);
}

TEST(AutoPolicy, GlooAcrossHostsUsesTheTreeUpTo512KiBThenTheRing) {
  // One rank per host: nothing to share within a host.
  EXPECT_EQ(auto_allreduce_algorithm("gloo", 3, 512u << 10, 3, 1), Algorithm::tree);
  EXPECT_EQ(auto_allreduce_algorithm("gloo", 3, 1u << 20, 3, 1), Algorithm::ring);
  EXPECT_EQ(auto_allreduce_algorithm("gloo", 3, 64u << 20, 3, 1), Algorithm::ring);
}

TEST(AutoPolicy, AcrossHostsLargeMessagesGoHierarchical) {
  EXPECT_EQ(auto_allreduce_algorithm("mpi", 4, 64u << 20, 2, 2), Algorithm::hierarchical);
  EXPECT_EQ(auto_allreduce_algorithm("mpi", 4, 4u << 20, 2, 2), Algorithm::native);
  EXPECT_EQ(auto_allreduce_algorithm("gloo", 4, 16u << 20, 2, 2), Algorithm::hierarchical);
  EXPECT_EQ(auto_allreduce_algorithm("gloo", 4, 64u << 10, 2, 2), Algorithm::tree);
  // One rank per host has nothing to reduce within a host; unequal hosts cannot run it.
  EXPECT_EQ(auto_allreduce_algorithm("mpi", 2, 64u << 20, 2, 1), Algorithm::halving_doubling);
  EXPECT_EQ(auto_allreduce_algorithm("gloo", 3, 16u << 20, 2, 0), Algorithm::ring);
}

TEST(AutoPolicy, LocalUsesTheTreeForSmallMessages) {
  EXPECT_EQ(auto_allreduce_algorithm("local", 4, 1024), Algorithm::tree);
  EXPECT_EQ(auto_allreduce_algorithm("local", 4, 1u << 20), Algorithm::native);
}

}  // namespace
}  // namespace distml::comm
