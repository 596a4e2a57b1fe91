#include "distml/train/pipeline/simulate.h"

#include <algorithm>
#include <limits>

#include "distml/core/error.h"
#include "distml/train/pipeline/partition.h"
#include "distml/train/pipeline/schedule.h"

namespace distml::train::pipeline {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

struct StageState {
  std::vector<PipeStep> ops;                         // then the update (next == ops.size())
  double forward_s = 0, backward_s = 0, link_s = 0;  // per micro-batch; link: to the next
  double update_s = 0;
  std::size_t next = 0;  // the op it runs or waits for
  double left = -1;      // its work left (solo seconds); < 0: not started
};

}  // namespace

double simulated_step_s(const std::vector<LayerCost>& layers, const std::vector<int>& counts,
                        int micro_batches, const std::string& schedule, const Link& link,
                        const Cores& cores, int replicas) {
  const int stages = static_cast<int>(counts.size()), m = micro_batches;
  const auto bounds = stage_bounds(counts);
  std::vector<StageState> st(stages);
  for (int s = 0; s < stages; ++s) {
    st[s].ops = stage_schedule(schedule, stages, s, m);
    for (int l = bounds[s]; l < bounds[s + 1]; ++l) {
      st[s].forward_s += layers[l].forward_s;
      st[s].backward_s += layers[l].backward_s;
      st[s].update_s += layers[l].update_s;
    }
    st[s].link_s = link.latency_s + layers[bounds[s + 1] - 1].output_bytes / link.bytes_per_s;
  }
  // When each stage's forward and backward of each micro-batch ended.
  std::vector<std::vector<double>> forward_end(stages, std::vector<double>(m, kNever));
  auto backward_end = forward_end;
  // 2. When the input of stage s's next op arrives (kNever: not yet known).
  auto ready_at = [&](int s) {
    if (st[s].next == st[s].ops.size()) return 0.0;  // the update: after the stage's last op
    const PipeStep& op = st[s].ops[st[s].next];
    if (op.forward) return s == 0 ? 0.0 : forward_end[s - 1][op.micro] + st[s - 1].link_s;
    return s == stages - 1 ? forward_end[s][op.micro]
                           : backward_end[s + 1][op.micro] + st[s].link_s;
  };
  double now = 0;
  for (;;) {
    // Start every op whose input is in.
    int busy = 0, running = 0;
    double next_arrival = kNever;
    for (int s = 0; s < stages; ++s) {
      auto& x = st[s];
      if (x.next > x.ops.size()) continue;  // updated: done
      ++running;
      if (x.left < 0) {
        const double at = ready_at(s);
        if (at > now) {
          next_arrival = std::min(next_arrival, at);
          continue;
        }
        x.left = x.next == x.ops.size()  ? x.update_s
                 : x.ops[x.next].forward ? x.forward_s
                                         : x.backward_s;
      }
      ++busy;
    }
    if (running == 0) break;
    // 3. The busy stages' speed, and the next event.
    const double demand = busy * static_cast<double>(cores.threads);
    const double speed =
        demand <= cores.available ? 1.0 : cores.available / demand * cores.sharing_efficiency;
    double step = next_arrival - now;
    for (const auto& s : st)
      if (s.left >= 0) step = std::min(step, s.left / speed);
    DML_CHECK(step < kNever, "pipeline simulation: no op can run (a schedule out of order)");
    now += step;
    for (int s = 0; s < stages; ++s) {
      auto& x = st[s];
      if (x.left < 0) continue;
      x.left -= step * speed;
      if (x.left > 1e-12 * (x.forward_s + x.backward_s + x.update_s)) continue;
      if (x.next < x.ops.size()) {
        const PipeStep& op = x.ops[x.next];
        (op.forward ? forward_end : backward_end)[s][op.micro] = now;
      }
      ++x.next;
      x.left = -1;
    }
  }
  return now + slowest_allreduce_s(layers, counts, link, replicas);  // 4.
}

}  // namespace distml::train::pipeline
