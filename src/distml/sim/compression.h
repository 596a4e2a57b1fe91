// Gradient compression replayed (strategy "allreduce" with compress.name; the run's side is
// train/strategies/allreduce_strategy.h, "With a compressor"):
//  1. the buckets are the run's (the bucket planner on the profile's parameters), and the
//     compressor is the run's own, made by compress::make_compressor on their layouts (the
//     parameters' shapes from the profile, which PowerSGD needs);
//  2. its wire() names the collectives each bucket's reduction makes: all-reduces of what
//     averages element-wise, all-gathers of the rest (sim/collectives.h);
//  3. its arithmetic is timed on this machine, on gradients of each bucket's size drawn at
//     random: reduce() on a world of one rank (its encode and decode), and unpack() of a
//     packed payload, one decode, which an all-gathered payload costs once per other rank.
//     Medians of `reps` timed calls after one warm-up.
// The step then reduces the buckets after backward, one after another (data_parallel.h). The
// first compress.warmup_steps steps, plain all-reduces, are not what is predicted.
#pragma once

#include <vector>

#include "distml/sim/data_parallel.h"
#include "distml/sim/profile.h"
#include "distml/train/compress/compress_options.h"

namespace distml::sim {

/// Steps 1 to 3 for the buckets `options` plans of the profile's parameters. ConfigError
/// where the run's compressor would refuse, and for PowerSGD on a profile without shapes.
std::vector<CompressedBucket> measure_compression(const Profile& profile,
                                                  const AllreduceOptions& options,
                                                  const train::compress::CompressOptions& compress,
                                                  int reps = 5);

}  // namespace distml::sim
