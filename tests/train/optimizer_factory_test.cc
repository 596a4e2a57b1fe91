#include "distml/train/optimizer_factory.h"

#include <gtest/gtest.h>

#include <cmath>

#include "distml/core/error.h"

namespace distml::train {
namespace {

std::vector<torch::Tensor> one_param() { return {torch::ones({3}, torch::requires_grad())}; }

TEST(MakeOptimizer, BuildsEachByNameWithItsOptions) {
  OptimizerOptions o;
  o.name = "sgd";
  o.lr = 0.5;
  o.momentum = 0.9;
  o.nesterov = true;
  auto sgd = make_optimizer(one_param(), o);
  auto& so = static_cast<torch::optim::SGDOptions&>(sgd->param_groups()[0].options());
  EXPECT_DOUBLE_EQ(so.lr(), 0.5);
  EXPECT_DOUBLE_EQ(so.momentum(), 0.9);
  EXPECT_TRUE(so.nesterov());
  o.name = "adamw";
  o.weight_decay = 0.01;
  auto adamw = make_optimizer(one_param(), o);
  EXPECT_NE(dynamic_cast<torch::optim::AdamW*>(adamw.get()), nullptr);
  o.name = "adam";
  EXPECT_NE(dynamic_cast<torch::optim::Adam*>(make_optimizer(one_param(), o).get()), nullptr);
}

TEST(MakeOptimizer, SgdStepFollowsItsFormula) {
  // One plain SGD step with weight decay: p -= lr * (g + wd * p).
  auto params = one_param();
  OptimizerOptions o;
  o.lr = 0.1;
  o.weight_decay = 0.5;
  auto opt = make_optimizer(params, o);
  params[0].mutable_grad() = torch::full({3}, 2.0);
  opt->step();
  EXPECT_NEAR(params[0][0].item<double>(), 1.0 - 0.1 * (2.0 + 0.5 * 1.0), 1e-7);
}

TEST(MakeOptimizer, BadNamesAndValuesAreConfigErrors) {
  OptimizerOptions o;
  o.name = "adagrad";
  try {
    make_optimizer(one_param(), o);
    ADD_FAILURE() << "accepted adagrad";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("valid: sgd, adam, adamw"), std::string::npos);
  }
  o.name = "sgd";
  o.lr = 0;
  EXPECT_THROW(make_optimizer(one_param(), o), ConfigError);
  o.lr = 0.1;
  o.nesterov = true;  // without momentum
  EXPECT_THROW(make_optimizer(one_param(), o), ConfigError);
}

TEST(ScheduledLr, WarmupIsLinearThenEachScheduleFollowsItsFormula) {
  ScheduleOptions s;
  s.warmup_steps = 4;
  EXPECT_DOUBLE_EQ(scheduled_lr(s, 1.0, 0), 0.25);
  EXPECT_DOUBLE_EQ(scheduled_lr(s, 1.0, 3), 1.0);
  EXPECT_DOUBLE_EQ(scheduled_lr(s, 1.0, 100), 1.0);  // constant
  s.name = "step";
  s.step_size = 10;
  s.gamma = 0.5;
  EXPECT_DOUBLE_EQ(scheduled_lr(s, 1.0, 4 + 9), 1.0);
  EXPECT_DOUBLE_EQ(scheduled_lr(s, 1.0, 4 + 10), 0.5);
  EXPECT_DOUBLE_EQ(scheduled_lr(s, 1.0, 4 + 25), 0.25);
  s.name = "cosine";
  s.total_steps = 104;
  s.min_lr = 0.1;
  EXPECT_DOUBLE_EQ(scheduled_lr(s, 1.0, 4), 1.0);
  EXPECT_NEAR(scheduled_lr(s, 1.0, 54), 0.55, 1e-12);  // half way: (1 + 0.1) / 2
  EXPECT_NEAR(scheduled_lr(s, 1.0, 104), 0.1, 1e-12);
  EXPECT_NEAR(scheduled_lr(s, 1.0, 500), 0.1, 1e-12);
  EXPECT_DOUBLE_EQ(linearly_scaled_lr(0.1, 4), 0.4);
}

TEST(ScheduledLr, BadSchedulesAreConfigErrors) {
  ScheduleOptions s;
  s.name = "exp";
  EXPECT_THROW(scheduled_lr(s, 1.0, 0), ConfigError);
  s.name = "cosine";
  s.total_steps = 0;
  EXPECT_THROW(scheduled_lr(s, 1.0, 0), ConfigError);
}

TEST(SetLr, ChangesEveryGroup) {
  OptimizerOptions o;
  auto opt = make_optimizer(one_param(), o);
  set_lr(*opt, 0.25);
  EXPECT_DOUBLE_EQ(opt->param_groups()[0].options().get_lr(), 0.25);
}

}  // namespace
}  // namespace distml::train
