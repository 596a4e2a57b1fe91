// The compressor names beside the options that choose one: the config reads them without
// linking the compressors (and LibTorch).
#include "distml/train/compress/compress_options.h"

namespace distml::train::compress {

const std::vector<std::string>& compressor_names() {
  static const std::vector<std::string> names = {"none", "fp16",    "bf16", "topk",    "randomk",
                                                 "qsgd", "natural", "sign", "powersgd"};
  return names;
}

}  // namespace distml::train::compress
