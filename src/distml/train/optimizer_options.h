// What an optimizer is, by name and hyper-parameters (optimizer_factory.h builds it), without
// torch: the parameter server's options carry it to callers that do not include torch.
#pragma once

#include <string>

namespace distml::train {

struct OptimizerOptions {
  std::string name = "sgd";  // sgd | adam | adamw
  double lr = 0.01;
  double momentum = 0.0;  // sgd
  bool nesterov = false;  // sgd; needs momentum > 0
  double weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam, adamw
};

}  // namespace distml::train
