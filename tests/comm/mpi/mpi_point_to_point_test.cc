// Point-to-point on the mpi engine: ordering, exact sizes, cancellation, large messages.
// Ranks 0 and 1 talk; the others only join each test's communicator.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>

#include "mpi_world.h"

namespace distml::test {
namespace {

using comm::Buffer;
using comm::ConstBuffer;
using comm::DType;

// The message of the first failure of `recv`, checked to be the same on a second wait.
std::string failure_of(comm::Work& recv) {
  std::string first, second;
  try {
    recv.wait();
  } catch (const CommError& e) {
    first = e.what();
  }
  try {
    recv.wait();
  } catch (const CommError& e) {
    second = e.what();
  }
  EXPECT_EQ(first, second) << "a failed request must rethrow the same error";
  return first;
}

TEST(MpiPointToPoint, KeepsOrderPerTag) {
  auto comm = connect_world();
  if (comm->size() < 2) GTEST_SKIP() << "needs two ranks";
  if (comm->rank() == 0) {
    std::vector<std::int32_t> values(50);
    std::vector<comm::Work> sends;
    for (int i = 0; i < 50; ++i) {
      values[i] = i;
      sends.push_back(comm->isend(ConstBuffer{&values[i], 1, DType::i32}, 1, i % 3));
    }
    for (auto& w : sends) w.wait();
  } else if (comm->rank() == 1) {
    // Receive tag 2 first, then 1, then 0: within a tag, messages arrive in send order.
    for (int tag : {2, 1, 0})
      for (int i = tag; i < 50; i += 3) {
        std::int32_t v = -1;
        comm->recv(Buffer{&v, 1, DType::i32}, 0, tag);
        EXPECT_EQ(v, i);
      }
  }
}

TEST(MpiPointToPoint, ShorterMessageFailsWithBothSizesOnEveryWait) {
  auto comm = connect_world();
  if (comm->size() < 2) GTEST_SKIP() << "needs two ranks";
  std::vector<double> v(comm->rank() == 0 ? 4 : 5);
  if (comm->rank() == 0) comm->send(comm::cview(v), 1, 3);
  if (comm->rank() == 1) {
    auto recv = comm->irecv(comm::view(v), 0, 3);
    auto why = failure_of(recv);
    EXPECT_NE(why.find("recv from rank 0 (tag 3): expected 40 bytes but the message has 32"),
              std::string::npos)
        << why;
  }
}

TEST(MpiPointToPoint, LongerMessageFailsNamingTheExpectedSize) {
  auto comm = connect_world();
  if (comm->size() < 2) GTEST_SKIP() << "needs two ranks";
  std::vector<double> v(comm->rank() == 0 ? 5 : 4);
  if (comm->rank() == 0) comm->send(comm::cview(v), 1, 4);
  if (comm->rank() == 1) {
    auto recv = comm->irecv(comm::view(v), 0, 4);
    auto why = failure_of(recv);
    EXPECT_NE(why.find("recv from rank 0 (tag 4): expected 32 bytes but the message is longer"),
              std::string::npos)
        << why;
  }
}

TEST(MpiPointToPoint, DestroyedReceiveIsCancelledAndLeavesTheMessageForTheNext) {
  auto comm = connect_world();
  if (comm->size() < 2) GTEST_SKIP() << "needs two ranks";
  std::int64_t value = 0, go = 1;
  if (comm->rank() == 1) {
    comm->irecv(Buffer{&value, 1, DType::i64}, 0, 7);  // destroyed unmatched: cancelled
    comm->send(ConstBuffer{&go, 1, DType::i64}, 0, 8);
    comm->recv(Buffer{&value, 1, DType::i64}, 0, 7);
    EXPECT_EQ(value, 42);
  } else if (comm->rank() == 0) {
    comm->recv(Buffer{&go, 1, DType::i64}, 1, 8);
    value = 42;
    comm->send(ConstBuffer{&value, 1, DType::i64}, 1, 7);
  }
}

// With the limits lowered to 1000, these messages travel as derived datatypes (six blocks
// of 384 bytes and a remainder), and a wrong size is still caught exactly.
TEST(MpiPointToPoint, MessagesBeyondTheIntLimitArriveWholeAndSizesAreStillChecked) {
  auto comm = connect_world(mpi_test_options(), {.max_count = 1000, .block = 384});
  if (comm->size() < 2) GTEST_SKIP() << "needs two ranks";
  std::vector<std::uint8_t> data(2600);
  if (comm->rank() == 0) {
    std::iota(data.begin(), data.end(), std::uint8_t{0});
    comm->send(ConstBuffer{data.data(), 2500, DType::u8}, 1, 1);
    comm->send(ConstBuffer{data.data(), 2400, DType::u8}, 1, 2);
    comm->send(ConstBuffer{data.data(), 2600, DType::u8}, 1, 3);
  } else if (comm->rank() == 1) {
    comm->recv(Buffer{data.data(), 2500, DType::u8}, 0, 1);
    for (std::size_t i = 0; i < 2500; ++i) ASSERT_EQ(data[i], static_cast<std::uint8_t>(i)) << i;
    auto shorter = comm->irecv(Buffer{data.data(), 2500, DType::u8}, 0, 2);
    EXPECT_NE(failure_of(shorter).find("expected 2500 bytes but the message has 2400"),
              std::string::npos);
    auto longer = comm->irecv(Buffer{data.data(), 2500, DType::u8}, 0, 3);
    EXPECT_NE(failure_of(longer).find("expected 2500 bytes but the message is longer"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace distml::test
