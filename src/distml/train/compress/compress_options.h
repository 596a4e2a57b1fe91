// What the [compress] section of a training config chooses (compressor.h does the work).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace distml::train::compress {

struct CompressOptions {
  std::string name = "none";      // one of compressor_names()
  double ratio = 0.01;            // topk, randomk: the share of a bucket's elements sent
  std::int64_t levels = 16;       // qsgd: quantisation levels s (1 to 127)
  std::int64_t rank = 4;          // powersgd: the rank of the approximation
  bool error_feedback = true;     // keep what was not sent and add it to the next gradient
  std::int64_t warmup_steps = 0;  // plain all-reduce for the first steps
  std::uint64_t seed = 0;         // of the random draws (train.seed)
};

/// none, fp16, bf16, topk, randomk, qsgd, natural, sign, powersgd.
const std::vector<std::string>& compressor_names();

}  // namespace distml::train::compress
