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

TEST(AutoPolicy, GlooUsesTheTreeUpTo16MiB) {
  EXPECT_EQ(auto_allreduce_algorithm("gloo", 3, 16u << 20), Algorithm::tree);
  EXPECT_EQ(auto_allreduce_algorithm("gloo", 3, 64u << 20), Algorithm::native);
}

TEST(AutoPolicy, LocalUsesTheTreeForSmallMessages) {
  EXPECT_EQ(auto_allreduce_algorithm("local", 4, 1024), Algorithm::tree);
  EXPECT_EQ(auto_allreduce_algorithm("local", 4, 1u << 20), Algorithm::native);
}

}  // namespace
}  // namespace distml::comm
