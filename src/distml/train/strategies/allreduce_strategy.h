// Synchronous data parallelism (Horovod / PyTorch DDP class): gradients are averaged across
// ranks by all-reduce, bucket by bucket, while backward is still running.
//
// The bucket protocol, step by step:
//  1. setup() broadcasts every parameter and buffer from rank 0 and checks that all ranks
//     have the same parameter shapes (a mismatch is a CommError on every rank, not a hang).
//  2. The parameters are cut into buckets in reverse order (bucket_planner.h: 1 MiB for the
//     first, 25 MiB after, by default); each bucket owns one flat tensor. The plan depends
//     only on the shapes, so it is identical on all ranks.
//  3. A hook on each parameter receives its gradient during backward and copies it, plus
//     whatever .grad() already holds from earlier micro-steps, into the bucket's flat tensor
//     (gradient_buckets.h, shared with the ZeRO and parameter-server strategies).
//  4. When the last gradient of a bucket has arrived, the bucket is ready. Buckets are
//     launched strictly in plan order (bucket i only after buckets 0..i-1), so that every
//     rank issues the same all-reduces in the same order even if hooks fire in another
//     order; each launch is an asynchronous all-reduce (avg) that overlaps the rest of
//     backward. The last bucket, with nothing left to overlap, is reduced by
//     before_optimizer_step() on the training thread, after those queued before it.
//  5. before_optimizer_step() handles buckets that never became ready (a parameter got no
//     gradient): its current .grad() (zeros if none) is sent, so every rank's collectives still
//     match. Without find_unused_parameters each bucket also carries a flag element, raised by
//     the rank that sent such a stand-in; after the wait, every rank sees the reduced flag and
//     fails at once (naming the parameter where it is known) instead of waiting for a rank
//     that already gave up. Then the averages are copied back into .grad().
//  6. On micro-steps with before_backward(false) the hooks do nothing: gradients accumulate
//     locally in .grad(), and only the step's last backward communicates.
// With a compressor (compress/compressor.h; after compress.warmup_steps plain steps) step 4 is
// left out: once backward is done, before_optimizer_step() reduces bucket by bucket through the
// compressor, whose collectives block, and the flags travel in one all-reduce of their own.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/train/compress/compressor.h"
#include "distml/train/strategies/gradient_buckets.h"
#include "distml/train/strategy.h"

namespace distml::train {

struct AllreduceStrategyOptions {
  std::size_t first_bucket_bytes = 1u << 20;
  std::size_t bucket_bytes = 25u << 20;
  comm::Algorithm algorithm = comm::Algorithm::automatic;
  /// Send the current .grad() (or zeros) of parameters that got no gradient, instead of
  /// failing the step.
  bool find_unused_parameters = false;
  compress::CompressOptions compress;
  /// Updates per training step: 1, or the micro-batches of a pipedream stage, each of which
  /// is an update of its own. compress.warmup_steps and a resume's step count in steps.
  std::int64_t updates_per_step = 1;
};

class AllreduceStrategy final : public Strategy {
 public:
  AllreduceStrategy(comm::Communicator& comm, AllreduceStrategyOptions options = {});
  ~AllreduceStrategy() override;

  void setup(const nn::ModelTensors& model) override;
  void before_backward(bool sync) override;
  void before_optimizer_step() override;
  std::string save_state() override;
  void load_state(const std::string& state) override;
  void resumed_at(std::int64_t global_step) override {
    updates_ = global_step * options_.updates_per_step;
  }
  StrategyStats stats() const override { return stats_; }
  void record_into(Timeline* timeline) override;

 private:
  void launch_ready_buckets(bool last_too = false);
  /// Whether this step goes through the compressor (not in warm-up).
  bool compressing() const {
    return compressor_ && updates_ >= options_.compress.warmup_steps * options_.updates_per_step;
  }
  void reduce_compressed();

  comm::Communicator& comm_;
  AllreduceStrategyOptions options_;
  std::unique_ptr<GradientBuckets> buckets_;
  std::vector<comm::Work> work_;  // per bucket: its all-reduce
  std::size_t next_launch_ = 0;
  std::size_t early_launches_ = 0;  // this step's launches before every gradient had arrived
  std::chrono::steady_clock::time_point first_launch_;
  std::unique_ptr<compress::Compressor> compressor_;
  std::vector<compress::BucketLayout> layouts_;
  std::int64_t updates_ = 0;  // updates completed, counting those before a resume; the
                              // compressor draws by update
  StrategyStats stats_;
  // With a timeline: per bucket its lane and this step's launch; the waits on "main".
  std::vector<Timeline::Lane*> bucket_lanes_;
  std::vector<std::chrono::steady_clock::time_point> launched_at_;
  Timeline::Lane* wait_lane_ = nullptr;
};

}  // namespace distml::train
