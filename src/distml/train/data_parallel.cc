#include "distml/train/data_parallel.h"

#include "distml/train/strategies/replicas.h"
#include "distml/train/strategy_factory.h"

namespace distml {
namespace {

// The optimizer the loop built, as options: what a parameter server's servers apply, and what
// the hybrid checks its row update against.
train::OptimizerOptions options_of(torch::optim::Optimizer& optimizer,
                                   const std::string& strategy) {
  train::OptimizerOptions o;
  auto& group = optimizer.param_groups().at(0).options();
  if (auto* sgd = dynamic_cast<torch::optim::SGDOptions*>(&group)) {
    o = {.name = "sgd",
         .lr = sgd->lr(),
         .momentum = sgd->momentum(),
         .nesterov = sgd->nesterov(),
         .weight_decay = sgd->weight_decay()};
  } else if (auto* adam = dynamic_cast<torch::optim::AdamOptions*>(&group)) {
    o = {.name = "adam",
         .lr = adam->lr(),
         .weight_decay = adam->weight_decay(),
         .beta1 = std::get<0>(adam->betas()),
         .beta2 = std::get<1>(adam->betas()),
         .eps = adam->eps()};
  } else if (auto* adamw = dynamic_cast<torch::optim::AdamWOptions*>(&group)) {
    o = {.name = "adamw",
         .lr = adamw->lr(),
         .weight_decay = adamw->weight_decay(),
         .beta1 = std::get<0>(adamw->betas()),
         .beta2 = std::get<1>(adamw->betas()),
         .eps = adamw->eps()};
  } else {
    throw ConfigError(
        cat("DataParallel with strategy ", strategy,
            " needs an SGD, Adam or AdamW optimizer; this optimizer is none of them"));
  }
  return o;
}

std::unique_ptr<train::Strategy> strategy_for(const train::StrategyConfig& strategy,
                                              torch::optim::Optimizer& optimizer,
                                              comm::Communicator& comm) {
  train::TrainConfig config;
  config.source = "DataParallel";
  config.strategy = strategy;
  if (strategy.name == "ps" || strategy.name == "hybrid")
    config.optim = options_of(optimizer, strategy.name);
  if (strategy.name == "zero" && strategy.stage == 3)
    throw ConfigError(
        "DataParallel with strategy zero stage 3: stage 3 runs the model's forward layer by layer "
        "to gather each layer's parameters, which a loop of one's own does not hand over; use "
        "stage 1 or 2, or distml train");
  return train::make_strategy(config, comm);
}

}  // namespace

DataParallel::DataParallel(const torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                           comm::Communicator& comm, const train::StrategyConfig& strategy)
    : DataParallel(nn::tensors_of(model), optimizer, comm, strategy) {}

DataParallel::DataParallel(const nn::ModelTensors& model, torch::optim::Optimizer& optimizer,
                           comm::Communicator& comm, const train::StrategyConfig& strategy)
    : strategy_(strategy_for(strategy, optimizer, comm)),
      optimizer_(optimizer),
      training_comm_(strategy_->training_comm() ? *strategy_->training_comm() : comm),
      parameters_(model.parameters),
      buffers_(model.buffers) {
  strategy_->setup(model);
  if (trains()) sync();
}

DataParallel::~DataParallel() = default;

void DataParallel::step(double clip_grad_norm) {
  strategy_->before_optimizer_step();
  if (clip_grad_norm > 0) strategy_->clip_gradients(clip_grad_norm, parameters_);
  strategy_->optimizer_step(optimizer_);
  strategy_->after_optimizer_step(optimizer_, ++steps_);
  sync();
}

void DataParallel::synchronize() {
  strategy_->reconcile(optimizer_);
  train::agree_on_buffers(buffers_, training_comm_);
}

void DataParallel::finish() {
  synchronize();
  strategy_->finish();
}

}  // namespace distml
