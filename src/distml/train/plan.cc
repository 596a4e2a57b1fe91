#include "distml/train/plan.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <thread>

#include "distml/core/clock.h"
#include "distml/core/error.h"
#include "distml/core/fnv1a.h"
#include "distml/core/median.h"
#include "distml/rl/placement_search.h"
#include "distml/train/model_setup.h"
#include "distml/train/objective.h"
#include "distml/train/pipeline/profile.h"
#include "distml/train/pipeline/simulate.h"

namespace distml::train {
namespace {

// Round trips of `bytes` between ranks 0 and 1, `reps` of them or for `seconds` (others: none).
std::vector<double> round_trips(comm::Communicator& world, std::size_t bytes, int reps,
                                double seconds = 0) {
  std::vector<std::uint8_t> payload(bytes);
  const comm::Buffer buffer{payload.data(), payload.size(), comm::DType::u8};
  std::vector<double> trips;
  if (world.rank() > 1) return trips;
  const auto begin = Clock::now();
  for (int r = 0;; ++r) {
    // Rank 0 decides when to stop and tells rank 1 with the message's first byte.
    const bool more = seconds > 0 ? seconds_since(begin) < seconds : r <= reps;
    const auto start = Clock::now();
    if (world.rank() == 0) {
      payload[0] = more;
      world.send(buffer, 1, 0);
      world.recv(buffer, 1, 0);
    } else {
      world.recv(buffer, 0, 0);
      world.send(buffer, 0, 0);
    }
    if (!payload[0]) return trips;
    if (r > 0) trips.push_back(seconds_since(start));  // the first warms up
  }
}

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

// Step 2: measured between ranks 0 and 1, shared by rank 0. When the ranks outnumber the
// cores (`loaded`), the others compute meanwhile, and the latency is the mean one-way time
// of small messages: it then includes the wait for the scheduler to run a rank that has
// just received, which a pipeline pays at every hand-off.
pipeline::Link measured_link(comm::Communicator& world, bool loaded) {
  constexpr std::size_t kLarge = 4 << 20;
  constexpr double kLoadedSeconds = 0.5;
  double v[2] = {0, 0};
  if (world.rank() < 2) {
    const double small = loaded ? mean(round_trips(world, 8, 0, kLoadedSeconds)) / 2
                                : median(round_trips(world, 8, 50)) / 2;
    const double large = median(round_trips(world, kLarge, 10)) / 2;
    v[0] = small;
    // The bandwidth from the large message's time less the latency; under load the measured
    // latency can exceed a large message's whole time, so at most half of that is taken off.
    v[1] = kLarge / std::max(1e-12, large - std::min(small, large / 2));
  } else if (loaded) {
    const auto a = torch::randn({128, 128});
    for (const auto begin = Clock::now(); seconds_since(begin) < kLoadedSeconds + 0.1;)
      (void)torch::mm(a, a);
  }
  world.broadcast(comm::Buffer{v, 2, comm::DType::f64}, 0);
  return {v[0], v[1]};
}

// Step 3: each rank's share of its host's cores (the smallest over the hosts).
double cores_per_rank(comm::Communicator& world) {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  Fnv1a hash;
  hash.mix(name, std::strlen(name));
  const auto mine = static_cast<std::int64_t>(hash.value());
  std::vector<std::int64_t> hosts(world.size());
  world.allgather(comm::ConstBuffer{&mine, 1, comm::DType::i64},
                  comm::Buffer{hosts.data(), hosts.size(), comm::DType::i64});
  const auto here = std::count(hosts.begin(), hosts.end(), mine);
  double share = std::max(1u, std::thread::hardware_concurrency()) / static_cast<double>(here);
  world.allreduce(comm::Buffer{&share, 1, comm::DType::f64}, {.op = comm::ReduceOp::min});
  return share;
}

// Step 4: rank 0's learnt placement on every rank, so that every rank plans the same even
// where their floating point differs (another CPU's kernels).
std::vector<int> learnt_placement(int layers, int stages, const rl::PlacementTime& step_s,
                                  std::uint64_t seed, comm::Communicator& world) {
  std::vector<std::int64_t> counts(stages);
  if (world.rank() == 0) {
    const auto learnt = rl::search_placement(layers, stages, step_s, {.seed = seed});
    std::copy(learnt.counts.begin(), learnt.counts.end(), counts.begin());
  }
  world.broadcast(comm::Buffer{counts.data(), counts.size(), comm::DType::i64}, 0);
  return {counts.begin(), counts.end()};
}

}  // namespace

Plan make_plan(const TrainConfig& config, const TaskData& data, comm::Communicator& world,
               const PlanOptions& options) {
  const auto model = build_model(config, data);
  const auto layers = model.layers();
  const Objective objective(config, data, model);
  if (options.search != "dp" && options.search != "rl")
    throw ConfigError(cat("plan: search \"", options.search, "\": expected \"dp\" or \"rl\""));
  Plan plan;
  for (const auto& l : layers) plan.layer_names.push_back(l.name);
  plan.slow_rank = static_cast<int>(config.train.slow_rank);
  plan.slow_factor = config.train.slow_factor;
  plan.cores_per_rank = cores_per_rank(world);
  // 1. The layers' costs per micro-batch size, measured once each by rank 0 alone.
  auto profile_at = [&](std::int64_t rows) {
    const auto sample =
        rows_of(data.train, 0, std::min<std::int64_t>(rows, data.train.num_samples));
    return pipeline::profile_layers(
        layers, model.tensors(), objective.model_input(sample),
        [&](const torch::Tensor& out) { return objective.mean_loss_of(out, sample); }, options.reps,
        config.train.precision == "bf16");
  };
  std::map<std::int64_t, std::vector<pipeline::LayerCost>> measured;
  auto costs_at = [&](std::int64_t rows) -> const std::vector<pipeline::LayerCost>& {
    auto& costs = measured[rows];
    if (!costs.empty()) return costs;
    costs.resize(layers.size());
    if (world.rank() == 0) costs = profile_at(rows);
    pipeline::share_rank0s(costs, world);
    return costs;
  };
  // Step 3's sharing efficiency: when the ranks' threads outnumber the cores, every rank
  // measures at once, and the efficiency is the ideal slowdown over the one measured.
  const auto threads = static_cast<int>(config.train.threads);
  const double oversubscribed = threads / plan.cores_per_rank;
  if (oversubscribed > 1) {
    const std::int64_t rows = config.train.batch_size;
    auto together = profile_at(rows);
    pipeline::average_over_ranks(together, world);
    const auto compute = [](const std::vector<pipeline::LayerCost>& costs) {
      double sum = 0;
      for (const auto& c : costs) sum += c.forward_s + c.backward_s;
      return sum;
    };
    plan.sharing_efficiency =
        std::min(1.0, compute(costs_at(rows)) * oversubscribed / compute(together));
  }
  // 2.
  plan.link_measured = !options.link && world.size() > 1;
  plan.link = options.link         ? *options.link
              : plan.link_measured ? measured_link(world, oversubscribed > 1)
                                   : pipeline::Link{};
  // 3.
  std::vector<int> stages = options.stages;
  if (stages.empty())
    for (int s = 1; s <= world.size(); ++s)
      if (world.size() % s == 0 && s <= static_cast<int>(layers.size())) stages.push_back(s);
  std::vector<int> micro = options.micro_batches;
  if (micro.empty()) micro = {static_cast<int>(config.parallel.micro_batches)};
  const std::int64_t batch = config.train.batch_size;
  const bool ddg = config.parallel.schedule == "ddg";  // whole batches: no micro-batches
  for (int s : stages) {
    if (world.size() % s != 0)
      throw ConfigError(cat(s, " stages do not divide the ", world.size(), " ranks"));
    for (int m : s == 1 || ddg ? std::vector<int>{1} : micro) {
      if (m > batch) continue;
      const auto& costs = costs_at((batch + m - 1) / m);
      GridPlan g{.stages = s, .replicas = world.size() / s, .micro_batches = m};
      // ddg's steps overlap, so its time per step is the slowest stage's, as for a long
      // synchronous pipeline: the partition is searched as for 4 S micro-batches.
      g.counts = pipeline::best_partition(costs, s, ddg ? 4 * s : m, plan.link, g.replicas).counts;
      const pipeline::Cores cores{.available = plan.cores_per_rank * s,
                                  .threads = threads,
                                  .sharing_efficiency = plan.sharing_efficiency};
      pipeline::Unequal unequal;  // 4.
      if (plan.slow_rank >= 0) {
        unequal.slowdown.assign(s, 1.0);
        unequal.slowdown[plan.slow_rank % s] = plan.slow_factor;
      }
      const rl::PlacementTime simulated = [&](const std::vector<int>& counts) {
        return pipeline::simulated_step_s(costs, counts, m, config.parallel.schedule, plan.link,
                                          cores, g.replicas, config.parallel.recompute, unequal);
      };
      auto add = [&](const GridPlan& candidate) {
        plan.candidates.push_back(candidate);
        if (candidate.samples_per_s > plan.best.samples_per_s) {
          plan.best = candidate;
          plan.layers = costs;
        }
      };
      g.step_s = simulated(g.counts);
      g.samples_per_s = g.replicas * batch / g.step_s;
      add(g);
      if (options.search == "rl" && s > 1) {
        g.counts = learnt_placement(static_cast<int>(layers.size()), s, simulated,
                                    static_cast<std::uint64_t>(config.train.seed), world);
        g.step_s = simulated(g.counts);
        g.samples_per_s = g.replicas * batch / g.step_s;
        g.search = "rl";
        add(g);
      }
    }
  }
  if (plan.candidates.empty())
    throw ConfigError(
        cat("no grid to plan: the micro-batch counts exceed train.batch_size = ", batch));
  return plan;
}

std::vector<std::string> plan_overrides(const GridPlan& plan) {
  std::string counts;
  for (int c : plan.counts) counts += cat(counts.empty() ? "" : ",", c);
  return {cat("parallel.pipeline_stages=", plan.stages),
          cat("parallel.micro_batches=", plan.micro_batches),
          cat("parallel.partition=[", counts, "]")};
}

}  // namespace distml::train
