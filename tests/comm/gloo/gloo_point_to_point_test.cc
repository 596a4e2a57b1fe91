// Point-to-point on the gloo engine (comm/gloo/peer_mesh.h): ordering per tag, the two
// channels, sub-groups on the shared connections, exact sizes, waits that time out without
// breaking the connections, and a peer that exits.
#include <gtest/gtest.h>

#include <thread>

#include "gloo_ranks.h"

namespace distml::test {
namespace {

using namespace std::chrono_literals;
using comm::Channel;
using comm::Deadline;

void expect_all_ok(const std::vector<RankOutcome>& outcomes) {
  for (std::size_t r = 0; r < outcomes.size(); ++r) {
    EXPECT_EQ(outcomes[r].exit_code, 0) << describe(outcomes);
    EXPECT_EQ(outcomes[r].report, "") << "rank " << r << ": " << outcomes[r].report;
  }
}

TEST(GlooPointToPoint, KeepsOrderPerTagAndNeverMatchesAcrossChannels) {
  GlooWorld world;
  expect_all_ok(run_gloo_engines(world, [](comm::Engine& engine) {
    std::string bad;
    std::vector<std::int32_t> values(60);
    if (engine.rank() == 0) {
      std::vector<comm::RequestPtr> sends;
      for (int i = 0; i < 60; ++i) {
        values[i] = i;
        // Tags 0-2 on the user channel, the same tags on the collective channel for i >= 30.
        Channel ch = i < 30 ? Channel::user : Channel::collective;
        sends.push_back(engine.isend(ch, &values[i], 4, 1, i % 3));
      }
      for (auto& s : sends)
        if (!s->wait_until(Deadline::after(5s))) bad += "send timed out\n";
    } else {
      // The collective channel first, tags in reverse: each stream keeps its own order.
      for (Channel ch : {Channel::collective, Channel::user})
        for (int tag : {2, 1, 0})
          for (int i = tag + (ch == Channel::collective ? 30 : 0);
               i < (ch == Channel::collective ? 60 : 30); i += 3) {
            std::int32_t v = -1;
            auto r = engine.irecv(ch, &v, 4, 0, tag);
            if (!r->wait_until(Deadline::after(5s))) bad += "recv timed out\n";
            if (v != i)
              bad += cat("channel ", static_cast<int>(ch), " tag ", tag, ": got ", v, " expected ",
                         i, "\n");
          }
    }
    return bad;
  }));
}

// Sub-groups share the world's connections: the same tag in the world and in a sub-group (and
// in the sub-group's own sub-group) are three streams, whatever the order of the receives.
TEST(GlooPointToPoint, SubGroupsKeepTheirOwnMessagesOnTheSharedConnections) {
  GlooWorld world;
  world.size = 3;
  expect_all_ok(run_gloo_world(world, [](comm::Communicator& comm) {
    auto pair = comm.split(comm.rank() == 2 ? -1 : 0, comm.rank());  // ranks 0 and 1
    if (!pair) return std::string();
    auto again = pair->split(0, pair->rank());
    std::vector<comm::Communicator*> groups{&comm, pair.get(), again.get()};
    std::string bad;
    if (comm.rank() == 0) {
      for (std::int32_t g = 0; g < 3; ++g)
        groups[g]->send(comm::ConstBuffer{&g, 1, comm::DType::i32}, 1, 5);
    } else {
      for (std::int32_t g = 2; g >= 0; --g) {
        std::int32_t got = -1;
        groups[g]->recv(comm::Buffer{&got, 1, comm::DType::i32}, 0, 5);
        if (got != g) bad += cat("group ", g, " received group ", got, "'s message\n");
      }
    }
    return bad;
  }));
}

// A peer that exits fails the transfers waiting on it at once, naming it: not at the deadline.
TEST(GlooPointToPoint, PeerThatExitsFailsTheWaitingReceiveNamingIt) {
  GlooWorld world;
  auto outcomes = run_gloo_engines(world, [](comm::Engine& engine) {
    if (engine.rank() == 1) return std::string();  // exits: its connections close
    std::int32_t v = 0;
    auto r = engine.irecv(Channel::user, &v, 4, 1, 3);
    const auto start = comm::Clock::now();
    try {
      r->wait_until(Deadline::after(30s));
      return std::string("completed without a sender");
    } catch (const CommError& e) {
      if (comm::Clock::now() - start > 10s) return cat("failed only after 10 s: ", e.what());
      return std::string(e.what());
    }
  });
  ASSERT_EQ(outcomes[0].exit_code, 0) << describe(outcomes);
  EXPECT_NE(outcomes[0].report.find("recv from rank 1 (tag 3, 4 bytes): the connection to rank 1 "
                                    "broke"),
            std::string::npos)
      << outcomes[0].report;
}

TEST(GlooPointToPoint, ZeroByteAndLargeMessagesArriveWhole) {
  GlooWorld world;
  expect_all_ok(run_gloo_engines(world, [](comm::Engine& engine) {
    std::string bad;
    std::vector<std::uint8_t> big(3 << 20);
    const int peer = 1 - engine.rank();
    if (engine.rank() == 0)
      for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::uint8_t>(i * 7);
    auto zero = engine.rank() == 0 ? engine.isend(Channel::user, nullptr, 0, peer, 9)
                                   : engine.irecv(Channel::user, nullptr, 0, peer, 9);
    auto large = engine.rank() == 0 ? engine.isend(Channel::user, big.data(), big.size(), peer, 9)
                                    : engine.irecv(Channel::user, big.data(), big.size(), peer, 9);
    if (!zero->wait_until(Deadline::after(5s))) bad += "zero-byte transfer timed out\n";
    if (!large->wait_until(Deadline::after(5s))) bad += "large transfer timed out\n";
    for (std::size_t i = 0; i < big.size(); ++i)
      if (big[i] != static_cast<std::uint8_t>(i * 7)) {
        bad += cat("byte ", i, " differs\n");
        break;
      }
    return bad;
  }));
}

// gloo would complete a short message silently and abort the receiving process on a long
// one; both must be a CommError naming both sizes, and the connection must still work.
TEST(GlooPointToPoint, ReceiveOfTheWrongSizeFailsWithBothSizesAndTheLinkSurvives) {
  GlooWorld world;
  auto outcomes = run_gloo_engines(world, [](comm::Engine& engine) {
    std::string seen;
    std::vector<double> v(8, 1.0);
    const int peer = 1 - engine.rank();
    // Tag 3: the sender sends 4 doubles, the receiver expects 5. Tag 4: 6 against 5.
    for (int tag : {3, 4}) {
      const std::size_t sent = tag == 3 ? 4 : 6;
      if (engine.rank() == 0) {
        auto s = engine.isend(Channel::user, v.data(), sent * 8, peer, tag);
        s.reset();  // never matched: abandon it
      } else {
        auto r = engine.irecv(Channel::user, v.data(), 5 * 8, peer, tag);
        try {
          r->wait_until(Deadline::after(5s));
          seen += cat("tag ", tag, ": no error\n");
        } catch (const CommError& e) {
          seen += cat(e.what(), "\n");
        }
      }
    }
    // Another tag still goes through.
    std::int64_t token = 42 + engine.rank();
    auto r = engine.irecv(Channel::user, &token, 8, peer, 5);
    auto s = engine.isend(Channel::user, &token, 8, peer, 5);
    if (!r->wait_until(Deadline::after(5s)) || !s->wait_until(Deadline::after(5s)))
      seen += "link broken after the mismatch\n";
    return seen;
  });
  ASSERT_EQ(outcomes[0].exit_code, 0) << describe(outcomes);
  ASSERT_EQ(outcomes[1].exit_code, 0) << describe(outcomes);
  EXPECT_EQ(outcomes[0].report, "") << describe(outcomes);
  const std::string& seen = outcomes[1].report;
  EXPECT_NE(seen.find("expected 40 bytes but the message has 32"), std::string::npos) << seen;
  EXPECT_NE(seen.find("expected 40 bytes but the message has 48"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("link broken"), std::string::npos) << seen;
}

TEST(GlooPointToPoint, WaitThatTimesOutLeavesTheTransferAndTheLinkIntact) {
  GlooWorld world;
  expect_all_ok(run_gloo_engines(world, [](comm::Engine& engine) {
    std::string bad;
    const int peer = 1 - engine.rank();
    std::int32_t go = 0, value = -1;
    if (engine.rank() == 0) {
      auto r = engine.irecv(Channel::user, &value, 4, peer, 1);
      auto start = comm::Clock::now();
      if (r->wait_until(Deadline::after(100ms))) bad += "completed without a sender\n";
      if (comm::Clock::now() - start > 2s) bad += "timed-out wait took too long\n";
      if (r->test()) bad += "test() true without a sender\n";
      auto s = engine.isend(Channel::user, &go, 4, peer, 0);  // now let rank 1 send
      if (!s->wait_until(Deadline::after(5s))) bad += "go signal timed out\n";
      while (!r->test()) std::this_thread::sleep_for(1ms);  // polling via the background waiter
      if (!r->wait_until(Deadline::after(5s)) || value != 7) bad += cat("got ", value, "\n");
    } else {
      auto g = engine.irecv(Channel::user, &go, 4, peer, 0);
      if (!g->wait_until(Deadline::after(5s))) bad += "no go signal\n";
      value = 7;
      auto s = engine.isend(Channel::user, &value, 4, peer, 1);
      if (!s->wait_until(Deadline::after(5s))) bad += "send timed out\n";
    }
    return bad;
  }));
}

TEST(GlooPointToPoint, DestroyingAnUnfinishedRequestDoesNotCrash) {
  GlooWorld world;
  expect_all_ok(run_gloo_engines(world, [](comm::Engine& engine) {
    std::int32_t v = 0;
    auto polled = engine.irecv(Channel::user, &v, 4, 1 - engine.rank(), 11);
    polled->test();  // starts the background waiter, which the destructor must stop
    polled.reset();
    auto plain = engine.isend(Channel::user, &v, 4, 1 - engine.rank(), 12);
    plain.reset();
    // Both have posted before either exits (an exited peer fails every later post).
    std::int32_t mine = engine.rank(), theirs = -1;
    auto r = engine.irecv(Channel::user, &theirs, 4, 1 - engine.rank(), 13);
    auto s = engine.isend(Channel::user, &mine, 4, 1 - engine.rank(), 13);
    if (!r->wait_until(Deadline::after(5s)) || !s->wait_until(Deadline::after(5s)))
      return std::string("link broken after abandoning transfers");
    return theirs == 1 - engine.rank() ? std::string() : cat("got ", theirs);
  }));
}

}  // namespace
}  // namespace distml::test
