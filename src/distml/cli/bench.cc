#include "bench.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>

#include "bench_report.h"
#include "distml/comm/engines.h"
#include "distml/comm/local/local_world.h"
#include "distml/comm/slurm_env.h"
#include "distml/core/error.h"
#include "distml/core/median.h"
#include "distml/core/parse.h"
#include "launch.h"
#include "mpi_baseline.h"

namespace distml::cli {
namespace {

using comm::Algorithm;
using comm::Buffer;
using comm::Communicator;
using comm::ConstBuffer;
using comm::DType;

const std::vector<std::string> kOps = {"allreduce",      "broadcast", "allgather",
                                       "reduce_scatter", "alltoall",  "sendrecv"};

struct BenchOptions {
  std::string op;
  int np = 0;  // 0: not given (one rank for local; as launched for mpi and gloo)
  std::string engine;
  std::string algos = "native";
  std::string sizes = "4,1K,64K,1M,16M,64M";
  int iters = 0;  // 0: chosen per size
  int reps = 5;
  int warmup = 3;
  std::string dtype = "f32";
  double timeout_s = 300;
  bool json = false;
  bool no_baseline = false;
  bool np_given = false;
};

// What the ranks run: the options, parsed and checked once before anything starts.
struct Plan {
  std::string op, engine;
  std::vector<Algorithm> algos;
  std::vector<std::string> algo_names;
  std::vector<std::size_t> sizes;
  DType dtype = DType::f32;
  int iters = 0, reps = 5, warmup = 3;
};

std::vector<Algorithm> valid_algorithms(const std::string& op) {
  if (op == "allreduce")
    return {Algorithm::native,       Algorithm::ring, Algorithm::halving_doubling, Algorithm::tree,
            Algorithm::hierarchical, Algorithm::shm,  Algorithm::automatic};
  if (op == "broadcast") return {Algorithm::native, Algorithm::tree, Algorithm::automatic};
  if (op == "allgather" || op == "reduce_scatter")
    return {Algorithm::native, Algorithm::ring, Algorithm::automatic};
  if (op == "alltoall") return {Algorithm::native, Algorithm::pairwise, Algorithm::automatic};
  return {Algorithm::native};  // sendrecv: the engine's point-to-point
}

Plan make_plan(const BenchOptions& o) {
  Plan plan;
  if (std::find(kOps.begin(), kOps.end(), o.op) == kOps.end())
    throw UsageError(cat("unknown benchmark '", o.op,
                         "' (valid: allreduce, broadcast, allgather, reduce_scatter, alltoall, "
                         "sendrecv)"));
  plan.op = o.op;
  plan.engine = o.engine;
  comm::check_engine_name(o.engine);
  auto valid = valid_algorithms(o.op);
  for (const auto& name : split_list(o.algos)) {
    auto it = std::find_if(valid.begin(), valid.end(),
                           [&](Algorithm a) { return comm::algorithm_name(a) == name; });
    if (it == valid.end()) {
      std::string list;
      for (auto v : valid) list += cat(list.empty() ? "" : ", ", comm::algorithm_name(v));
      throw UsageError(cat(o.op, " has no algorithm '", name, "' (valid: ", list, ")"));
    }
    plan.algos.push_back(*it);
    plan.algo_names.push_back(name);
  }
  if (plan.algos.empty()) throw UsageError("--algo: give at least one algorithm");
  for (const auto& s : split_list(o.sizes)) plan.sizes.push_back(parse_bytes(s, "--sizes"));
  if (plan.sizes.empty()) throw UsageError("--sizes: give at least one size");
  plan.dtype = comm::parse_dtype(o.dtype);
  if (o.iters < 0) throw UsageError(cat("--iters must be >= 0, got ", o.iters));
  if (o.reps < 1) throw UsageError(cat("--reps must be >= 1, got ", o.reps));
  if (o.warmup < 0) throw UsageError(cat("--warmup must be >= 0, got ", o.warmup));
  plan.iters = o.iters;
  plan.reps = o.reps;
  plan.warmup = o.warmup;
  return plan;
}

// The buffers and the one call a benchmark row times.
struct Case {
  std::vector<std::byte> in, out;
  std::size_t in_count = 0, out_count = 0;
  std::function<void()> call;
};

Case make_case(Communicator& comm, const Plan& plan, std::size_t bytes, Algorithm algo) {
  const int p = comm.size();
  const std::size_t es = comm::dtype_size(plan.dtype);
  std::size_t count = bytes / es;
  Case c;
  if (plan.op == "allgather")
    c.in_count = count / p, c.out_count = c.in_count * p;
  else if (plan.op == "reduce_scatter")
    c.out_count = count / p, c.in_count = c.out_count * p;
  else if (plan.op == "alltoall")
    c.in_count = c.out_count = count / p * p;
  else
    c.in_count = c.out_count = count;
  c.in.assign(c.in_count * es + 1, std::byte{0});
  c.out.assign(c.out_count * es + 1, std::byte{0});
  ConstBuffer in{c.in.data(), c.in_count, plan.dtype};
  Buffer out{c.out.data(), c.out_count, plan.dtype};
  Buffer inout{c.in.data(), c.in_count, plan.dtype};
  const std::string& op = plan.op;
  if (op == "allreduce")
    c.call = [&comm, inout, algo] { comm.allreduce(inout, {.algorithm = algo}); };
  else if (op == "broadcast")
    c.call = [&comm, inout, algo] { comm.broadcast(inout, 0, algo); };
  else if (op == "allgather")
    c.call = [&comm, in, out, algo] { comm.allgather(in, out, algo); };
  else if (op == "reduce_scatter")
    c.call = [&comm, in, out, algo] { comm.reduce_scatter(in, out, comm::ReduceOp::sum, algo); };
  else if (op == "alltoall")
    c.call = [&comm, in, out, algo] { comm.alltoall(in, out, algo); };
  else
    c.call = [&comm, in, out] {  // each rank sends to its right and receives from its left
      const int r = comm.rank(), n = comm.size();
      auto recv = comm.irecv(out, (r + n - 1) % n, 0);
      auto send = comm.isend(in, (r + 1) % n, 0);
      recv.wait();
      send.wait();
    };
  return c;
}

// Seconds per call on the slowest rank, over `iters` calls.
double time_calls(Communicator& comm, const std::function<void()>& call, int iters) {
  comm.barrier();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) call();
  double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
  comm.allreduce(Buffer{&t, 1, DType::f64}, {.op = comm::ReduceOp::max});
  return t;
}

using Baseline = std::function<std::optional<double>(
    const std::string& op, const void* in, void* out, std::size_t in_count, std::size_t out_count,
    DType dtype, int iters)>;

std::vector<BenchRow> run_bench(Communicator& comm, const Plan& plan, const Baseline& baseline,
                                bool progress) {
  std::vector<BenchRow> rows;
  const std::size_t total = plan.sizes.size() * plan.algos.size();
  for (std::size_t si = 0; si < plan.sizes.size(); ++si) {
    for (std::size_t ai = 0; ai < plan.algos.size(); ++ai) {
      const std::size_t bytes = plan.sizes[si];
      if (progress && comm.rank() == 0)
        std::fprintf(stderr, "\r[%zu/%zu] %s %s %s   ", si * plan.algos.size() + ai + 1, total,
                     plan.op.c_str(), plan.algo_names[ai].c_str(), format_bytes(bytes).c_str());
      Case c = make_case(comm, plan, bytes, plan.algos[ai]);
      // Warm up, and from the warm-up's time choose enough calls for ~50 ms a repetition.
      double per_call = time_calls(comm, c.call, std::max(plan.warmup, 1));
      const int iters =
          plan.iters > 0 ? plan.iters : static_cast<int>(std::clamp(0.05 / per_call, 3.0, 2000.0));
      std::vector<double> ours, theirs;
      for (int rep = 0; rep < plan.reps; ++rep) {  // interleaved, so both see the same noise
        ours.push_back(time_calls(comm, c.call, iters));
        if (!baseline) continue;
        auto t = baseline(plan.op, c.in.data(), c.out.data(), c.in_count, c.out_count, plan.dtype,
                          iters);
        if (t) theirs.push_back(*t);
      }
      BenchRow row{plan.op,     plan.engine,        plan.algo_names[ai], bytes,
                   comm.size(), median(ours) * 1e6, std::nullopt};
      if (!theirs.empty()) row.baseline_time_us = median(theirs) * 1e6;
      rows.push_back(row);
    }
  }
  if (progress && comm.rank() == 0) std::fprintf(stderr, "\r%60s\r", "");
  return rows;
}

void report(const std::vector<BenchRow>& rows, const BenchOptions& o, double wall_s) {
  if (o.json) {
    for (const auto& r : rows) std::cout << to_json(r).dump() << "\n";
    std::cout << nlohmann::json{{"event", "done"},     {"op", o.op},
                                {"engine", o.engine},  {"np", rows.empty() ? 0 : rows[0].np},
                                {"rows", rows.size()}, {"wall_s", wall_s}}
                     .dump()
              << std::endl;
  } else {
    std::cout << format_table(rows) << std::flush;
  }
}

// The local engine's ranks are threads of one process, so raw MPI cannot run beside them:
// its baseline runs as an mpirun job of the same size, started from this invocation, on
// buffers of the same sizes. Returns baseline microseconds by size (empty without mpirun).
std::map<std::size_t, double> mpi_baseline_job(const BenchOptions& o, int np) {
  std::map<std::size_t, double> by_size;
  std::string self = std::filesystem::read_symlink("/proc/self/exe");
  std::string cmd =
      cat("'", self, "' bench ", o.op, " --engine mpi --np ", np, " --algo native --sizes ",
          o.sizes, " --reps ", o.reps, " --iters ", o.iters, " --warmup ", o.warmup, " --dtype ",
          o.dtype, " --json 2>/dev/null");
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return by_size;
  char line[4096];
  while (std::fgets(line, sizeof line, pipe)) {
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("bytes") && j["baseline_time_us"].is_number())
      by_size[j["bytes"].get<std::size_t>()] = j["baseline_time_us"].get<double>();
  }
  ::pclose(pipe);
  return by_size;
}

