// Your own LibTorch model, loss and data, trained data-parallel by any distml strategy.
//   distml launch -n 2 -- custom_loop local_sgd               (mpi)
//   distml launch -n 2 --engine gloo -- custom_loop zero
#include <torch/torch.h>

#include <cstdio>

#include "distml/comm/engines.h"
#include "distml/train/data_parallel.h"

// A model of one's own: a small MLP.
struct Net : torch::nn::Module {
  torch::nn::Linear hidden{register_module("hidden", torch::nn::Linear(2, 32))};
  torch::nn::Linear out{register_module("out", torch::nn::Linear(32, 2))};
  torch::Tensor forward(const torch::Tensor& x) { return out(torch::relu(hidden(x))); }
};

// Data of one's own: points in the square, class 1 inside the circle of area 1/2.
std::pair<torch::Tensor, torch::Tensor> points(int n) {
  auto x = torch::rand({n, 2}) * 2 - 1;
  auto y = (x.square().sum(1) < 2 / M_PI).to(torch::kInt64);
  return {x, y};
}

// A loss of one's own: cross-entropy with label smoothing, written out.
torch::Tensor smoothed_cross_entropy(const torch::Tensor& logits, const torch::Tensor& y) {
  auto target = torch::one_hot(y, 2).to(torch::kFloat) * 0.9 + 0.05;
  return -(target * torch::log_softmax(logits, 1)).sum(1).mean();
}

int main(int argc, char** argv) try {
  auto comm = distml::comm::connect();  // the engine and ranks `distml launch` set
  torch::manual_seed(0);
  auto net = std::make_shared<Net>();
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(0.2).momentum(0.9));
  distml::DataParallel dp(*net, optimizer, *comm,
                          {.name = argc > 1 ? argv[1] : "allreduce", .period = 4});
  if (!dp.trains()) {  // a parameter server's server rank
    dp.serve();
    return 0;
  }
  auto& ranks = dp.training_comm();
  torch::manual_seed(1 + ranks.rank());  // each rank its own shard of the data
  auto [x, y] = points(4000);
  for (int step = 0; step < 400; ++step) {
    auto batch = torch::randint(x.size(0), {32});
    optimizer.zero_grad();
    smoothed_cross_entropy(net->forward(x.index({batch})), y.index({batch})).backward();
    dp.step();
  }
  dp.finish();  // one model on every rank
  torch::manual_seed(99);
  auto [test_x, test_y] = points(2000);
  torch::NoGradGuard no_grad;
  const double accuracy =
      net->forward(test_x).argmax(1).eq(test_y).to(torch::kFloat).mean().item<double>();
  if (ranks.rank() == 0)
    std::printf("%s on %d ranks over %s: test accuracy %.3f\n", argc > 1 ? argv[1] : "allreduce",
                comm->size(), std::string(comm->engine_name()).c_str(), accuracy);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "custom_loop: %s\n", e.what());
  return 2;
}
