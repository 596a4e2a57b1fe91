// train.precision = "bf16" against a serial reference that writes the mixed-precision
// arithmetic out by hand: each Linear's input, weight and bias cast to bfloat16 (what CPU
// autocast does to a linear), the product in bfloat16, the logits back to float32 for the loss;
// each replica's gradient (float32, through the casts' backward) averaged over the replicas;
// SGD with momentum on float32 weights.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "../data/temp_dir.h"
#include "distml/core/error.h"
#include "distml/data/permutation.h"
#include "distml/train/model_setup.h"
#include "trainer_fixture.h"

namespace distml::train::testing {
namespace {

constexpr int kBatch = 8, kSteps = 6;
constexpr std::size_t kRows = 256;  // no epoch ends within kSteps at 1-3 ranks

TrainConfig mixed_config(const std::string& precision) {
  TrainConfig c = config_for("mlp", "sgd", kBatch, kSteps);
  c.train.dtype = "float32";
  c.train.precision = precision;
  c.model.mlp_layers = {784, 32, 16, 10};
  c.strategy.first_bucket_mb = 0.001;  // several buckets
  return c;
}

// The reference's model after kSteps: parameters in module order (weight, bias per Linear),
// replica r of `world` taking the r-th block of each step's window of epoch 0's order. Each
// replica keeps its weights and momentum; with `period` 0 they step on the replicas' average
// gradient (synchronous SGD), else on their own, their weights averaged every `period` steps
// and at the end (local SGD).
// With `tensor` ranks the second Linear is row-parallel (the first, column-parallel, computes
// each output as the whole layer does): each rank's share of its input columns gives a partial
// product rounded to bfloat16, and the partials and the bias are summed in float32.
std::vector<torch::Tensor> reference(const TrainConfig& c, const TaskData& data, int world,
                                     const std::vector<torch::Tensor>& initial, bool bf16,
                                     int micro = 1, int tensor = 1, int period = 0) {
  const auto x = torch::from_blob(const_cast<float*>(data.train.features.data()),
                                  {static_cast<std::int64_t>(kRows), 784}, torch::kFloat32);
  const auto y = torch::tensor(data.train.labels, torch::kLong);
  const auto order = data::shuffled_permutation(kRows, c.train.seed, 0);
  const auto low = [&](const torch::Tensor& t) { return bf16 ? t.to(torch::kBFloat16) : t; };
  const std::size_t n = initial.size();
  std::vector<std::vector<torch::Tensor>> params(world), momentum(world), grad(world);
  for (auto& replica : params)
    for (const auto& p : initial) replica.push_back(p.clone().set_requires_grad(true));
  const auto average = [&](auto&& of) {  // over the replicas, in rank order, in float32
    std::vector<torch::Tensor> mean;
    for (std::size_t i = 0; i < n; ++i) {
      auto sum = of(0)[i].detach().clone();
      for (int r = 1; r < world; ++r) sum = sum + of(r)[i].detach();
      mean.push_back(sum / world);
    }
    return mean;
  };
  for (int t = 0; t < kSteps; ++t) {
    for (int r = 0; r < world; ++r) {
      grad[r].assign(n, torch::Tensor());
      // A pipeline's micro-batches: each one's mean loss weighted by its share of the rows, its
      // gradient (rounded to bfloat16 in the casts' backward) added in float32.
      for (int m = 0; m < micro; ++m) {
        const auto& w = params[r];
        std::vector<std::int64_t> rows;
        for (int i = m * kBatch / micro; i < (m + 1) * kBatch / micro; ++i)
          rows.push_back(static_cast<std::int64_t>(order[(t * world + r) * kBatch + i]));
        auto h = x.index_select(0, torch::tensor(rows));
        for (std::size_t l = 0; l < n; l += 2) {
          if (l == 2 && tensor > 1) {
            const auto width = h.size(1) / tensor;
            torch::Tensor summed = w[l + 1];
            for (int k = 0; k < tensor; ++k)
              summed = summed + torch::linear(low(h.narrow(1, k * width, width)),
                                              low(w[l].narrow(1, k * width, width)))
                                    .to(torch::kFloat32);
            h = summed;
          } else {
            h = torch::linear(low(h), low(w[l]), low(w[l + 1]));
          }
          if (l + 2 < n) h = torch::relu(h);
        }
        const auto loss = torch::nn::functional::cross_entropy(
                              h.to(torch::kFloat32), y.index_select(0, torch::tensor(rows))) /
                          micro;
        const auto grads = torch::autograd::grad({loss}, w);
        for (std::size_t i = 0; i < n; ++i)
          grad[r][i] = grad[r][i].defined() ? grad[r][i] + grads[i] : grads[i].clone();
      }
    }
    torch::NoGradGuard no_grad;
    const auto mean_grad = average([&](int r) { return grad[r]; });
    for (int r = 0; r < world; ++r) {
      momentum[r].resize(n);
      for (std::size_t i = 0; i < n; ++i) {
        const auto& g = period > 0 ? grad[r][i] : mean_grad[i];
        momentum[r][i] = t == 0 ? g.clone() : momentum[r][i] * c.optim.momentum + g;
        params[r][i].sub_(momentum[r][i] * c.optim.lr);
      }
    }
    if (period > 0 && (t + 1) % period == 0) {
      const auto mean = average([&](int r) { return params[r]; });
      for (auto& replica : params)
        for (std::size_t i = 0; i < n; ++i) replica[i].copy_(mean[i]);
    }
  }
  return average([&](int r) { return params[r]; });
}

double apart(const RankOutcome& got, const std::vector<torch::Tensor>& want) {
  RankOutcome w{got.result, got.initial, want};
  return trajectory_difference(got, w);
}

// The strategies whose step is synchronous SGD on the replicas' averaged gradient (one
// reference stands for them all; a parameter server's last rank serves, the others train), and
// local SGD.
struct Case {
  std::string strategy;
  int stage, world;
  bool resume = false;  // kSteps / 2 steps into a checkpoint, then resumed to kSteps
  // false: LibTorch's own bfloat16 kernels instead of oneDNN's, the path it takes on a CPU
  // without AVX-512 (whatever this one has)
  bool mkldnn = true;
  int stages = 1;  // > 1: a pipeline of 2 micro-batches, each replica's stages on ranks
  std::string schedule = "1f1b";
  int tensor = 1;           // > 1: the first two Linear layers split over that many tensor ranks
  bool by_profile = false;  // parallel.partition = "profile": layers measured in bfloat16
  int replicas() const { return strategy == "ps" ? world - 1 : world / stages / tensor; }
};

std::string case_name(const Case& c) {
  return c.strategy + (c.stage > 0 ? std::to_string(c.stage) : "") + "_np" +
         std::to_string(c.world) + (c.resume ? "_resumed" : "") +
         (c.mkldnn ? "" : "_without_onednn") +
         (c.stages > 1 ? "_" + std::to_string(c.stages) + "_stages_" + c.schedule : "") +
         (c.by_profile ? "_by_profile" : "") +
         (c.tensor > 1 ? "_tensor" + std::to_string(c.tensor) : "");
}

void PrintTo(const Case& c, std::ostream* os) { *os << case_name(c); }

class Bf16 : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    torch::set_num_threads(1);
    at::globalContext().setUserEnabledMkldnn(GetParam().mkldnn);
  }
  void TearDown() override { at::globalContext().setUserEnabledMkldnn(true); }
};

