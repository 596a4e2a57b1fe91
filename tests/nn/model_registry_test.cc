#include "distml/nn/model_registry.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "distml/core/error.h"

namespace distml::nn {
namespace {

// Small enough that every model builds and runs a step in milliseconds.
ModelOptions small_options(const std::string& name) {
  ModelOptions o{.name = name};
  if (name == "mlp") o.mlp_layers = {784, 32, 10};
  if (name == "char_lstm") {
    o.vocab_size = 50;
    o.embedding_dim = 16;
    o.hidden_size = 32;
    o.lstm_layers = 2;
  }
  if (name == "fasttext") {
    o.vocab_size = 50;
    o.embedding_dim = 8;
  }
  return o;
}

torch::Tensor sample_input(const std::string& name) {
  if (name == "char_lstm" || name == "fasttext")
    return torch::randint(0, 50, {3, 7}, torch::kInt64);
  return torch::randn({4, 1, 28, 28});
}

int64_t parameter_count(const Model& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

class EveryModel : public testing::TestWithParam<std::string> {};

TEST_P(EveryModel, BackwardGivesAGradientForEveryParameter) {
  torch::manual_seed(1);
  Model m = make_model(small_options(GetParam()));
  m.forward(sample_input(GetParam())).square().mean().backward();
  for (const auto& p : m.named_parameters()) {
    const auto& grad = p.value().grad();
    ASSERT_TRUE(grad.defined()) << p.key();
    EXPECT_TRUE((grad.is_sparse() ? grad.to_dense() : grad).isfinite().all().item<bool>())
        << p.key();
  }
}

TEST_P(EveryModel, SameSeedBuildsIdenticalWeights) {
  torch::manual_seed(42);
  Model a = make_model(small_options(GetParam()));
  torch::manual_seed(42);
  Model b = make_model(small_options(GetParam()));
  torch::manual_seed(43);
  Model c = make_model(small_options(GetParam()));
  const auto pa = a.named_parameters(), pb = b.named_parameters(), pc = c.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  bool any_differs = false;
  for (std::size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].key(), pb[i].key());
    EXPECT_TRUE(torch::equal(pa[i].value(), pb[i].value())) << pa[i].key();
    any_differs = any_differs || !torch::equal(pa[i].value(), pc[i].value());
  }
  EXPECT_TRUE(any_differs) << "another seed should give other weights";
}

// The built-in models (a TorchScript model is the user's file: tests/user_models).
std::vector<std::string> built_in_models() {
  auto names = model_names();
  std::erase(names, "torchscript");
  return names;
}

INSTANTIATE_TEST_SUITE_P(ModelZoo, EveryModel, testing::ValuesIn(built_in_models()),
                         [](const auto& info) { return info.param; });

TEST(ModelRegistry, UnknownNameIsAConfigErrorListingValidNames) {
  try {
    make_model(ModelOptions{.name = "vgg16"});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("vgg16"), std::string::npos) << what;
    EXPECT_NE(what.find("mlp, lenet5, resnet20, char_lstm"), std::string::npos) << what;
  }
}

TEST(ModelRegistry, BadOptionsAreConfigErrors) {
  EXPECT_THROW(make_model(ModelOptions{.name = "mlp", .mlp_layers = {784}}), ConfigError);
  EXPECT_THROW(make_model(ModelOptions{.name = "mlp", .mlp_layers = {784, 0, 10}}), ConfigError);
  EXPECT_THROW(make_model(ModelOptions{.name = "char_lstm"}), ConfigError);  // vocab_size 0
  EXPECT_THROW(make_model(ModelOptions{.name = "lenet5", .image_size = 8}), ConfigError);
  EXPECT_THROW(make_model(ModelOptions{.name = "resnet20", .num_classes = 0}), ConfigError);
}

TEST(Mlp, DefaultLayersHaveTheHandCountedParameters) {
  // 784*1024+1024 + 1024*512+512 + 512*10+10 = 803,840 + 524,800 + 5,130 = 1,333,770.
  Model m = make_model(ModelOptions{.name = "mlp"});
  EXPECT_EQ(parameter_count(m), 1'333'770);
  EXPECT_EQ(m.named_parameters().size(), 6u);  // a weight and a bias per Linear
}

TEST(Mlp, FlattensImagesAndReturnsLogitsPerClass) {
  Model m = make_model(ModelOptions{.name = "mlp"});
  EXPECT_EQ(m.forward(torch::randn({5, 1, 28, 28})).sizes(), (std::vector<int64_t>{5, 10}));
  EXPECT_EQ(m.forward(torch::randn({5, 784})).sizes(), (std::vector<int64_t>{5, 10}));
}