void run(const BenchOptions& o, int argc, char** argv) {
  Plan plan = make_plan(o);
  if (o.np_given && o.np < 1) throw UsageError(cat("--np must be at least 1, got ", o.np));
  if (o.engine == "gloo" && !std::getenv(kLaunchedVar)) {
    // gloo ranks run under mpirun too, so that raw MPI can run beside them as the baseline;
    // they meet through a TCPStore on this machine.
    ::setenv("MASTER_ADDR", "127.0.0.1", 0);
    ::setenv("MASTER_PORT", std::to_string(free_port()).c_str(), 0);
  }
  relaunch_if_requested(o.np, o.engine == "local" ? "local" : "mpi", argc, argv);

  comm::CommOptions copts;
  copts.timeout = comm::Millis(static_cast<long long>(o.timeout_s * 1000));
  const bool progress = !o.json && ::isatty(2);
  const auto start = std::chrono::steady_clock::now();
  auto wall = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };

  if (o.engine == "local") {
    std::vector<BenchRow> rows;
    std::mutex m;
    comm::local::run_ranks(std::max(o.np, 1), copts, [&](Communicator& comm) {
      auto mine = run_bench(comm, plan, nullptr, progress);
      std::lock_guard lock(m);
      if (comm.rank() == 0) rows = mine;
    });
    if (!o.no_baseline) {
      auto baseline = mpi_baseline_job(o, std::max(o.np, 1));
      for (auto& r : rows)
        if (auto it = baseline.find(r.bytes); it != baseline.end()) r.baseline_time_us = it->second;
    }
    report(rows, o, wall());
    return;
  }

  Baseline baseline;
  if (!o.no_baseline && mpi_baseline_available())
    baseline = [](const std::string& op, const void* in, void* out, std::size_t in_count,
                  std::size_t out_count, DType dtype, int iters) {
      return time_raw_mpi_collective(op, in, out, in_count, out_count, dtype, iters);
    };
  if (o.engine == "gloo") {
    comm::adopt_mpirun_rank_variables();
    comm::adopt_slurm_rank_variables();
  }
  auto comm = comm::connect({o.engine, ""}, copts);
  auto rows = run_bench(*comm, plan, baseline, progress);
  if (comm->rank() == 0) report(rows, o, wall());
}

}  // namespace

