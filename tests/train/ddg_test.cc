// Decoupled back-propagation (parallel.schedule = "ddg") against a single-process reference:
// plain SGD where stage s applies at step t the gradient of batch t - (S - 1 - s), taken at
// the weights that batch's forward met, and the batches still held are applied at the end.
// The mlp in float64 over 2 and 3 local stages, batches of varying size.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <mutex>

#include "distml/comm/local/local_world.h"
#include "distml/nn/model_registry.h"
#include "distml/train/pipeline/grid.h"
#include "distml/train/pipeline/pipeline_stage.h"

namespace distml::train::ddg_test {  // its own: unity builds merge anonymous namespaces
namespace {

constexpr double kLr = 0.2;
constexpr int kSteps = 7;

using Weights = std::vector<std::vector<torch::Tensor>>;  // per stage, its parameters

nn::Model make_mlp() {
  torch::manual_seed(21);
  auto model = nn::make_model({.name = "mlp", .mlp_layers = {12, 16, 16, 16, 4}});
  model.to(torch::kFloat64);
  return model;
}

struct Batch {
  torch::Tensor x, y;
};

std::vector<Batch> batches() {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(22);
  std::vector<Batch> out;
  for (int t = 0; t < kSteps; ++t) {
    const std::int64_t rows = 5 + t % 3;  // varying sizes: the shapes travel with the tensors
    out.push_back({torch::randn({rows, 12}, gen, torch::kFloat64), torch::arange(rows) % 4});
  }
  return out;
}

torch::Tensor loss_of(const torch::Tensor& out, const torch::Tensor& y) {
  return torch::nn::functional::cross_entropy(out, y);
}

std::vector<std::vector<torch::Tensor>> stage_parameters(const nn::Model& model, int stages) {
  std::vector<std::vector<torch::Tensor>> out;
  for (int s = 0; s < stages; ++s)
    out.push_back(pipeline::cut_model(model, {}, stages, s).own.parameters);
  return out;
}

Weights snapshot(const Weights& params) {
  Weights out;
  for (const auto& stage : params) {
    out.emplace_back();
    for (const auto& p : stage) out.back().push_back(p.detach().clone());
  }
  return out;
}

struct Reference {
  Weights final;
  std::vector<double> losses;  // each batch's at the weights its forward met
};

// The reference, on one process: `delayed` false gives plain SGD, to show the delays matter.
Reference reference(int stages, bool delayed) {
  auto model = make_mlp();
  const auto params = stage_parameters(model, stages);
  auto scratch = make_mlp();  // where a batch's gradient is taken at its weights
  const auto at = stage_parameters(scratch, stages);
  const auto data = batches();
  std::vector<Weights> met;  // the weights each batch's forward met
  Reference ref;
  auto gradient = [&](int b) {  // of batch b at the weights its forward met
    torch::NoGradGuard no_grad;
    for (int s = 0; s < stages; ++s)
      for (std::size_t i = 0; i < at[s].size(); ++i) {
        at[s][i].copy_(met[b][s][i]);
        at[s][i].mutable_grad() = torch::Tensor();
      }
    {
      torch::AutoGradMode grad(true);
      const auto loss = loss_of(scratch.forward(data[b].x), data[b].y);
      loss.backward();
    }
    Weights g;
    for (const auto& stage : at) {
      g.emplace_back();
      for (const auto& p : stage) g.back().push_back(p.grad().clone());
    }
    return g;
  };
  auto apply = [&](int s, int b) {
    torch::NoGradGuard no_grad;
    const auto g = gradient(b);
    for (std::size_t i = 0; i < params[s].size(); ++i) params[s][i].sub_(kLr * g[s][i]);
  };
  for (int t = 0; t < kSteps; ++t) {
    met.push_back(snapshot(params));
    {
      torch::NoGradGuard no_grad;
      ref.losses.push_back(loss_of(model.forward(data[t].x), data[t].y).item<double>());
    }
    for (int s = 0; s < stages; ++s) {
      const int delay = delayed ? stages - 1 - s : 0;
      if (t >= delay) apply(s, t - delay);
    }
  }
  for (int s = 0; s < stages; ++s)  // the end: the batches each stage still holds
    for (int b = kSteps - (delayed ? stages - 1 - s : 0); b < kSteps; ++b) apply(s, b);
  ref.final = snapshot(params);
  return ref;
}

// The ddg pipeline over `stages` local ranks, each updating by plain SGD after its backwards.
Reference pipelined(int stages) {
  const auto data = batches();
  std::vector<nn::Model> models;
  for (int s = 0; s < stages; ++s) models.push_back(make_mlp());
  Reference got;
  got.final.resize(stages);
  std::mutex mutex;
  comm::local::run_ranks(stages, {}, [&](comm::Communicator& comm) {
    const int s = comm.rank();
    const auto part = pipeline::cut_model(models[s], {}, stages, s);
    auto params = part.own.parameters;
    pipeline::PipelineStage stage(comm, part.layers, part.own,
                                  {.schedule = "ddg", .micro_batches = 1});
    auto update = [&] {
      torch::NoGradGuard no_grad;
      for (auto& p : params) {
        p.sub_(kLr * p.grad());
        p.mutable_grad().zero_();
      }
    };
    std::vector<double> losses;
    // Stage 0's batches arrive in one buffer, rewritten every step, as the data loader's do.
    auto buffer = torch::empty({8, 12}, torch::kFloat64);
    for (const auto& batch : data) {
      auto input = buffer.narrow(0, 0, batch.x.size(0));
      input.copy_(batch.x);
      losses.push_back(stage.step(
          s == 0 ? input : torch::Tensor(), batch.x.size(0),
          [&](const torch::Tensor& out, std::int64_t begin, std::int64_t count) {
            return loss_of(out, batch.y.narrow(0, begin, count));
          },
          [](bool) {}, update));
      // Stage s holds the batches of its last d + 1 steps, at most.
      EXPECT_LE(stage.stats().peak_micro_batches, stages - s) << "stage " << s;
    }
    stage.drain([](bool) {}, update);
    std::lock_guard lock(mutex);
    got.final[s] = snapshot({params})[0];
    if (s == stages - 1) got.losses = losses;
  });
  return got;
}

double largest_difference(const Weights& a, const Weights& b) {
  double most = 0;
  for (std::size_t s = 0; s < a.size(); ++s)
    for (std::size_t i = 0; i < a[s].size(); ++i)
      most = std::max(most, (a[s][i] - b[s][i]).abs().max().item<double>());
  return most;
}

TEST(Ddg, EqualsDelayedGradientSgdAtTheForwardsWeights) {
  for (int stages : {2, 3}) {
    const auto want = reference(stages, true);
    const auto got = pipelined(stages);
    // The same float64 operations in another grouping (the stages' pieces of autograd's
    // graph, against one graph): rounding of about 1e-16 per operation, over 7 steps of a few
    // hundred products per weight, stays below 1e-12 for weights of order 1. A batch applied
    // at the wrong step, or its gradient taken at other weights, moves them by lr x a
    // gradient: the plain-SGD check below measures that at above 1e-4.
    EXPECT_LT(largest_difference(got.final, want.final), 1e-12) << stages << " stages";
    ASSERT_EQ(got.losses.size(), want.losses.size());
    for (int t = 0; t < kSteps; ++t)
      EXPECT_NEAR(got.losses[t], want.losses[t], 1e-12) << stages << " stages, step " << t;
  }
}

TEST(Ddg, TheDelaysChangeTheTrajectory) {
  // So the comparison above can fail: without the delays the weights end elsewhere.
  for (int stages : {2, 3})
    EXPECT_GT(largest_difference(reference(stages, true).final, reference(stages, false).final),
              1e-4)
        << stages << " stages";
}

}  // namespace
}  // namespace distml::train::ddg_test
