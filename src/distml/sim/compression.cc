#include "distml/sim/compression.h"

#include <torch/torch.h>

#include "distml/comm/local/local_world.h"
#include "distml/core/clock.h"
#include "distml/core/error.h"
#include "distml/core/median.h"
#include "distml/train/compress/compressor.h"

namespace distml::sim {
namespace {

// Median seconds of `reps` calls of `fn` after one warm-up; `fn` takes the call's number.
double timed_s(int reps, const std::function<void(int)>& fn) {
  fn(0);
  std::vector<double> seconds;
  for (int r = 1; r <= reps; ++r) {
    const auto start = Clock::now();
    fn(r);
    seconds.push_back(seconds_since(start));
  }
  return median(seconds);
}

}  // namespace

std::vector<CompressedBucket> measure_compression(const Profile& profile,
                                                  const AllreduceOptions& options,
                                                  const train::compress::CompressOptions& compress,
                                                  int reps) {
  // 1.
  const auto plan = profile_buckets(profile, options);
  const auto dtype = profile.dtype == "float64" ? torch::kFloat64 : torch::kFloat32;
  const auto element = static_cast<std::int64_t>(c10::elementSize(dtype));
  std::vector<train::compress::BucketLayout> layouts;
  for (const auto& bucket : plan.buckets) {
    train::compress::BucketLayout layout;
    layout.dtype = dtype;
    for (auto i : bucket) {
      const auto& p = profile.parameters[i];
      const auto elements = static_cast<std::int64_t>(p.bytes) / element;
      if (p.shape.empty() && compress.name == "powersgd")
        throw ConfigError(
            cat("compress.name = powersgd needs the parameters' shapes, which this "
                "profile does not record (parameter \"",
                p.name, "\"); take the profile again with this distml"));
      layout.offsets.push_back(layout.elements);
      layout.shapes.push_back(p.shape.empty() ? std::vector<std::int64_t>{elements} : p.shape);
      layout.elements += elements;
    }
    layouts.push_back(layout);
  }
  auto compressor = train::compress::make_compressor(compress, layouts);
  std::vector<CompressedBucket> out;
  comm::local::run_ranks(1, {}, [&](comm::Communicator& alone) {
    for (std::size_t b = 0; b < layouts.size(); ++b) {
      CompressedBucket c;
      for (const auto& w : compressor->wire(b, layouts[b].elements))  // 2.
        c.collectives.push_back({w.gathered, static_cast<double>(w.bytes)});
      // 3. Steps numbered on, so that what draws at random draws anew.
      const auto grad = torch::randn({layouts[b].elements}, torch::TensorOptions(dtype));
      c.reduce_s = timed_s(reps, [&](int r) { compressor->reduce(grad, b, r + 1, alone); });
      const auto packed = compressor->pack(grad, b, reps + 2, 0).bytes;
      c.decode_s = timed_s(reps, [&](int) { compressor->unpack(packed, b, layouts[b].elements); });
      out.push_back(c);
    }
  });
  return out;
}

}  // namespace distml::sim
