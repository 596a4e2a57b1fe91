#include "distml/train/pipeline/schedule.h"

#include <algorithm>

#include "distml/core/error.h"

namespace distml::train::pipeline {

std::vector<PipeStep> stage_schedule(const std::string& schedule, int stages, int stage,
                                     int micro_batches) {
  const int m = micro_batches;
  std::vector<PipeStep> steps;
  if (schedule == "gpipe") {
    for (int i = 0; i < m; ++i) steps.push_back({true, i});
    for (int i = m - 1; i >= 0; --i) steps.push_back({false, i});
    return steps;
  }
  if (schedule == "1f1b" || schedule == "pipedream") {
    const int warmup = std::min(stages - stage - 1, m);
    int forwards = 0, backwards = 0;
    while (forwards < warmup) steps.push_back({true, forwards++});
    while (forwards < m) {
      steps.push_back({true, forwards++});
      steps.push_back({false, backwards++});
    }
    while (backwards < m) steps.push_back({false, backwards++});
    return steps;
  }
  throw ConfigError(
      cat("parallel.schedule must be gpipe, 1f1b or pipedream, got '", schedule, "'"));
}

}  // namespace distml::train::pipeline
