// Every collective and algorithm on the mpi engine against the serial reference in
// tests/support, at the world size mpirun gives (CTest runs 1 to 4 ranks).
#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

#include "collective_check.h"
#include "mpi_world.h"

namespace distml::test {
namespace {

using namespace std::chrono_literals;
using comm::Buffer;
using comm::ConstBuffer;

void report(const std::vector<std::string>& failures) {
  for (std::size_t i = 0; i < std::min<std::size_t>(failures.size(), 20); ++i)
    ADD_FAILURE() << failures[i];
  EXPECT_TRUE(failures.empty()) << failures.size() << " failing cases";
}

TEST(MpiCollectives, MatchSerialReferenceForEveryAlgorithmDtypeOpAndCount) {
  auto comm = connect_world();
  EXPECT_EQ(comm->engine_name(), "mpi");
  // hierarchical: one host under plain mpirun; 2 hosts x 2 ranks in the netns cluster test.
  // shm (one host only): the ranks are processes, so the segment is really shared.
  std::vector<Algorithm> algorithms = {Algorithm::native,           Algorithm::ring,
                                       Algorithm::halving_doubling, Algorithm::tree,
                                       Algorithm::hierarchical,     Algorithm::automatic};
  if (comm->ranks_per_host() == comm->size()) algorithms.push_back(Algorithm::shm);
  report(run_collective_grid(*comm, algorithms, standard_counts()));
}

// Lowered limits send everything beyond 1000 elements (or bytes, for point-to-point) through
// the paths meant for counts beyond INT_MAX: derived datatypes, split reductions, broadcasts
// for allgatherv and reductions to each root for reduce_scatter.
TEST(MpiCollectives, CountsBeyondTheIntLimitTakeDerivedTypesAndSplitReductions) {
  auto comm = connect_world(mpi_test_options(), {.max_count = 1000, .block = 384});
  report(run_collective_grid(*comm, {Algorithm::native, Algorithm::ring, Algorithm::tree},
                             {0, 1, 7, 1000, 1001, 65537}));
}

TEST(MpiCollectives, AsyncAllreduceCompletesAndMatchesSync) {
  auto comm = connect_world();
  const float p = static_cast<float>(comm->size());
  std::vector<float> a(1000, static_cast<float>(comm->rank() + 1)), b(a);
  auto w1 = comm->iallreduce(comm::view(a));
  auto w2 = comm->iallreduce(comm::view(b), {.op = ReduceOp::max});
  w1.wait();
  w2.wait();
  EXPECT_TRUE(w1.test());
  EXPECT_EQ(a[999], p * (p + 1) / 2);
  EXPECT_EQ(b[0], p);
  comm->allreduce(comm::view(a));  // a sync call after async ones keeps issue order
  EXPECT_EQ(a[0], p * p * (p + 1) / 2);
}

// Rank 1's user message carries the same tag (0) that the tree all-reduce uses from rank 1
// to rank 0, and a different size: were the channels one, the collective would match it.
TEST(MpiCollectives, UserMessagesNeverMatchCollectiveTraffic) {
  auto comm = connect_world();
  if (comm->size() < 2) GTEST_SKIP() << "needs two ranks";
  std::uint8_t note[3] = {7, 8, 9};
  comm::Work sent;
  if (comm->rank() == 1) sent = comm->isend(ConstBuffer{note, 3, DType::u8}, 0, 0);
  std::vector<float> v(10, 1.0f);
  comm->allreduce(comm::view(v), {.algorithm = Algorithm::tree});
  EXPECT_EQ(v[9], static_cast<float>(comm->size()));
  if (comm->rank() == 0) {
    std::uint8_t got[3] = {};
    comm->recv(Buffer{got, 3, DType::u8}, 1, 0);
    EXPECT_EQ(got[2], 9);
  }
  sent.wait();
  comm->barrier();
}

// The design's threading: user threads do point-to-point while the communicator's worker
// thread runs collectives, at the same time (hence MPI_THREAD_MULTIPLE).
TEST(MpiCollectives, PointToPointOnAUserThreadRunsAlongsideAsyncCollectives) {
  auto comm = connect_world();
  const int r = comm->rank(), p = comm->size();
  std::thread talker([&] {
    if (p < 2 || r > 1) return;
    for (std::int32_t i = 0; i < 200; ++i) {
      std::int32_t v = i;
      if (r == 0) {
        comm->send(ConstBuffer{&v, 1, DType::i32}, 1, 9);
        comm->recv(Buffer{&v, 1, DType::i32}, 1, 9);
        EXPECT_EQ(v, i + 1);
      } else {
        comm->recv(Buffer{&v, 1, DType::i32}, 0, 9);
        ++v;
        comm->send(ConstBuffer{&v, 1, DType::i32}, 0, 9);
      }
    }
  });
  std::vector<std::vector<double>> data(50, std::vector<double>(4096, 1.0));
  std::vector<comm::Work> works;
  for (auto& d : data)
    works.push_back(comm->iallreduce(comm::view(d), {.algorithm = Algorithm::native}));
  for (auto& w : works) w.wait();
  talker.join();
  for (auto& d : data) EXPECT_EQ(d[4095], static_cast<double>(p));
}

TEST(MpiCollectives, WorkWaitTimesOutThenCompletesWhenThePeersArrive) {
  auto comm = connect_world();
  if (comm->size() < 2) GTEST_SKIP() << "needs two ranks";
  std::vector<float> v(10, 1.0f);
  float go = 1.0f;
  if (comm->rank() == 0) {
    auto w = comm->iallreduce(comm::view(v));
    EXPECT_THROW(w.wait(50ms), TimeoutError);
    EXPECT_FALSE(w.test());
    for (int r = 1; r < comm->size(); ++r) comm->send(ConstBuffer{&go, 1, DType::f32}, r, 0);
    w.wait();
  } else {
    comm->recv(Buffer{&go, 1, DType::f32}, 0, 0);
    comm->allreduce(comm::view(v));
  }
  EXPECT_EQ(v[0], static_cast<float>(comm->size()));
}

}  // namespace
}  // namespace distml::test
