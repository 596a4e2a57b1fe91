// The order in which one pipeline stage runs the forward and backward passes of a step's
// micro-batches. Both schedules compute the same gradients (each micro-batch's forward and
// backward happen once, and gradients add up); they differ in how many activations a stage
// holds at once and so in peak memory.
//
// gpipe (Huang et al. 2019; torchgpipe), fill-drain:
//  1. every stage runs the forwards of micro-batches 0..m-1 as their inputs arrive, sending
//     each output on at once, so stage s starts s micro-batches after stage 0 (the fill);
//  2. then the backwards, in reverse order m-1..0, each as its output's gradient arrives from
//     the next stage (the drain). A stage holds the activations of all m micro-batches.
// 1f1b (PipeDream-flush; Narayanan et al. 2021), one forward one backward:
//  1. stage s first runs min(S - s - 1, m) forwards (warm-up: enough to keep the stages after
//     it busy);
//  2. then alternates one forward and one backward (steady state) while forwards remain;
//  3. then the remaining backwards (cool-down). Backwards run in micro-batch order, and a
//     stage holds at most S - s micro-batches' activations instead of m.
// Neither overlaps steps: a step ends when all its backwards are done (a flush), so the
// optimizer sees the same gradient as one pass over the whole batch.
// pipedream runs 1f1b's order, but each stage updates its weights after every backward
// (pipeline_stage.h, weight_versions.h): asynchronous within the step.
#pragma once

#include <string>
#include <vector>

namespace distml::train::pipeline {

struct PipeStep {
  bool forward;  // false: backward
  int micro;     // micro-batch index
  bool operator==(const PipeStep&) const = default;
};

/// The steps of `stage` (of `stages`) for `micro_batches` micro-batches under `schedule`
/// ("gpipe", "1f1b" or "pipedream"; ConfigError otherwise).
std::vector<PipeStep> stage_schedule(const std::string& schedule, int stages, int stage,
                                     int micro_batches);

}  // namespace distml::train::pipeline