TEST_P(Bf16, FollowsTheSerialMixedPrecisionReference) {
  const Case& k = GetParam();
  const auto data = synthetic_images(kRows);
  auto c = mixed_config("bf16");
  c.strategy.name = k.strategy;
  if (k.stage > 0) c.strategy.stage = k.stage;
  c.strategy.period = 2;  // local_sgd: averages mid-run (after steps 2 and 4) and at the end
  c.parallel.tensor = k.tensor;
  if (k.stages > 1 && k.tensor > 1) c.parallel.partition = {2, 1};  // the split pair on stage 0
  const int micro = k.stages > 1 ? 2 : 1;
  if (k.stages > 1) {
    c.parallel.pipeline_stages = k.stages;
    c.parallel.micro_batches = micro;
    c.parallel.schedule = k.schedule;
    c.parallel.partition_by_profile = k.by_profile;
  }
  data::testing::TempDir dir;
  std::string resume_from;
  if (k.resume) {
    c.train.checkpoint_dir = resume_from = dir.file("ckpt");
    auto first = c;
    first.train.max_steps = kSteps / 2;
    on_ranks(k.world, [&](comm::Communicator& comm) { return train_once(first, comm, data); });
  }
  auto got = on_ranks(
      k.world, [&](comm::Communicator& comm) { return train_once(c, comm, data, resume_from); })[0];
  // The whole model before the first step (a resumed run's and a pipeline stage's own initial
  // tensors are not it), as every rank builds it.
  got.initial.clear();
  for (const auto& p : build_model(c, data).parameters()) got.initial.push_back(p.detach());
  for (const auto& p : got.params) ASSERT_EQ(p.scalar_type(), torch::kFloat32);  // master weights
  const int period = k.strategy == "local_sgd" ? static_cast<int>(c.strategy.period) : 0;
  const double to_bf16 =
      apart(got, reference(c, data, k.replicas(), got.initial, true, micro, k.tensor, period));
  const double to_fp32 =
      apart(got, reference(c, data, k.replicas(), got.initial, false, micro, k.tensor, period));
  // The bound. Trainer and reference make the same LibTorch calls on the same shapes, so their
  // bfloat16 products agree on any CPU; what differs is float32 rounding in the update's and
  // the average's order of operations (2^-24 ~ 6e-8 of a weight, a few times per step). Over
  // kSteps, measured against the distance the weights travelled (about 1/30 of their size
  // here), that is ~1e-5. Such a difference can, rarely, move a later bfloat16 cast to the
  // neighbouring value (2^-8 of one weight, one term of a product of hundreds), far below 1e-3
  // of the travel. Training the forward in float32 instead lands 0.1-0.4 away, and a loss
  // taken on the bfloat16 logits 0.13-0.32 away (measured).
  EXPECT_LE(to_bf16, 1e-3) << "(from the float32 reference " << to_fp32 << ")";
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, Bf16,
    ::testing::Values(Case{"allreduce", 0, 1}, Case{"allreduce", 0, 2}, Case{"allreduce", 0, 3},
                      Case{"zero", 1, 2}, Case{"zero", 2, 3}, Case{"ps", 0, 2}, Case{"ps", 0, 3},
                      Case{"allreduce", 0, 2, true}, Case{"zero", 2, 3, true},
                      Case{"allreduce", 0, 3, false, false},
                      Case{"allreduce", 0, 2, false, true, 2, "gpipe"},
                      Case{"allreduce", 0, 4, false, true, 2, "1f1b"},
                      Case{"zero", 2, 4, false, true, 2, "1f1b"},
                      Case{"allreduce", 0, 2, false, true, 2, "1f1b", 1, true},
                      Case{"allreduce", 0, 2, false, true, 1, "1f1b", 2},
                      Case{"zero", 1, 4, false, true, 1, "1f1b", 2},
                      Case{"allreduce", 0, 4, false, true, 2, "1f1b", 2}, Case{"local_sgd", 0, 3},
                      Case{"local_sgd", 0, 4, false, true, 2, "1f1b"}),
    [](const ::testing::TestParamInfo<Case>& info) { return case_name(info.param); });

