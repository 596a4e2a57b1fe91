// Failures must surface as typed errors within the timeout, never as hangs or corruption.
#include <gtest/gtest.h>

#include <thread>

#include "distml/comm/local/local_world.h"

namespace distml::comm {
namespace {

using namespace std::chrono_literals;

CommOptions short_timeout() {
  CommOptions o;
  o.timeout = 700ms;
  o.diagnose_grace = 1000ms;
  return o;
}

// Runs `fn` for each rank in `ranks` of a world of `size`; the others never join.
template <class Fn>
std::vector<std::string> run_some(int size, std::vector<int> ranks, const CommOptions& o, Fn fn) {
  local::LocalWorld world(size);
  std::vector<std::string> errors(size);
  std::vector<std::thread> threads;
  for (int r : ranks)
    threads.emplace_back([&, r] {
      try {
        auto comm = world.connect(r, o);
        fn(*comm);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

constexpr Algorithm kAlgorithms[] = {Algorithm::native, Algorithm::ring,
                                     Algorithm::halving_doubling, Algorithm::tree};

// fn(algorithm) for every all-reduce algorithm, each in its own world and all at once, so that
// their timeouts overlap; returns each one's result in kAlgorithms' order.
template <class Fn>
auto for_every_algorithm(Fn fn) {
  std::vector<decltype(fn(Algorithm::native))> results(std::size(kAlgorithms));
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < results.size(); ++i)
    threads.emplace_back([&, i] { results[i] = fn(kAlgorithms[i]); });
  for (auto& t : threads) t.join();
  return results;
}

TEST(Faults, RankThatNeverJoinsIsNamedByTheOthersWithinTheTimeout) {
  auto start = Clock::now();
  auto errors = run_some(4, {0, 1, 3}, short_timeout(), [](Communicator&) {});
  EXPECT_LT(Clock::now() - start, 5s);
  for (int r : {0, 1, 3}) {
    EXPECT_NE(errors[r].find("did not arrive"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("2"), std::string::npos) << errors[r];
  }
}

TEST(Faults, RankMissingFromACollectiveIsNamedForEveryAlgorithm) {
  const auto start = Clock::now();
  const auto results = for_every_algorithm([](Algorithm a) {
    return run_some(3, {0, 1, 2}, short_timeout(), [&](Communicator& comm) {
      std::vector<float> v(100, 1.0f);
      if (comm.rank() == 1) return;  // joins, then skips the collective
      comm.allreduce(view(v), {.algorithm = a});
    });
  });
  EXPECT_LT(Clock::now() - start, 5s);
  for (std::size_t i = 0; i < results.size(); ++i)
    for (int r : {0, 2})
      EXPECT_NE(results[i][r].find("ranks that did not arrive: 1"), std::string::npos)
          << algorithm_name(kAlgorithms[i]) << ": " << results[i][r];
}

TEST(Faults, MismatchedLengthsAreAnErrorNotCorruption) {
  const auto results = for_every_algorithm([](Algorithm a) {
    return run_some(3, {0, 1, 2}, short_timeout(), [&](Communicator& comm) {
      std::vector<float> v(1000 + comm.rank(), 1.0f);
      comm.allreduce(view(v), {.algorithm = a});
    });
  });
  for (std::size_t i = 0; i < results.size(); ++i) {
    const Algorithm a = kAlgorithms[i];
    const auto& errors = results[i];
    int clear = 0;
    for (auto& e : errors)
      clear += e.find("expected") != std::string::npos || e.find("disagree") != std::string::npos;
    EXPECT_GE(clear, 1) << algorithm_name(a) << ": " << errors[0] << " | " << errors[1];
    for (auto& e : errors) EXPECT_FALSE(e.empty()) << algorithm_name(a);
  }
}

TEST(Faults, AgreementCheckStopsEveryRankOnAMismatch) {
  auto o = short_timeout();
  o.check_collectives = true;
  auto errors = run_some(3, {0, 1, 2}, o, [&](Communicator& comm) {
    std::vector<float> v(10 + (comm.rank() == 2), 1.0f);
    comm.allreduce(view(v), {.algorithm = Algorithm::ring});
  });
  for (auto& e : errors) EXPECT_NE(e.find("disagree on the element count"), std::string::npos) << e;
}

TEST(Faults, FingerprintMismatchIsAnErrorOnEveryRank) {
  local::LocalWorld world(3);
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      auto o = short_timeout();
      o.fingerprint = r == 1 ? 0xbad : 0x900d;
      try {
        world.connect(r, o);
      } catch (const CommError& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors) EXPECT_NE(e.find("fingerprint"), std::string::npos) << e;
}

TEST(Faults, WorkWaitTimesOutThenCompletesWhenThePeerArrives) {
  local::run_ranks(2, {}, [](Communicator& comm) {
    std::vector<float> v(10, 1.0f);
    if (comm.rank() == 0) {
      auto w = comm.iallreduce(view(v));
      EXPECT_THROW(w.wait(50ms), TimeoutError);
      EXPECT_FALSE(w.test());
      comm.send(ConstBuffer{v.data(), 1, DType::f32}, 1, 0);  // now let rank 1 in
      w.wait();
      EXPECT_EQ(v[0], 2.0f);
    } else {
      float go;
      comm.recv(Buffer{&go, 1, DType::f32}, 0, 0);
      comm.allreduce(view(v));
    }
  });
}

TEST(Faults, ReceiveOfTheWrongSizeFailsWithBothSizes) {
  auto errors = run_some(2, {0, 1}, short_timeout(), [](Communicator& comm) {
    std::vector<double> v(comm.rank() == 0 ? 4 : 5);
    if (comm.rank() == 0)
      comm.send(cview(v), 1, 3);
    else
      comm.recv(view(v), 0, 3);
  });
  EXPECT_NE(errors[1].find("expected 40 bytes but the message has 32"), std::string::npos)
      << errors[1];
}

TEST(Faults, BadArgumentsAreUsageErrors) {
  local::run_ranks(2, {}, [](Communicator& comm) {
    std::vector<float> v(4), w(6);
    EXPECT_THROW(comm.allgather(cview(v), view(w)), UsageError);
    EXPECT_THROW(comm.broadcast(view(v), 5), UsageError);
    EXPECT_THROW(comm.send(cview(v), 1, -1), UsageError);
    EXPECT_THROW(comm.broadcast(view(v), 0, Algorithm::ring), UsageError);
  });
}

}  // namespace
}  // namespace distml::comm
