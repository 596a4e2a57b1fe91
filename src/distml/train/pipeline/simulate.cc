#include "distml/train/pipeline/simulate.h"

#include <algorithm>
#include <limits>

#include "distml/core/error.h"
#include "distml/train/pipeline/partition.h"
#include "distml/train/pipeline/schedule.h"

namespace distml::train::pipeline {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

enum class Kind { forward, backward, update };
struct Op {
  Kind kind;
  int micro;  // forward, backward: the micro-batch (ddg: the batch)
};

struct StageState {
  std::vector<Op> ops;
  double forward_s = 0, backward_s = 0, link_s = 0;  // per micro-batch; link: to the next
  double update_s = 0;
  std::size_t next = 0;  // the op it runs or waits for
  double left = -1;      // its work left (solo seconds); < 0: not started
};

bool updates_every_backward(const std::string& schedule) {
  return schedule == "pipedream" || schedule == "ddg";
}

// 1. Stage s's ops: its schedule's order (ddg's over its batches is 1f1b's: stage s runs
// S - 1 - s forwards ahead of its backwards), the update after every backward or once at the
// end.
std::vector<Op> ops_of(const std::string& schedule, int stages, int s, int m) {
  std::vector<Op> ops;
  for (const auto& step : stage_schedule(schedule == "ddg" ? "1f1b" : schedule, stages, s, m)) {
    ops.push_back({step.forward ? Kind::forward : Kind::backward, step.micro});
    if (!step.forward && updates_every_backward(schedule)) ops.push_back({Kind::update, -1});
  }
  if (!updates_every_backward(schedule)) ops.push_back({Kind::update, -1});
  return ops;
}

// Steps 1 to 3: the seconds until every stage has run its ops for m micro-batches.
double played_s(const std::vector<LayerCost>& layers, const std::vector<int>& counts, int m,
                const std::string& schedule, bool recompute, const Link& link, const Cores& cores,
                const Unequal& unequal) {
  const int stages = static_cast<int>(counts.size());
  const auto bounds = stage_bounds(counts);
  std::vector<StageState> st(stages);
  for (int s = 0; s < stages; ++s) {
    st[s].ops = ops_of(schedule, stages, s, m);
    double copy_s = 0;
    for (int l = bounds[s]; l < bounds[s + 1]; ++l) {
      st[s].forward_s += layers[l].forward_s;
      st[s].backward_s += layers[l].backward_s;
      st[s].update_s += layers[l].update_s;
      copy_s += layers[l].copy_s;
    }
    if (recompute) st[s].backward_s += st[s].forward_s;
    if (updates_every_backward(schedule)) {  // weight stashing: the stash at the forward; the
      st[s].forward_s += copy_s;             // current weights out and back around the
      st[s].backward_s += 3 * copy_s;        // backward, and the stash put in
    }
    if (!unequal.slowdown.empty()) {  // 5.
      const double f = unequal.slowdown[s];
      st[s].forward_s *= f;
      st[s].backward_s *= f;
      st[s].update_s *= f;
    }
    const Link& out = unequal.links.empty() || s + 1 == stages ? link : unequal.links[s];
    st[s].link_s = out.latency_s + layers[bounds[s + 1] - 1].output_bytes / out.bytes_per_s;
  }
  // When each stage's forward and backward of each micro-batch ended.
  std::vector<std::vector<double>> forward_end(stages, std::vector<double>(m, kNever));
  auto backward_end = forward_end;
  // 2. When the input of stage s's next op arrives (kNever: not yet known).
  auto ready_at = [&](int s) {
    const Op& op = st[s].ops[st[s].next];
    if (op.kind == Kind::update) return 0.0;  // after the stage's op before it
    if (op.kind == Kind::forward)
      return s == 0 ? 0.0 : forward_end[s - 1][op.micro] + st[s - 1].link_s;
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
      if (x.next == x.ops.size()) continue;  // done
      ++running;
      if (x.left < 0) {
        const double at = ready_at(s);
        if (at > now) {
          next_arrival = std::min(next_arrival, at);
          continue;
        }
        const Kind kind = x.ops[x.next].kind;
        x.left = kind == Kind::update    ? x.update_s
                 : kind == Kind::forward ? x.forward_s
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
      const Op& op = x.ops[x.next];
      if (op.kind != Kind::update)
        (op.kind == Kind::forward ? forward_end : backward_end)[s][op.micro] = now;
      ++x.next;
      x.left = -1;
    }
  }
  return now;
}

}  // namespace

double simulated_step_s(const std::vector<LayerCost>& layers, const std::vector<int>& counts,
                        int micro_batches, const std::string& schedule, const Link& link,
                        const Cores& cores, int replicas, bool recompute, const Unequal& unequal) {
  const auto stages = counts.size();
  if (!unequal.slowdown.empty() && unequal.slowdown.size() != stages)
    throw ConfigError(cat("pipeline simulation: ", unequal.slowdown.size(), " stage slowdowns for ",
                          stages, " stages"));
  if (!unequal.links.empty() && unequal.links.size() + 1 != stages)
    throw ConfigError(cat("pipeline simulation: ", unequal.links.size(), " links between ", stages,
                          " stages (one fewer expected)"));
  const bool recomputes = recompute || updates_every_backward(schedule);
  const double allreduce = slowest_allreduce_s(layers, counts, link, replicas);  // 4.
  if (schedule == "ddg") {
    // 6. Steps overlap: a step's share of a long run, the fill and the drain cancelled out.
    const int k = 4 * static_cast<int>(counts.size());
    const auto run = [&](int batches) {
      return played_s(layers, counts, batches, schedule, recomputes, link, cores, unequal);
    };
    return (run(2 * k) - run(k)) / k + allreduce;
  }
  const int updates = schedule == "pipedream" ? micro_batches : 1;
  return played_s(layers, counts, micro_batches, schedule, recomputes, link, cores, unequal) +
         updates * allreduce;
}

}  // namespace distml::train::pipeline
