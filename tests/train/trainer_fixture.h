// What the trainer and strategy tests share: synthetic images, a small config, and running a
// function on N local ranks.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <mutex>
#include <string>
#include <vector>

#include "distml/comm/local/local_world.h"
#include "distml/data/permutation.h"
#include "distml/train/trainer.h"

namespace distml::train::testing {

// A test over world sizes: LibTorch on one thread, since the ranks are threads of this process.
class WorldSizeTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
};

inline std::string world_name(const ::testing::TestParamInfo<int>& info) {
  return "np" + std::to_string(info.param);
}

// Random 28x28 "images" with labels that depend on them, so that training has a signal.
inline TaskData synthetic_images(std::size_t n) {
  TaskData t;
  t.num_classes = 10;
  for (auto* d : {&t.train, &t.test}) {
    d->num_samples = n;
    d->feature_dim = 784;
    d->sample_shape = {28, 28};
    data::SplitMix64 rng(d == &t.train ? 11 : 12);
    for (std::size_t i = 0; i < n * 784; ++i) d->features.push_back((rng.next() % 256) / 255.0f);
    for (std::size_t i = 0; i < n; ++i)
      d->labels.push_back(static_cast<std::int64_t>(d->row(i)[0] * 9.99f));
  }
  return t;
}

// Trajectory comparisons (N ranks against one, a strategy against all-reduce) train in float64:
// see kTrajectoryTolerance for why.
inline TrainConfig config_for(const std::string& model, const std::string& optim, int batch,
                              int steps) {
  TrainConfig c;
  c.train.dtype = "float64";
  c.model.name = model;
  // Narrower than the built-in MLP's 1024 and 512: the same sums in kind at a tenth of the
  // parameters (109 K against 1.3 M), a tenth of each step's time, and still several buckets.
  c.model.mlp_layers = {784, 128, 64, 10};
  c.optim.name = optim;
  c.optim.lr = optim == "sgd" ? 0.05 : 1e-3;
  c.optim.momentum = optim == "sgd" ? 0.9 : 0.0;
  c.train.batch_size = batch;
  c.train.max_steps = steps;
  c.train.log_every = 1000;
  c.strategy.first_bucket_mb = 0.05;  // several buckets, launched while backward runs
  c.strategy.bucket_mb = 0.5;
  return c;
}

struct RankOutcome {
  TrainResult result;
  std::vector<torch::Tensor> initial;  // the parameters before the first step
  std::vector<torch::Tensor> params;   // ... and after the last
};

// Runs `fn(comm)` on `world` local ranks and returns each rank's outcome.
template <class Fn>
std::vector<RankOutcome> on_ranks(int world, Fn fn) {
  std::mutex mutex;
  std::vector<RankOutcome> out(world);
  comm::local::run_ranks(world, {}, [&](comm::Communicator& comm) {
    auto outcome = fn(comm);
    std::lock_guard lock(mutex);
    out[comm.rank()] = std::move(outcome);
  });
  return out;
}

inline RankOutcome train_once(const TrainConfig& c, comm::Communicator& comm, const TaskData& data,
                              const std::string& resume_from = "") {
  Trainer trainer(c, comm, data);
  if (!resume_from.empty()) trainer.resume(resume_from);
  RankOutcome o;
  o.initial = trainer.parameter_values();
  o.result = trainer.run();
  o.params = trainer.parameter_values();
  return o;
}

// How far `got` ended from `want`, in units of how far `want` travelled from its start: the
// largest ||got_i - want_i|| / ||want_i - initial_i|| over the parameter tensors i. Measured
// against the distance travelled, not the parameters' size, so that an update that is wrong by
// a fraction f shows as about f however small the learning rate or the run.
inline double trajectory_difference(const RankOutcome& got, const RankOutcome& want) {
  double worst = 0;
  for (std::size_t i = 0; i < got.params.size(); ++i) {
    const auto travelled = (want.params[i] - want.initial[i]).norm().item<double>();
    const auto apart = (got.params[i] - want.params[i]).norm().item<double>();
    worst = std::max(worst, apart / travelled);
  }
  return worst;
}

// The trajectory comparisons' cases: both models, both optimizers, 2 to 4 ranks.
struct TrajectoryCase {
  std::string model, optim;
  int world;
};

inline std::vector<TrajectoryCase> trajectory_cases() {
  std::vector<TrajectoryCase> cases;
  for (const char* model : {"mlp", "lenet5"})
    for (const char* optim : {"sgd", "adam"})
      for (int world : {2, 3, 4}) cases.push_back({model, optim, world});
  return cases;
}

// "mlp_adam_np3": the test name of a case.
inline std::string case_name(const TrajectoryCase& c) {
  return c.model + "_" + c.optim + "_np" + std::to_string(c.world);
}

// What trajectory_difference may be between two runs that compute the same steps with sums in
// another order (N partial batch sums and an all-reduce against one sum; another GEMM blocking
// for another batch size). Derived for float64, where each rounding is at most u = 2^-53:
// - a sum of n terms in another order moves by at most n u of the terms' magnitude (Higham,
//   "Accuracy and Stability of Numerical Algorithms", 4.2). One step of the models here chains
//   six such sums (forward and backward through three layers, each over at most 1024 terms) and
//   one over the batch (at most 16 samples): with n = 16 x 1024 for all of them together, each
//   gradient element moves by under 2e-12 of its terms' size, and each step by that share;
// - the shares of `steps` steps add up; a further factor 1000 allows for the optimizer (Adam
//   divides by sqrt(v), momentum carries errors forward) and for the trajectory's sensitivity
//   to where it has been.
// At steps = 20 that is 3.6e-8; correct runs measure about 1e-13. A wrong step is far above it:
// a rank's gradient dropped changes each update by about 1/N (measured: 0.5 and more); a
// gradient averaged twice changes SGD's by (N - 1)/N and even Adam's, whose steps are scale-free
// but for eps = 1e-8 beside sqrt(v), by 1e-5 and more. In float32 (u = 6e-8) the same bound
// would be 20, larger than any error, which is why these comparisons train in float64.
inline double trajectory_tolerance(int steps) {
  constexpr double u = 0x1p-53, widest_sum = 16.0 * 1024, optimizer_and_trajectory = 1000;
  return widest_sum * u * steps * optimizer_and_trajectory;
}

}  // namespace distml::train::testing
