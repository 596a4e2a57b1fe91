#include "bench_report.h"

#include <cstdio>

#include "distml/core/error.h"
#include "distml/core/parse.h"

namespace distml::cli {

double bus_factor(const std::string& op, int np) {
  if (np <= 1) return op == "sendrecv" ? 1.0 : 0.0;
  if (op == "allreduce") return 2.0 * (np - 1) / np;
  if (op == "allgather" || op == "reduce_scatter" || op == "alltoall")
    return static_cast<double>(np - 1) / np;
  return 1.0;  // broadcast, sendrecv
}

namespace {
double algbw_gbps(const BenchRow& r) { return r.time_us > 0 ? r.bytes / (r.time_us * 1e3) : 0; }
}  // namespace

nlohmann::json to_json(const BenchRow& r) {
  nlohmann::json j{{"op", r.op},
                   {"engine", r.engine},
                   {"algo", r.algo},
                   {"bytes", r.bytes},
                   {"np", r.np},
                   {"time_us", r.time_us},
                   {"algbw_gbps", algbw_gbps(r)},
                   {"busbw_gbps", algbw_gbps(r) * bus_factor(r.op, r.np)},
                   {"baseline_time_us", nullptr},
                   {"ratio_vs_baseline", nullptr}};
  if (r.baseline_time_us) {
    j["baseline_time_us"] = *r.baseline_time_us;
    j["ratio_vs_baseline"] = r.time_us > 0 ? *r.baseline_time_us / r.time_us : 0.0;
  }
  return j;
}

std::string format_table(const std::vector<BenchRow>& rows) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-15s %-6s %-8s %8s %3s %12s %11s %11s %12s %8s\n", "op",
                "engine", "algo", "bytes", "np", "time_us", "algbw_GB/s", "busbw_GB/s", "mpi_us",
                "ratio");
  out += line;
  for (const auto& r : rows) {
    double algbw = algbw_gbps(r);
    std::string base = r.baseline_time_us ? cat(*r.baseline_time_us) : "-";
    std::string ratio = "-";
    if (r.baseline_time_us && r.time_us > 0) {
      char b[32];
      std::snprintf(b, sizeof b, "%.2f", *r.baseline_time_us / r.time_us);
      ratio = b;
    }
    if (r.baseline_time_us) {
      char b[32];
      std::snprintf(b, sizeof b, "%.2f", *r.baseline_time_us);
      base = b;
    }
    std::snprintf(line, sizeof line, "%-15s %-6s %-8s %8s %3d %12.2f %11.3f %11.3f %12s %8s\n",
                  r.op.c_str(), r.engine.c_str(), r.algo.c_str(), format_bytes(r.bytes).c_str(),
                  r.np, r.time_us, algbw, algbw * bus_factor(r.op, r.np), base.c_str(),
                  ratio.c_str());
    out += line;
  }
  out +=
      "ratio = mpi_us / time_us: above 1 means distml is faster than raw MPI on the same buffers\n";
  return out;
}

}  // namespace distml::cli
