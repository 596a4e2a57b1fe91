// The compressor's collectives and arithmetic as the simulator takes them
// (sim/compression.h): the run's own compressor on the profile's buckets.
#include "distml/sim/compression.h"

#include <gtest/gtest.h>

#include "distml/core/error.h"

namespace distml::sim {
namespace {

// A 12 x 10 weight and its 10 biases (480 + 40 bytes of float32), one bucket.
Profile linear_layer(bool with_shapes) {
  Profile p;
  p.parameters = {{"fc.weight", 480, 0.002}, {"fc.bias", 40, 0.001}};
  if (with_shapes) {
    p.parameters[0].shape = {12, 10};
    p.parameters[1].shape = {10};
  }
  return p;
}

train::compress::CompressOptions named(const char* name) {
  train::compress::CompressOptions o;
  o.name = name;
  o.ratio = 0.1;
  o.rank = 2;
  return o;
}

TEST(Compression, TakesTheRunsCompressorsCollectives) {
  const AllreduceOptions one_bucket;  // 1 MiB first bucket: both parameters
  // fp16: the largest magnitude (a float), then 130 halves, both all-reduced.
  auto fp16 = measure_compression(linear_layer(false), one_bucket, named("fp16"), 1);
  ASSERT_EQ(fp16.size(), 1u);
  ASSERT_EQ(fp16[0].collectives.size(), 2u);
  EXPECT_FALSE(fp16[0].collectives[0].gathered);
  EXPECT_EQ(fp16[0].collectives[0].bytes, 4);
  EXPECT_EQ(fp16[0].collectives[1].bytes, 260);
  EXPECT_GT(fp16[0].reduce_s, 0);
  // top-k of 10%: 13 values and their 16-bit indices (130 elements), all-gathered.
  auto topk = measure_compression(linear_layer(false), one_bucket, named("topk"), 1);
  double gathered = 0;
  for (const auto& c : topk[0].collectives) {
    EXPECT_TRUE(c.gathered);
    gathered += c.bytes;
  }
  EXPECT_EQ(gathered, 13 * (4 + 2));
  EXPECT_GT(topk[0].decode_s, 0);
  // PowerSGD of rank 2: P (12 x 2) with the 10 biases, then Q (10 x 2), all-reduced.
  auto power = measure_compression(linear_layer(true), one_bucket, named("powersgd"), 1);
  ASSERT_EQ(power[0].collectives.size(), 2u);
  EXPECT_EQ(power[0].collectives[0].bytes, (24 + 10) * 4);
  EXPECT_EQ(power[0].collectives[1].bytes, 20 * 4);
  // Without the shapes in the profile it cannot plan the matrices.
  EXPECT_THROW(measure_compression(linear_layer(false), one_bucket, named("powersgd"), 1),
               ConfigError);
}

}  // namespace
}  // namespace distml::sim
