// One step of data-parallel training with gradient all-reduce (strategy "allreduce"), replayed
// from a profile on a cluster, with the decisions the run itself makes:
//  1. the parameters' gradients are grouped into buckets by train/bucket_planner.h (the
//     strategy's own planner: the first bucket capped at first_bucket_mb, the others at
//     bucket_mb, in reverse parameter order), each with the strategy's flag element;
//  2. each bucket's all-reduce algorithm is comm/auto_policy.h's choice for its size, world
//     and hosts, or the one the config names;
//  3. the rank computes: loading, forward, backward, each slower where the cluster's ranks
//     share fewer cores than the profile's rank had (Cluster::shared_cores);
//  4. a bucket's all-reduce starts when its last gradient is ready in backward and the
//     previous bucket's has finished (one communication thread, buckets in order); without
//     overlap, all start after backward. On links with a burst (network.h, Links) the steps
//     are replayed one after another until one takes what the one before took;
//  5. the optimizer steps when backward and the last all-reduce are done; the step's
//     bookkeeping outside the recorded phases (Profile::other_s) follows.
// With a compressor (AllreduceOptions::compressed, sim/compression.h) the run reduces after
// backward, bucket by bucket and blocking: each bucket then costs its compressor's arithmetic
// and its collectives (all-reduces of what averages element-wise, all-gathers of the rest),
// and the buckets' flags follow in one all-reduce of their own.
// ZeRO (AllreduceOptions::zero_stage, train/strategies/zero_strategy.h) pads each bucket to N
// equal blocks; stage 1 all-reduces it, stage 2 reduce-scatters it (a ring: n - 1 steps of a
// block); the optimizer updates 1/N of the parameters, and then every bucket's blocks are
// all-gathered (a ring of n - 1 steps of a block), before the step's bookkeeping.
// All ranks do the same, so one rank's timeline is the step's.
#pragma once

#include <string>
#include <vector>

#include "distml/comm/types.h"
#include "distml/sim/cluster.h"
#include "distml/sim/profile.h"
#include "distml/train/bucket_planner.h"

namespace distml::sim {

/// A bucket's reduction through a compressor (sim/compression.h).
struct CompressedBucket {
  struct Collective {
    bool gathered = false;  // all-gathered (each rank's `bytes`), or all-reduced
    double bytes = 0;
  };
  std::vector<Collective> collectives;  // in order
  double reduce_s = 0;                  // its arithmetic on one rank alone (encode, decode)
  double decode_s = 0;                  // one other rank's payload decoded, when gathered
};

struct AllreduceOptions {
  std::string engine = "gloo";
  comm::Algorithm algorithm = comm::Algorithm::automatic;
  double first_bucket_bytes = 1 << 20, bucket_bytes = 25 << 20;
  bool overlap = true;
  // Added to every bucket: the strategy's flag that each rank's parameters all had gradients
  // (train/strategies/gradient_buckets.h), one element, unless find_unused_parameters.
  double flag_bytes = 0;
  std::vector<CompressedBucket> compressed{};  // one per bucket; empty: no compression
  int zero_stage = 0;                          // 1 or 2: ZeRO's; 0: the all-reduce strategy
  double element_bytes = 4;                    // of the gradients (ZeRO's blocks)
};

struct BucketReplay {
  double bytes = 0, ready_s = 0, start_s = 0, end_s = 0;
  comm::Algorithm algorithm = comm::Algorithm::native;
  int server = -1;  // ps: the rank it is pushed to and pulled from (no all-reduce)
};

struct StepPrediction {
  double step_s = 0;
  double compute_s = 0;       // the rank's own work: data, forward, backward, optimizer, other
  double comm_s = 0;          // the all-reduces' time, overlapped or not
  double exposed_comm_s = 0;  // what the step waited for them
  double bytes_per_link = 0;  // sent per step by the busiest host's NIC
  int busiest_host = 0;
  // Batches a step trains: one per rank that trains one (ps: the workers; pipelines: one per
  // replica of the whole pipeline).
  int batches = 0;
  std::vector<BucketReplay> buckets;  // in the order reduced, times from the step's start
};

/// How much slower the cluster's ranks compute than the profile's rank did: the cores each
/// had (its threads, at most its machine's cores) over the cores each rank has here, where
/// `computing` ranks of the cluster compute (with shared cores; default: all of them).
double compute_slowdown(const Profile& profile, const Cluster& cluster, int computing = 0);

/// A step of one rank training alone on a host of `cluster` (its cores shared as the
/// cluster's are): the profile's phases, nothing to exchange. Efficiencies are against it.
double one_rank_step_s(const Profile& profile, const Cluster& cluster);

/// The run's buckets of the profile's gradients (step 1), without their flags.
train::BucketPlan profile_buckets(const Profile& profile, const AllreduceOptions& options);

StepPrediction predict_allreduce_step(const Profile& profile, const AllreduceOptions& options,
                                      const Cluster& cluster);

}  // namespace distml::sim
