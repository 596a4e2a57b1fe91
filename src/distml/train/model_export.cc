#include "distml/train/model_export.h"

#include <sstream>

#include "distml/core/atomic_file.h"
#include "distml/train/checkpoint_file.h"

namespace distml::train {

void export_model(nn::Model& model, const std::string& weights_path,
                  const std::string& module_path) {
  if (!weights_path.empty()) {
    NamedTensors named;
    for (auto& p : model.named_parameters()) named.emplace_back(p.key(), p.value());
    for (auto& b : model.named_buffers()) named.emplace_back(b.key(), b.value());
    export_tensors(weights_path, named);
  }
  if (!module_path.empty()) {
    std::ostringstream out;
    model.train(false);
    model.save_script(out);
    model.train(true);
    write_file_atomically(module_path, {out.str()});
  }
}

}  // namespace distml::train
