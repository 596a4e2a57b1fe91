// Runs the mpi engine's tests on every rank of an mpirun job. Every rank runs every test in
// the same order; rank 0 prints gtest's usual report and, at the end, the ranks where tests
// failed; the other ranks print only their own failures. Each rank exits non-zero if one of
// its tests failed, so that mpirun's exit status says whether the tests passed everywhere.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "mpi_world.h"

namespace {

class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}

  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.message());
  }

  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed())
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // MPI starts here, once, so that a launch problem is reported before any test runs.
  const int rank =
      distml::comm::mpi::connect_engine(distml::test::mpi_test_options().timeout)->rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  const int failed = RUN_ALL_TESTS();
  if (failed) std::fprintf(stderr, "[rank %d] some tests failed on this rank\n", rank);
  // Rank 0's report covers only its own results: name the ranks where tests failed.
  try {
    auto comm = distml::test::connect_world();
    std::vector<std::int32_t> all(comm->size());
    const std::int32_t mine = failed ? 1 : 0;
    comm->allgather(distml::comm::ConstBuffer{&mine, 1, distml::comm::DType::i32},
                    distml::comm::view(all));
    std::string ranks;
    for (std::size_t r = 0; r < all.size(); ++r)
      if (all[r]) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    if (rank == 0 && !ranks.empty())
      std::fprintf(stderr, "[rank 0] tests failed on ranks: %s\n", ranks.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] could not collect the other ranks' results: %s\n", rank,
                 e.what());
  }
  return failed;
}
