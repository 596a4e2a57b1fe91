// Asynchronous EASGD against a direct reference: with one worker the exchanges happen in a
// known order, so worker and centre must follow the elastic update written out in tensor
// arithmetic; with several workers and alpha = 0 each worker is plain SGD on its own batches.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <mutex>

#include "distml/comm/local/local_world.h"
#include "distml/train/strategies/easgd_async_strategy.h"

namespace distml::train {
namespace {

constexpr int kSteps = 12, kPeriod = 3;

torch::nn::Linear seeded_net() {
  torch::manual_seed(5);
  return torch::nn::Linear(6, 3);
}

// The batch worker `w` sees at `step`.
std::pair<torch::Tensor, torch::Tensor> batch(int w, int step) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(100 * w + step);
  return {torch::randn({8, 6}, gen), torch::randint(0, 3, {8}, gen)};
}

void sgd_step(torch::nn::Linear& net, torch::optim::SGD& opt, int w, int step) {
  auto [x, y] = batch(w, step);
  opt.zero_grad();
  torch::nn::functional::cross_entropy(net->forward(x), y).backward();
}

std::vector<torch::Tensor> copy_of(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone());
  return out;
}

double max_abs_difference(const std::vector<torch::Tensor>& a,
                          const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  return worst;
}

struct Outcome {
  std::vector<torch::Tensor> before_reconcile, after_reconcile;
};

// Runs `workers` workers and the centre rank; returns each worker's parameters.
std::vector<Outcome> run(int workers, double alpha) {
  std::mutex mutex;
  std::vector<Outcome> out(workers);
  comm::local::run_ranks(workers + 1, {}, [&](comm::Communicator& comm) {
    torch::nn::Linear net = [&] {
      std::lock_guard lock(mutex);  // torch's generator is process-wide
      return seeded_net();
    }();
    AsyncEasgdStrategy strategy(comm, {.period = kPeriod, .alpha = alpha});
    strategy.setup(nn::tensors_of(*net));
    if (!strategy.trains()) {
      strategy.serve();
      return;
    }
    torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    for (int step = 1; step <= kSteps; ++step) {
      sgd_step(net, opt, comm.rank(), step);
      opt.step();
      strategy.after_optimizer_step(opt, step);
    }
    Outcome o;
    o.before_reconcile = copy_of(net->parameters());
    strategy.reconcile(opt);
    o.after_reconcile = copy_of(net->parameters());
    strategy.finish();
    std::lock_guard lock(mutex);
    out[comm.rank()] = std::move(o);
  });
  return out;
}

TEST(AsyncEasgd, OneWorkerFollowsTheElasticUpdate) {
  const double alpha = 0.3;
  auto ranks = run(1, alpha);
  auto net = seeded_net();
  auto params = net->parameters();
  auto centre = copy_of(params);
  torch::optim::SGD opt(params, torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 1; step <= kSteps; ++step) {
    sgd_step(net, opt, 0, step);
    opt.step();
    if (step % kPeriod != 0) continue;
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < params.size(); ++i) {
      auto d = alpha * (params[i] - centre[i]);
      centre[i] += d;
      params[i] -= d;
    }
  }
  EXPECT_LE(max_abs_difference(ranks[0].before_reconcile, copy_of(params)), 1e-6);
  EXPECT_LE(max_abs_difference(ranks[0].after_reconcile, centre), 1e-6);
}

TEST(AsyncEasgd, AlphaZeroIsIndependentSgdPerWorker) {
  auto ranks = run(3, 0.0);
  for (int w = 0; w < 3; ++w) {
    auto net = seeded_net();
    torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    for (int step = 1; step <= kSteps; ++step) {
      sgd_step(net, opt, w, step);
      opt.step();
    }
    EXPECT_EQ(max_abs_difference(ranks[w].before_reconcile, copy_of(net->parameters())), 0)
        << "worker " << w;
    // The centre never moved: reconcile brings back the start.
    EXPECT_EQ(max_abs_difference(ranks[w].after_reconcile, copy_of(seeded_net()->parameters())), 0)
        << "worker " << w;
  }
}

TEST(AsyncEasgd, WorkersAgreeAfterReconcile) {
  auto ranks = run(3, 0.2);
  for (int w = 1; w < 3; ++w)
    EXPECT_EQ(max_abs_difference(ranks[w].after_reconcile, ranks[0].after_reconcile), 0);
  EXPECT_GT(max_abs_difference(ranks[0].after_reconcile, copy_of(seeded_net()->parameters())), 0);
}

}  // namespace
}  // namespace distml::train
