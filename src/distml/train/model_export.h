// What a finished run leaves for use outside distml.
#pragma once

#include <string>

#include "distml/nn/model_registry.h"

namespace distml::train {

/// Writes the parameters and buffers of `model` by name to `weights_path` (export_tensors(),
/// loadable by torch.load), unless it is empty; and the module itself in evaluation mode to
/// `module_path` (a TorchScript model only), unless it is empty, so that torch.jit.load
/// predicts as distml's evaluation did. Both files are replaced atomically.
void export_model(nn::Model& model, const std::string& weights_path,
                  const std::string& module_path);

}  // namespace distml::train
