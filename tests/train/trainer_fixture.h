// What the trainer and strategy tests share: synthetic images, a small config, and running a
// function on N local ranks.
#pragma once

#include <torch/torch.h>

#include <mutex>
#include <string>
#include <vector>

#include "distml/comm/local/local_world.h"
#include "distml/data/permutation.h"
#include "distml/train/trainer.h"

namespace distml::train::testing {

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

inline TrainConfig config_for(const std::string& model, const std::string& optim, int batch,
                              int steps) {
  TrainConfig c;
  c.model.name = model;
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
  std::vector<torch::Tensor> params;
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
  o.result = trainer.run();
  for (auto& p : trainer.model().parameters()) o.params.push_back(p.detach().clone());
  return o;
}

// Largest relative difference ||a - b|| / ||b|| over the parameter tensors.
inline double max_relative_difference(const std::vector<torch::Tensor>& a,
                                      const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, ((a[i] - b[i]).norm() / b[i].norm()).item<double>());
  return worst;
}

}  // namespace distml::train::testing
