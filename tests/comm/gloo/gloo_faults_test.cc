// Failures on the gloo engine must surface as typed errors within the timeout, on every rank
// that can still speak, never as hangs, crashes or corruption.
#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "distml/comm/gloo/gloo_connect.h"
#include "gloo_ranks.h"

namespace distml::test {
namespace {

using namespace std::chrono_literals;
using comm::Algorithm;
using comm::Communicator;

GlooWorld short_timeout(int size) {
  GlooWorld world;
  world.size = size;
  world.options.timeout = 1500ms;
  world.options.diagnose_grace = 700ms;
  world.limit = 60s;
  return world;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(GlooFaults, RankThatNeverStartsIsNamedByTheOthersWithinTheTimeout) {
  auto world = short_timeout(3);
  world.absent = {2};
  auto start = comm::Clock::now();
  auto outcomes = run_gloo_world(world, [](Communicator&) { return std::string("joined"); });
  EXPECT_LT(comm::Clock::now() - start, 10s);
  for (int r : {0, 1}) {
    EXPECT_TRUE(outcomes[r].threw) << describe(outcomes);
    EXPECT_TRUE(contains(outcomes[r].report, "TimeoutError")) << outcomes[r].report;
    EXPECT_TRUE(contains(outcomes[r].report, "ranks that did not arrive: 2")) << outcomes[r].report;
  }
}

TEST(GlooFaults, RankThatNeverStartsIsNamedThroughTcpStore) {
  auto world = short_timeout(3);
  world.tcp_store = true;
  world.absent = {1};
  // A client that comes before rank 0 listens retries only after a second (c10d's TCPStore).
  world.options.timeout = 3000ms;
  auto outcomes = run_gloo_world(world, [](Communicator&) { return std::string("joined"); });
  for (int r : {0, 2})
    EXPECT_TRUE(contains(outcomes[r].report, "ranks that did not arrive: 1")) << describe(outcomes);
}

// Rank 1 joins, then stays away from the collective but alive: the others must still be able
// to ask who is there after their deadline (a gloo timeout would have closed the links).
TEST(GlooFaults, RankMissingFromACollectiveIsNamedForNativeAndRing) {
  for (Algorithm a : {Algorithm::native, Algorithm::ring}) {
    auto world = short_timeout(3);
    auto outcomes = run_gloo_world(world, [&](Communicator& comm) {
      std::vector<float> v(100, 1.0f);
      if (comm.rank() == 1) {
        std::this_thread::sleep_for(world.options.timeout + world.options.diagnose_grace + 1s);
        return std::string("stayed away");
      }
      comm.allreduce(comm::view(v), {.algorithm = a});
      return std::string("no error");
    });
    for (int r : {0, 2}) {
      EXPECT_TRUE(contains(outcomes[r].report, "TimeoutError")) << describe(outcomes);
      EXPECT_TRUE(contains(outcomes[r].report, "ranks that did not arrive: 1"))
          << algorithm_name(a) << describe(outcomes);
    }
  }
}

TEST(GlooFaults, MismatchedLengthsAreAClearErrorNotACrash) {
  for (Algorithm a :
       {Algorithm::native, Algorithm::ring, Algorithm::halving_doubling, Algorithm::tree}) {
    auto world = short_timeout(3);
    auto outcomes = run_gloo_world(world, [&](Communicator& comm) {
      std::vector<float> v(1000 + comm.rank(), 1.0f);
      comm.allreduce(comm::view(v), {.algorithm = a});
      return std::string("no error");
    });
    int clear = 0;
    for (auto& o : outcomes) {
      EXPECT_EQ(o.signal, 0) << algorithm_name(a) << describe(outcomes);
      EXPECT_TRUE(o.threw) << algorithm_name(a) << describe(outcomes);
      clear += contains(o.report, "expected") || contains(o.report, "disagree");
    }
    EXPECT_GE(clear, 1) << algorithm_name(a) << describe(outcomes);
    // Natively every rank sees the disagreement; in the ring at least one receiver does.
    if (a == Algorithm::native) {
      EXPECT_EQ(clear, 3) << describe(outcomes);
    }
  }
}

TEST(GlooFaults, FingerprintMismatchIsAnErrorOnEveryRank) {
  auto world = short_timeout(3);
  auto outcomes = run_processes(3, {}, world.limit, [&](int rank) {
    auto options = world.options;
    options.fingerprint = rank == 1 ? 0xbad : 0x900d;
    Communicator comm(
        comm::gloo::connect_engine(std::getenv("DISTML_TEST_FILE_STORE"), options.timeout),
        options);
    return std::string("no error");
  });
  for (auto& o : outcomes) {
    EXPECT_TRUE(contains(o.report, "CommError")) << describe(outcomes);
    EXPECT_TRUE(contains(o.report, "fingerprint")) << describe(outcomes);
  }
}

// Runs in the test process: connect_engine throws before it touches any store.
TEST(GlooFaults, MissingOrBadEnvironmentIsAUsageErrorNamingTheVariable) {
  struct Saved {
    const char* name;
    std::string value;
    bool set;
  };
  std::vector<Saved> saved;
  for (const char* n : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    const char* v = std::getenv(n);
    saved.push_back({n, v ? v : "", v != nullptr});
  }
  auto expect_usage = [](const char* needle) {
    try {
      comm::gloo::connect_engine("/nonexistent/store", 100ms);
      ADD_FAILURE() << "no error; expected one naming " << needle;
    } catch (const UsageError& e) {
      EXPECT_TRUE(contains(e.what(), needle)) << e.what();
    }
  };
  ::unsetenv("RANK");
  ::setenv("WORLD_SIZE", "2", 1);
  expect_usage("RANK");
  ::setenv("RANK", "one", 1);
  expect_usage("RANK='one'");
  ::setenv("RANK", "2", 1);
  expect_usage("RANK=2");
  ::unsetenv("WORLD_SIZE");
  expect_usage("WORLD_SIZE");
  ::setenv("WORLD_SIZE", "2", 1);
  ::setenv("RANK", "1", 1);
  ::unsetenv("MASTER_ADDR");
  try {
    comm::gloo::connect_engine("", 100ms);
    ADD_FAILURE() << "no error without MASTER_ADDR";
  } catch (const UsageError& e) {
    EXPECT_TRUE(contains(e.what(), "MASTER_ADDR")) << e.what();
  }
  for (auto& s : saved) {
    if (s.set)
      ::setenv(s.name, s.value.c_str(), 1);
    else
      ::unsetenv(s.name);
  }
}

}  // namespace
}  // namespace distml::test
