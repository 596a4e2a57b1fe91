// The conformance matrix: the axes a training run combines (strategy, split of the model,
// gradient compressor, what else the run does, world size), the config of each cell, and which
// cells distml refuses at start and why. conformance_test.cc runs every cell against its
// reference or checks the refusal; docs/training.md's matrix is printed from this table
// (conformance_doc.cc), so that the documentation cannot drift from what the test checks.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace distml::train::conformance {

enum class Strategy {
  allreduce,
  zero1,
  zero2,
  zero3,              // parameters gathered layer by layer
  zero3_no_prefetch,  // ... each only when it is needed
  ps,                 // bsp, one server
  local_sgd_h1,
  local_sgd_h2,
  post_local_sgd,  // 2 synchronous steps, then local SGD with H = 2
  easgd,           // synchronous, period 2, alpha 0.2
  gossip,          // ring
  hybrid,          // fastText's sparse embedding served by rows, plain SGD
};
enum class Split {
  none,
  gpipe,
  one_f_one_b,
  gpipe_recompute,
  one_f_one_b_recompute,
  pipedream,
  ddg,
  tensor2,
  grid2x2
};
enum class Compressor { none, fp16, topk, powersgd };  // topk and powersgd with error feedback
enum class Extra {
  plain,
  eval,        // an evaluation after every step: must not change the trajectory
  resume,      // 2 steps and a checkpoint, then a second run resumes it to step 4
  accumulate,  // train.accumulate = 2
  clip,        // train.clip_grad_norm, small enough to clip every step
};

const std::vector<Strategy>& strategies();
const std::vector<Split>& splits();
const std::vector<Compressor>& compressors();
const std::vector<Extra>& extras();
inline constexpr int kMaxWorld = 4;

std::string name(Strategy s);
std::string name(Split s);
std::string name(Compressor c);
std::string name(Extra e);

struct Cell {
  Strategy strategy;
  Split split;
  Compressor compressor;
  Extra extra;
  int world;
};
std::string describe(const Cell& c);

// The run's shape, shared with the reference.
inline constexpr int kSteps = 4, kResumeAt = 2, kBatch = 4, kMicroBatches = 2;
inline constexpr double kLr = 0.1, kMomentum = 0.9, kClip = 0.05, kAlpha = 0.2;
inline constexpr int kPeriod = 2, kWarmup = 2, kSeed = 3;

/// The overrides ("section.key=value") that make `c`'s config; `steps` its train.max_steps.
std::vector<std::string> overrides(const Cell& c, int steps = kSteps);

/// Why distml must refuse `c` at start: the config key its message names, or "" for a cell
/// that must run.
std::string refused_key(const Cell& c);

/// The ranks that train the model in replicas (world size over stages and tensor ranks, less
/// a parameter server's server).
int replicas(const Cell& c);
int stages(Split s);
int tensor_ranks(Split s);

/// The world sizes at which `s` with split `sp` runs (with no compressor, no extra).
std::set<int> running_worlds(Strategy s, Split sp);
/// Whether the compressor `co` with the extra `e` is refused at every one of them.
bool refused_everywhere(Strategy s, Split sp, Compressor co, Extra e);

/// The matrix in Markdown: per strategy and split, the world sizes that run and the
/// compressors and extras refused there. What docs/training.md shows between its conformance
/// markers.
std::string markdown();

}  // namespace distml::train::conformance
