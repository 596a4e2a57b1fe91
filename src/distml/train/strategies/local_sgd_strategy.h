// Local SGD (Lin et al. 2020, "Don't use large mini-batches, use local SGD"; Yu et al. 2019,
// "Parallel restarted SGD"): every rank steps on its own gradients, and the replicas are
// averaged every H steps instead of the gradients every step.
//
// The protocol, step by step:
//  1. setup() gives every rank rank 0's parameters and buffers (replicas.h).
//  2. Backward and the optimizer step are purely local: no hook, no communication; the
//     replicas drift apart.
//  3. after_optimizer_step(step) with step % H == 0: one all-reduce (avg) of all parameters,
//     and with average_optimizer_state one more of the optimizer state (momentum, Adam
//     moments). The all-reduce hands every rank the same bits, so right after it the replicas
//     are bit-identical. H = 1 without state averaging is synchronous SGD for SGD with
//     momentum (the update is linear in the gradient), not for Adam.
//  4. reconcile() averages what has drifted since its last average: the parameters (measuring
//     the consensus distance first) and the optimizer state, so that evaluations and
//     checkpoints see one model. It is the replicas' exact mean, never compressed.
// With a compressor (compress/compressor.h; after compress.warmup_steps steps of plain
// averages) step 3 sends each replica's change since the last average through it, as in
// Qsparse-local-SGD (Basu et al. 2019): every rank adds the same approximate mean change to the
// same last average (the anchor), so the replicas are again bit-identical; error feedback
// carries what a change lost into the next one. The optimizer state, when averaged, goes
// uncompressed. A reconcile delivers every replica's change whole, so it moves the anchor to
// the mean and leaves the compressor's state (residuals, PowerSGD's Q) alone; one for an
// evaluation moves nothing, since the replicas get their own parameters back after it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "distml/comm/communicator.h"
#include "distml/train/compress/compressor.h"
#include "distml/train/strategy.h"

namespace distml::train {

struct LocalSgdOptions {
  std::int64_t period = 8;  // H: steps between averages
  bool average_optimizer_state = false;
  compress::CompressOptions compress;
};

class LocalSgdStrategy final : public Strategy {
 public:
  LocalSgdStrategy(comm::Communicator& comm, LocalSgdOptions options = {});

  void setup(const nn::ModelTensors& model) override;
  void before_backward(bool /*sync*/) override {}
  void before_optimizer_step() override {}
  /// `step` counts the steps of local SGD: averages when step % period == 0.
  void after_optimizer_step(torch::optim::Optimizer& optimizer, std::int64_t step) override;
  void reconcile(torch::optim::Optimizer& optimizer) override;
  void reconcile_for_evaluation(torch::optim::Optimizer& optimizer) override;
  std::string save_state() override;
  void load_state(const std::string& state) override;
  void resumed_at(std::int64_t global_step) override;
  StrategyStats stats() const override { return stats_; }

 private:
  void average_what_drifted(torch::optim::Optimizer& optimizer);
  void average_parameters();
  void average_compressed();
  void average_optimizer_state(torch::optim::Optimizer& optimizer);

  comm::Communicator& comm_;
  LocalSgdOptions options_;
  std::vector<torch::Tensor> params_;
  bool params_apart_ = false;  // a local step since the parameters were last averaged
  bool state_apart_ = false;   // ... since the optimizer state was
  std::unique_ptr<compress::Compressor> compressor_;
  torch::Tensor anchor_;    // with a compressor: the last average, flat
  std::int64_t steps_ = 0;  // steps taken, counting those before a resume
  StrategyStats stats_;
};

}  // namespace distml::train
