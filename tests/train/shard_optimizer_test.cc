// A ZeRO shard's optimizer, stepped in chunks, against LibTorch's optimizer over the whole
// tensor: the same values and state after every step, and a saved state that a whole-tensor
// optimizer reads (so checkpoints do not depend on the chunks).
//
// Exact equality, not a tolerance: these optimizers update element by element with IEEE
// operations (add, multiply, divide, square root), so each element's result depends only on
// its own inputs and on the code path its kernel takes. The chunks are 64 elements long, a
// multiple of the widest vector loop's stride (2 x 8 doubles with AVX-512), so every element
// but the tensor's last few runs through the vector loop in both, and those last few through
// the scalar tail in both.
#include "distml/train/strategies/shard_optimizer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distml/train/strategies/replicas.h"

namespace distml::train {
namespace {

namespace optim = torch::optim;

constexpr std::int64_t kElements = 64 * 10 + 40;          // ten whole chunks and a part
constexpr std::size_t kChunkBytes = 64 * sizeof(double);  // 64 doubles

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(torch::Tensor)>;

struct Case {
  std::string name;
  MakeOptimizer make;
};

std::vector<Case> cases() {
  auto sgd = [](optim::SGDOptions o) {
    return [o](torch::Tensor p) { return std::make_unique<optim::SGD>(std::vector{p}, o); };
  };
  auto adam = [](optim::AdamOptions o) {
    return [o](torch::Tensor p) { return std::make_unique<optim::Adam>(std::vector{p}, o); };
  };
  auto adamw = [](optim::AdamWOptions o) {
    return [o](torch::Tensor p) { return std::make_unique<optim::AdamW>(std::vector{p}, o); };
  };
  return {
      {"sgd", sgd(optim::SGDOptions(0.1))},
      {"sgd momentum dampening decay",
       sgd(optim::SGDOptions(0.1).momentum(0.9).dampening(0.1).weight_decay(0.01))},
      {"sgd nesterov", sgd(optim::SGDOptions(0.1).momentum(0.9).nesterov(true))},
      {"adam", adam(optim::AdamOptions(0.01))},
      {"adam amsgrad decay", adam(optim::AdamOptions(0.01).amsgrad(true).weight_decay(0.01))},
      {"adamw", adamw(optim::AdamWOptions(0.01))},
      {"adamw amsgrad", adamw(optim::AdamWOptions(0.01).amsgrad(true))},
  };
}

// A leaf of kElements doubles with a gradient, as ZeRO's shard is.
torch::Tensor leaf(const torch::Tensor& values) {
  auto t = values.clone().requires_grad_(true);
  t.mutable_grad() = torch::zeros_like(values);
  return t;
}

void set_grad(torch::Tensor& t, const torch::Tensor& g) {
  torch::NoGradGuard no_grad;
  t.mutable_grad().copy_(g);
}

std::vector<torch::Tensor> state_of(optim::Optimizer& o) {
  std::vector<torch::Tensor> out;
  for (auto& [key, state] : o.state())
    for (auto* t : element_state(*state)) out.push_back(*t);
  return out;
}

TEST(ShardOptimizer, StepsInChunksAsTheWholeTensorWouldAndSavesAsItWould) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    torch::manual_seed(3);
    const auto start = torch::randn({kElements}, torch::kFloat64);
    auto whole = leaf(start), shard = leaf(start);
    auto reference = c.make(whole);
    ShardOptimizer chunked(*reference, shard, kChunkBytes);
    std::vector<torch::Tensor> grads;
    for (int step = 0; step < 4; ++step)
      grads.push_back(torch::randn({kElements}, torch::kFloat64));
    for (int step = 0; step < 2; ++step) {
      set_grad(whole, grads[step]);
      set_grad(shard, grads[step]);
      reference->step();
      chunked.step(*reference);
      ASSERT_TRUE(torch::equal(whole, shard)) << "step " << step;
    }
    // Saved as one optimizer over the whole tensor: LibTorch's own reads it...
    const std::string saved = chunked.save();
    auto plain_tensor = leaf(start);
    auto plain = c.make(plain_tensor);
    torch::serialize::InputArchive archive;
    archive.load_from(saved.data(), saved.size());
    plain->load(archive);
    const auto want = state_of(*reference), got = state_of(*plain);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t k = 0; k < want.size(); ++k) EXPECT_TRUE(torch::equal(got[k], want[k]));
    // ... and a shard optimizer of other chunks goes on from it as the whole one does.
    auto resumed_shard = leaf(shard.detach());
    ShardOptimizer resumed(*reference, resumed_shard, 3 * kChunkBytes);
    resumed.load(saved);
    for (int step = 2; step < 4; ++step) {
      set_grad(whole, grads[step]);
      set_grad(resumed_shard, grads[step]);
      reference->step();
      resumed.step(*reference);
      ASSERT_TRUE(torch::equal(whole, resumed_shard)) << "step " << step << " after loading";
    }
    EXPECT_EQ(resumed.state_bytes(), want.size() * kElements * sizeof(double));
  }
}

}  // namespace
}  // namespace distml::train
