// The pipeline's reference check, shared by the built-in and the TorchScript models: one step
// of a pipeline over local ranks must leave in each stage's parameters the gradient that the
// whole model gets from the same batch in one process.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "distml/comm/local/local_world.h"
#include "distml/nn/model_registry.h"
#include "distml/train/pipeline/grid.h"
#include "distml/train/pipeline/pipeline_stage.h"

namespace distml::train::testing {

struct PipelineCase {
  std::string schedule;
  int stages = 2, micro_batches = 4;
  bool recompute = false;
};

// Float64 throughout. The pipeline computes the same products as the reference, grouped by
// micro-batch and stage; regrouping a sum of n terms changes it by about n ulps of its
// magnitude. With n below 1e4 (the widest fan-in times the rows) that is about 1e-12 of the
// largest gradient; 1e-10 leaves a factor 100 for cancellation, and a wrong micro-batch weight
// or a missed backward is off by 1e-2 or more.
inline constexpr double kPipelineTolerance = 1e-10;

// Every schedule at 2, 3 and 4 stages, with 4 and 5 micro-batches (of 12 rows: divided evenly,
// and not).
inline std::vector<PipelineCase> pipeline_cases() {
  std::vector<PipelineCase> cases;
  for (int stages : {2, 3, 4})
    for (int micro : {4, 5})  // 12 rows: divided evenly, and not
      for (const auto& [schedule, recompute] : std::vector<std::pair<std::string, bool>>{
               {"gpipe", false}, {"1f1b", false}, {"gpipe", true}})
        cases.push_back({schedule, stages, micro, recompute});
  return cases;
}

inline std::string describe(const PipelineCase& c) {
  return c.schedule + (c.recompute ? "+recompute" : "") + " stages " + std::to_string(c.stages) +
         " micro-batches " + std::to_string(c.micro_batches);
}

using Named = std::map<std::string, torch::Tensor>;

struct StepResult {
  Named grads, buffers;  // by name; a stage reports only its own
  double loss = 0;
};

// The rows of micro-batch i of `micro` over `rows` rows, as PipelineStage cuts them.
inline std::pair<std::int64_t, std::int64_t> micro_rows(std::int64_t rows, int micro, int i) {
  const std::int64_t begin = i * (rows / micro) + std::min<std::int64_t>(i, rows % micro);
  return {begin, rows / micro + (i < rows % micro ? 1 : 0)};
}

inline torch::Tensor mean_cross_entropy(const torch::Tensor& out, const torch::Tensor& y) {
  return torch::nn::functional::cross_entropy(out, y);
}

// One process, the whole model: the batch in `micro` micro-batches (1: whole), each one's mean
// loss weighted by its share of the rows.
inline StepResult reference_step(nn::Model model, const torch::Tensor& x, const torch::Tensor& y,
                                 int micro) {
  const auto rows = x.size(0);
  StepResult r;
  for (int i = 0; i < micro; ++i) {
    const auto [begin, count] = micro_rows(rows, micro, i);
    auto loss =
        mean_cross_entropy(model.forward(x.narrow(0, begin, count)), y.narrow(0, begin, count)) *
        (static_cast<double>(count) / rows);
    loss.backward();
    r.loss += loss.item<double>();
  }
  for (const auto& p : model.named_parameters()) r.grads[p.key()] = p.value().grad().clone();
  for (const auto& b : model.named_buffers()) r.buffers[b.key()] = b.value().clone();
  return r;
}

// One step of the pipeline; `models` holds one identical model per stage (built beforehand,
// as the process-wide generator must not be drawn from by several rank threads at once).
inline std::vector<StepResult> pipeline_step(std::vector<nn::Model>& models, const torch::Tensor& x,
                                             const torch::Tensor& y, const PipelineCase& c) {
  std::vector<StepResult> out(c.stages);
  std::mutex mutex;
  comm::CommOptions options;
  options.timeout = std::chrono::seconds(60);  // a stage that failed ends its neighbours' waits
  comm::local::run_ranks(c.stages, options, [&](comm::Communicator& comm) {
    try {
      auto& model = models[comm.rank()];
      const auto part = pipeline::cut_model(model, {}, c.stages, comm.rank());
      const auto& tensors = part.own;
      pipeline::PipelineStage stage(
          comm, part.layers, tensors,
          {.schedule = c.schedule, .micro_batches = c.micro_batches, .recompute = c.recompute});
      const double loss = stage.step(
          x, x.size(0),
          [&](const torch::Tensor& o, std::int64_t begin, std::int64_t count) {
            return mean_cross_entropy(o, y.narrow(0, begin, count));
          },
          [](bool) {});
      StepResult r;
      r.loss = loss;
      for (std::size_t i = 0; i < tensors.parameters.size(); ++i)
        r.grads[tensors.parameter_names[i]] = tensors.parameters[i].grad();
      for (std::size_t i = 0; i < tensors.buffers.size(); ++i)
        r.buffers[tensors.buffer_names[i]] = tensors.buffers[i];
      // Parameters of other stages stay untouched.
      for (const auto& p : model.named_parameters()) {
        if (!r.grads.count(p.key())) {
          EXPECT_FALSE(p.value().grad().defined())
              << p.key() << " got a gradient on stage " << comm.rank();
        }
      }
      std::lock_guard lock(mutex);
      out[comm.rank()] = r;
    } catch (const std::exception& e) {  // the first failure, before its neighbours time out
      ADD_FAILURE() << describe(c) << ": stage " << comm.rank() << ": " << e.what();
      throw;
    }
  });
  return out;
}

// Every stage's gradients and buffers against the reference, within `tolerance` of the
// largest reference gradient; every parameter covered by exactly one stage.
inline void expect_pipeline_matches(const std::function<nn::Model()>& make, const torch::Tensor& x,
                                    const torch::Tensor& y, const PipelineCase& c,
                                    int reference_micro, double tolerance) {
  const auto want = reference_step(make(), x, y, reference_micro);
  std::vector<nn::Model> models;
  for (int s = 0; s < c.stages; ++s) models.push_back(make());
  const auto got = pipeline_step(models, x, y, c);
  double scale = 0;
  for (const auto& [name, g] : want.grads) scale = std::max(scale, g.abs().max().item<double>());
  std::size_t covered = 0;
  for (int s = 0; s < c.stages; ++s) {
    if (s == c.stages - 1)  // the loss is the last stage's; the others return 0
      EXPECT_NEAR(got[s].loss, want.loss, tolerance * std::abs(want.loss)) << describe(c);
    else
      EXPECT_EQ(got[s].loss, 0.0) << describe(c);
    for (const auto& [name, g] : got[s].grads) {
      ++covered;
      ASSERT_TRUE(g.defined()) << describe(c) << ": " << name << " got no gradient";
      EXPECT_LE((g - want.grads.at(name)).abs().max().item<double>(), tolerance * scale)
          << describe(c) << ": gradient of " << name;
    }
    for (const auto& [name, b] : got[s].buffers)
      EXPECT_LE((b.to(torch::kFloat64) - want.buffers.at(name).to(torch::kFloat64))
                    .abs()
                    .max()
                    .item<double>(),
                tolerance * std::max(1.0, want.buffers.at(name).abs().max().item<double>()))
          << describe(c) << ": buffer " << name;
  }
  EXPECT_EQ(covered, want.grads.size()) << describe(c);
}

}  // namespace distml::train::testing