TEST(LeNet5, HasTheHandCountedParameters) {
  // conv1 1*6*25+6 = 156; conv2 6*16*25+16 = 2,416; fc1 400*120+120 = 48,120;
  // fc2 120*84+84 = 10,164; fc3 84*10+10 = 850. Total 61,706.
  EXPECT_EQ(parameter_count(make_model(ModelOptions{.name = "lenet5"})), 61'706);
}

TEST(LeNet5, AcceptsImageAndFlattenedBatches) {
  Model m = make_model(ModelOptions{.name = "lenet5"});
  EXPECT_EQ(m.forward(torch::randn({3, 1, 28, 28})).sizes(), (std::vector<int64_t>{3, 10}));
  EXPECT_EQ(m.forward(torch::randn({3, 784})).sizes(), (std::vector<int64_t>{3, 10}));
}

TEST(LeNet5, SizesTheFirstFullyConnectedLayerFromTheImage) {
  // 32x32x3: 32 -> pool 16 -> conv 12 -> pool 6, so fc1 sees 16*6*6 = 576 inputs.
  Model m = make_model(
      ModelOptions{.name = "lenet5", .in_channels = 3, .image_size = 32, .num_classes = 7});
  EXPECT_EQ(m.named_parameters()["fc1.weight"].sizes(), (std::vector<int64_t>{120, 576}));
  EXPECT_EQ(m.forward(torch::randn({2, 3, 32, 32})).sizes(), (std::vector<int64_t>{2, 7}));
}

TEST(ResNet20, HasTheHandCountedParameters) {
  // Option-A shortcuts have no parameters. 3x3 convs have no bias; each BN has 2*channels.
  // stem: conv 1*16*9 = 144, bn 32                                         ->     176
  // stage 1: 3 blocks * (2*16*16*9 + 2*32)                                 ->  14,016
  // stage 2: (16*32*9 + 32*32*9 + 128) + 2 * (2*32*32*9 + 128)             ->  51,072
  // stage 3: (32*64*9 + 64*64*9 + 256) + 2 * (2*64*64*9 + 256)             -> 203,520
  // fc: 64*10+10                                                           ->     650
  // Total 269,434 (with a 3-channel stem, 269,722: the paper's "0.27M").
  EXPECT_EQ(parameter_count(make_model(ModelOptions{.name = "resnet20"})), 269'434);
  EXPECT_EQ(parameter_count(make_model(ModelOptions{.name = "resnet20", .in_channels = 3})),
            269'722);
}

TEST(ResNet20, ReturnsLogitsForMnistAndCifarSizedImages) {
  Model m = make_model(ModelOptions{.name = "resnet20"});
  EXPECT_EQ(m.forward(torch::randn({2, 1, 28, 28})).sizes(), (std::vector<int64_t>{2, 10}));
  EXPECT_EQ(m.forward(torch::randn({2, 784})).sizes(), (std::vector<int64_t>{2, 10}));
  Model cifar = make_model(ModelOptions{.name = "resnet20", .in_channels = 3, .image_size = 32});
  EXPECT_EQ(cifar.forward(torch::randn({2, 3, 32, 32})).sizes(), (std::vector<int64_t>{2, 10}));
}

TEST(ResNet20, BatchNormRunningStatisticsAreBuffersThatTrainingUpdates) {
  Model m = make_model(ModelOptions{.name = "resnet20"});
  const auto buffers = m.named_buffers();
  // 19 BatchNorms (stem + 9 blocks * 2), each with running_mean, running_var, num_batches_tracked.
  EXPECT_EQ(buffers.size(), 19u * 3);
  ASSERT_NE(buffers.find("bn1.running_mean"), nullptr);
  ASSERT_NE(buffers.find("layer3.2.bn2.running_var"), nullptr);
  const torch::Tensor before = buffers["bn1.running_mean"].clone();
  m.train();
  m.forward(torch::randn({4, 1, 28, 28}) + 1.0);
  EXPECT_FALSE(torch::equal(before, m.named_buffers()["bn1.running_mean"]));
}

TEST(CharLstm, HasTheHandCountedParameters) {
  // vocab 50, embedding 16, hidden 32, 2 layers:
  // embedding 50*16 = 800; LSTM layer 0: 4*32*(16+32) + 2*4*32 = 6,400;
  // layer 1: 4*32*(32+32) + 2*4*32 = 8,448; decoder 32*50+50 = 1,650. Total 17,298.
  EXPECT_EQ(parameter_count(make_model(small_options("char_lstm"))), 17'298);
}

TEST(CharLstm, ReturnsLogitsPerTokenOverTheVocabulary) {
  Model m = make_model(small_options("char_lstm"));
  EXPECT_EQ(m.forward(torch::randint(0, 50, {3, 7}, torch::kInt64)).sizes(),
            (std::vector<int64_t>{3, 7, 50}));
}

}  // namespace
}  // namespace distml::nn
