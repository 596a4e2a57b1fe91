// The model a run trains, as every rank builds it: the same seed gives the same weights.
#pragma once

#include "distml/nn/model_registry.h"
#include "distml/train/config.h"
#include "distml/train/task_data.h"

namespace distml::train {

/// The configured model, completed from the data (classes, input shape, vocabulary), its
/// weights drawn from train.seed in float32 and converted to train.dtype. ConfigError when
/// model.layers does not fit the data. `built` hears of each layer as it is made, its
/// parameters already in train.dtype (nn::make_model says which models tell it).
nn::Model build_model(const TrainConfig& config, const TaskData& data,
                      const nn::LayerBuilt& built = {});

}  // namespace distml::train
