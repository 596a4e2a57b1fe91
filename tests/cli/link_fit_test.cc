// The link's latency and bandwidth fitted from distml bench sendrecv --json
// (cli/link_fit.h), on rows whose times are alpha + bytes / beta exactly.
#include "link_fit.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../data/temp_dir.h"
#include "distml/core/error.h"

namespace distml::cli {
namespace {

using data::testing::TempDir;

std::string row(const char* op, long long bytes, double time_us) {
  return nlohmann::json{
             {"op", op}, {"engine", "mpi"}, {"bytes", bytes}, {"np", 2}, {"time_us", time_us}}
             .dump() +
         "\n";
}

// alpha = 50 us, beta = 1.25e8 bytes/s (1 Gbit/s): 4 bytes take 50.032 us, 16 MiB 134267.728
// us. The fit reads alpha off the smallest row and beta off the largest less alpha, so it is
// exact but for the smallest row's 4 / beta (0.032 us), which it counts as start-up: alpha
// comes out 4 / beta high and beta by the factor L / (L - 4) for the largest row's L bytes.
// The JSON carries the times to full precision; 1e-12 of each value covers the arithmetic.
TEST(LinkFit, ReadsLatencyOffTheSmallestAndBandwidthOffTheLargest) {
  TempDir dir;
  const double alpha = 50e-6, beta = 1.25e8;
  auto us = [&](double bytes) { return 1e6 * (alpha + bytes / beta); };
  const auto path = dir.write(
      "bench.jsonl", "sendrecv over mpi\n" + row("sendrecv", 4, us(4)) +
                         row("allreduce", 65536, 1) + row("sendrecv", 65536, us(65536)) +
                         row("sendrecv", 16 << 20, us(16 << 20)) + "{\"engine\":\"mpi\",\"event\":\"done\",\"op\":\"sendrecv\",\"rows\":3}\n");
  const auto fit = fit_link(path);
  const double large = 16 << 20;
  EXPECT_NEAR(fit.latency_s, alpha + 4 / beta, 1e-12 * alpha);
  EXPECT_NEAR(fit.bytes_per_s, beta * large / (large - 4), 1e-12 * beta);
  EXPECT_EQ(fit.small_bytes, 4);
  EXPECT_EQ(fit.large_bytes, 16 << 20);
}

TEST(LinkFit, NamesTheFileAndLineOfWhatItCannotUse) {
  TempDir dir;
  auto error_of = [&](const std::string& text) {
    try {
      fit_link(dir.write("bench.jsonl", text));
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of(row("sendrecv", 4, 50)).find("at least two sizes"), std::string::npos);
  EXPECT_NE(error_of(row("sendrecv", 4, 50) + "{not json\n").find("bench.jsonl:2: not a JSON"),
            std::string::npos);
  EXPECT_NE(error_of(row("sendrecv", 4, 50) + "{\"op\":\"sendrecv\",\"bytes\":8}\n")
                .find("bench.jsonl:2: a sendrecv row needs"),
            std::string::npos);
  EXPECT_NE(error_of(row("sendrecv", 4, 50) + row("sendrecv", 1024, 40)).find("no bandwidth"),
            std::string::npos);
  EXPECT_THROW(fit_link(dir.file("absent.jsonl")), ConfigError);
}

}  // namespace
}  // namespace distml::cli
