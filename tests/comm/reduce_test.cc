#include "distml/comm/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "distml/comm/half.h"

namespace distml::comm {
namespace {

TEST(Half, RoundTripsAndRoundsToNearestEven) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 0.000061035156f})
    EXPECT_EQ(f16_to_f32(f32_to_f16(f)), f);
  EXPECT_EQ(f16_to_f32(f32_to_f16(1.0f + std::ldexp(1.0f, -11))), 1.0f);  // tie -> even
  for (float f : {0.0f, 1.0f, -3.0f, 256.0f}) EXPECT_EQ(bf16_to_f32(f32_to_bf16(f)), f);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);  // tie -> even
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
}

TEST(Reduce, HalfPrecisionCombinesInFloat) {
  // 2048 + 1 is not representable in f16; f32 arithmetic then one rounding gives 2048.
  std::uint16_t a[2] = {f32_to_f16(2048.0f), f32_to_f16(0.5f)};
  std::uint16_t b[2] = {f32_to_f16(1.0f), f32_to_f16(0.25f)};
  reduce_into(a, b, 2, DType::f16, ReduceOp::sum);
  EXPECT_EQ(f16_to_f32(a[0]), 2048.0f);
  EXPECT_EQ(f16_to_f32(a[1]), 0.75f);
}

// Every f16 value against every op, in blocks (of 8 on CPUs with F16C, 1024 through f32) and a
// tail: each result is the one-at-a-time reference's, bit for bit (NaN as NaN), so the result
// does not depend on which conversion the CPU offers.
TEST(Reduce, HalfPrecisionBlocksEqualTheOneAtATimeReference) {
  const std::size_t n = 65536 + 3;
  std::vector<std::uint16_t> a(n), b(n);
  for (std::size_t i = 0; i < n; ++i) {
    a[i] = static_cast<std::uint16_t>(i);
    b[i] = static_cast<std::uint16_t>(i * 40503u + 17u);  // another order of all values
  }
  auto same = [](std::uint16_t x, std::uint16_t y) {
    return x == y || (std::isnan(f16_to_f32(x)) && std::isnan(f16_to_f32(y)));
  };
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max}) {
    std::vector<std::uint16_t> out(a);
    reduce_into(out.data(), b.data(), n, DType::f16, op);
    for (std::size_t i = 0; i < n; ++i) {
      const float x = f16_to_f32(a[i]), y = f16_to_f32(b[i]);
      const float want = op == ReduceOp::sum    ? x + y
                         : op == ReduceOp::prod ? x * y
                         : op == ReduceOp::min  ? std::min(x, y)
                                                : std::max(x, y);
      ASSERT_TRUE(same(out[i], f32_to_f16(want)))
          << reduce_op_name(op) << " of " << x << " and " << y << " gave " << f16_to_f32(out[i]);
    }
  }
  std::vector<std::uint16_t> halved(a);
  divide_by(halved.data(), n, DType::f16, 3);
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_TRUE(same(halved[i], f32_to_f16(f16_to_f32(a[i]) / 3.0f))) << f16_to_f32(a[i]);
}

TEST(Reduce, IntegerAverageTruncates) {
  std::int32_t v[3] = {7, -7, 9};
  divide_by(v, 3, DType::i32, 2);
  EXPECT_EQ(v[0], 3);
  EXPECT_EQ(v[1], -3);
  EXPECT_EQ(v[2], 4);
}

TEST(Reduce, EveryOpOnEveryIntegerType) {
  std::uint8_t a[1] = {200}, b[1] = {100};
  reduce_into(a, b, 1, DType::u8, ReduceOp::sum);
  EXPECT_EQ(a[0], 44);  // wraps modulo 256
  std::int64_t x[1] = {5}, y[1] = {-3};
  reduce_into(x, y, 1, DType::i64, ReduceOp::min);
  EXPECT_EQ(x[0], -3);
  reduce_into(x, y, 1, DType::i64, ReduceOp::prod);
  EXPECT_EQ(x[0], 9);
}

}  // namespace
}  // namespace distml::comm