void add_bench_command(CLI::App& app, int argc, char** argv) {
  auto o = std::make_shared<BenchOptions>();
  const char* env_engine = std::getenv(kEngineVar);
  o->engine = env_engine ? env_engine : "mpi";
  auto* sub = app.add_subcommand(
      "bench",
      "Benchmark a collective like nccl-tests: median time, algbw and busbw per size and "
      "algorithm, with raw MPI on the same buffers in the same run as the baseline (ratio = "
      "mpi_us / time_us).\nExample: distml bench allreduce --np 2 --algo native,ring --sizes "
      "1K,64M");
  sub->add_option("op", o->op,
                  "allreduce | broadcast | allgather | reduce_scatter | alltoall | sendrecv")
      ->required();
  auto* np =
      sub->add_option("--np", o->np, "Ranks (relaunches under distml launch; threads for local)");
  sub->add_option("--engine", o->engine, "mpi | gloo | local");
  sub->add_option("--algo", o->algos,
                  "Comma list of native, ring, hd, tree, pairwise, hierarchical, shm, auto");
  sub->add_option("--sizes", o->sizes, "Comma list of byte sizes (K, M, G suffixes)");
  sub->add_option("--iters", o->iters, "Calls per repetition (default: by size)");
  sub->add_option("--reps", o->reps, "Repetitions; the median is reported");
  sub->add_option("--warmup", o->warmup, "Untimed calls before timing");
  sub->add_option("--dtype", o->dtype, "f32 | f64 | f16 | bf16 | i32 | i64 | u8");
  sub->add_option("--timeout", o->timeout_s, "Seconds before a blocked call fails");
  sub->add_flag("--no-baseline", o->no_baseline, "Skip the raw MPI baseline");
  sub->add_flag("--json", o->json, "One JSON object per row, then a done line");
  sub->callback([o, np, argc, argv] {
    o->np_given = np->count() > 0;
    run(*o, argc, argv);
  });
}

}  // namespace distml::cli