// The convolutional models (LeNet-5; ResNet-20, whose batch norms then take bfloat16 inputs
// with float32 weights and statistics) train under bf16 too: float32 weights that end
// elsewhere than float32's.
TEST(Bf16Models, ConvolutionalModelsTrainWithFloat32Weights) {
  torch::set_num_threads(1);
  const auto data = synthetic_images(64);
  for (bool mkldnn : {true, false})  // oneDNN's kernels, and LibTorch's own (Case::mkldnn)
    for (const char* model : {"lenet5", "resnet20"}) {
      at::globalContext().setUserEnabledMkldnn(mkldnn);
      auto c = mixed_config("bf16");
      c.model.name = model;
      c.train.max_steps = 2;
      c.optim.lr = 0.1;
      std::vector<RankOutcome> runs;
      for (const char* precision : {"bf16", "fp32"}) {
        c.train.precision = precision;
        runs.push_back(
            on_ranks(2, [&](comm::Communicator& comm) { return train_once(c, comm, data); })[0]);
      }
      at::globalContext().setUserEnabledMkldnn(true);
      for (const auto& p : runs[0].params) ASSERT_EQ(p.scalar_type(), torch::kFloat32) << model;
      EXPECT_TRUE(std::isfinite(runs[0].result.test.loss)) << model << " " << mkldnn;
      EXPECT_GT(trajectory_difference(runs[0], runs[1]), 1e-3) << model << " " << mkldnn;
    }
}

}  // namespace
}  // namespace distml::train::testing
