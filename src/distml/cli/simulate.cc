#include "simulate.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "distml/core/error.h"
#include "distml/core/parse.h"
#include "distml/sim/compression.h"
#include "distml/sim/data_parallel.h"
#include "distml/sim/gossip.h"
#include "distml/sim/local_sgd.h"
#include "distml/sim/parameter_server.h"
#include "distml/sim/pipeline.h"
#include "distml/train/config.h"
#include "distml/train/strategies/gossip_topology.h"
#include "distml/train/strategy_factory.h"
#include "link_fit.h"
#include "netns_cluster.h"
#include "torch_commands.h"

namespace distml::cli {
namespace {

struct SimulateOptions {
  std::string profile_path, config_path;
  std::vector<std::string> sets;
  std::string hosts = "1,2,4,8";
  int ranks_per_host = 1;
  std::string bandwidth, latency = "0", burst = "0", burst_rate, p2p_overhead = "0";
  std::string link_from;  // distml bench sendrecv --json's output, to fit latency and bandwidth
  std::string host_bandwidth = "40gbit", host_latency = "2us";  // within a host
  double shared_cores = 0;
  int hosts_per_rack = 0;
  double oversubscription = 1;
  std::string engine;                  // default: the profile's
  std::string label;                   // default: the strategy's (strategy_label)
  int steps = sim::PsOptions{}.steps;  // the parameter server's steps per worker
  bool json = false;
};

std::vector<int> host_counts(const std::string& text) {
  std::vector<int> out;
  for (const auto& item : split_list(text)) {
    int n = 0;
    if (std::sscanf(item.c_str(), "%d", &n) != 1 || n < 1 || cat(n) != item)
      throw UsageError(cat("--hosts: expected host counts >= 1 like 1,2,4, got \"", text, "\""));
    out.push_back(n);
  }
  if (out.empty()) throw UsageError("--hosts: no host count given");
  return out;
}

// "241.0 KiB": a table's bytes, to a tenth of their unit.
std::string readable_bytes(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  for (; bytes >= 1024 && u < 4; ++u) bytes /= 1024;
  char text[32];
  std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return text;
}

// Seconds of a duration such as "50us", "1.5ms", "0.2s" or "0". UsageError naming `what`.
double parse_duration_s(const std::string& text, const std::string& what) {
  double value = 0;
  int used = 0;
  if (std::sscanf(text.c_str(), "%lf%n", &value, &used) != 1 || value < 0)
    throw UsageError(cat(what, ": expected a duration such as 50us, 1ms or 0, got \"", text, "\""));
  const std::string unit = text.substr(used);
  if (unit == "s" || (unit.empty() && value == 0)) return value;
  if (unit == "ms") return value * 1e-3;
  if (unit == "us") return value * 1e-6;
  throw UsageError(cat(what, ": expected a duration such as 50us, 1ms or 0, got \"", text, "\""));
}

// What the report calls a simulation by default: the strategy and what sets it apart.
std::string strategy_label(const train::TrainConfig& c) {
  if (c.parallel.pipeline_stages > 1)
    return cat("pipeline ", c.parallel.pipeline_stages, " stages ", c.parallel.schedule);
  if (c.compress.name != "none") return cat(c.strategy.name, " ", c.compress.name);
  if (c.strategy.name == "ps") return cat("ps ", c.strategy.mode);
  if (c.strategy.name == "local_sgd") return cat("local_sgd H=", c.strategy.period);
  if (c.strategy.name == "easgd") return cat("easgd tau=", c.strategy.period);
  if (c.strategy.name == "gossip") return cat("gossip ", c.strategy.topology);
  return c.strategy.name;
}

// Bytes per second of a rate such as 1gbit; UsageError naming `option`.
double rate_of(const std::string& text, const std::string& option) {
  try {
    return rate_bytes_per_second(text);
  } catch (const UsageError&) {
    throw UsageError(
        cat(option, ": expected a rate such as 100mbit, 1gbit or 500kbit, got \"", text, "\""));
  }
}

using Predictor = std::function<sim::StepPrediction(const sim::Cluster&)>;

// The step of the config's strategy, refused where the simulator has no model of it yet.
Predictor predictor(const train::TrainConfig& c, const sim::Profile& profile,
                    const std::string& engine, int steps) {
  if (c.parallel.tensor > 1)
    throw UsageError("distml simulate: parallel.tensor > 1 is not simulated yet");
  if (c.compress.name != "none" &&
      (c.strategy.name != "allreduce" || c.parallel.pipeline_stages > 1))
    throw UsageError(cat("distml simulate: compress.name = \"", c.compress.name,
                         "\" is simulated with strategy \"allreduce\" (no pipeline) only"));
  if (c.train.slow_rank >= 0 && c.strategy.name != "ps" && c.parallel.pipeline_stages == 1)
    throw UsageError(
        cat("distml simulate: train.slow_rank is simulated with strategy \"ps\" and with "
            "pipelines only, not \"",
            c.strategy.name, "\""));
  if (c.parallel.pipeline_stages > 1 && c.strategy.name == "allreduce") {
    const sim::PipelineOptions o{.stages = static_cast<int>(c.parallel.pipeline_stages),
                                 .micro_batches = static_cast<int>(c.parallel.micro_batches),
                                 .schedule = c.parallel.schedule,
                                 .recompute = c.parallel.recompute,
                                 .partition = c.parallel.partition,
                                 .partition_by_profile = c.parallel.partition_by_profile,
                                 .slow_rank = static_cast<int>(c.train.slow_rank),
                                 .slow_factor = c.train.slow_factor};
    try {
      sim::check_replayable(profile, o);  // before any size: these do not depend on it
    } catch (const ConfigError& e) {
      throw UsageError(cat("distml simulate: ", e.what()));
    }
    return [profile, o](const sim::Cluster& cluster) {
      return sim::predict_pipeline_step(profile, o, cluster);
    };
  }
  if (c.parallel.pipeline_stages > 1)
    throw UsageError(
        cat("distml simulate: pipelines are simulated with strategy \"allreduce\" "
            "only, not \"",
            c.strategy.name, "\""));
  if (c.strategy.name == "zero" && c.strategy.stage == 3)
    throw ConfigError(cat(c.origin("strategy.stage"),
                          ": distml simulate replays ZeRO stages 1 and 2; stage 3's gathers, "
                          "layer by layer around forward and backward, are not simulated yet"));
  if (c.strategy.name == "allreduce" || c.strategy.name == "zero") {
    // ZeRO's buckets are the all-reduce strategy's (zero_strategy.h).
    const auto run = train::allreduce_options(c.strategy);
    sim::AllreduceOptions o;
    o.engine = engine;
    if (c.strategy.name == "zero") o.zero_stage = static_cast<int>(c.strategy.stage);
    o.element_bytes = profile.dtype == "float64" ? 8 : 4;
    o.algorithm = run.algorithm;
    o.first_bucket_bytes = static_cast<double>(run.first_bucket_bytes);
    o.bucket_bytes = static_cast<double>(run.bucket_bytes);
    if (!run.find_unused_parameters) o.flag_bytes = o.element_bytes;  // one element
    if (c.compress.name != "none") {  // the run's compressor, timed here
      auto compress = c.compress;
      compress.seed = c.train.seed;
      try {
        o.compressed = sim::measure_compression(profile, o, compress);
      } catch (const ConfigError& e) {
        throw UsageError(cat("distml simulate: ", e.what()));
      }
    }
    return [profile, o](const sim::Cluster& cluster) {
      return sim::predict_allreduce_step(profile, o, cluster);
    };
  }
  if (c.strategy.name == "ps") {
    sim::PsOptions o{train::ps_options(c), steps};
    o.slow_rank = static_cast<int>(c.train.slow_rank);
    o.slow_factor = c.train.slow_factor;
    return [profile, o](const sim::Cluster& cluster) {
      return sim::predict_ps_step(profile, o, cluster);
    };
  }
  const bool averages_models = c.strategy.name == "local_sgd" ||
                               c.strategy.name == "post_local_sgd" ||
                               (c.strategy.name == "easgd" && !c.strategy.asynchronous);
  if (averages_models && !c.strategy.average_optimizer_state) {
    // Local SGD's average every strategy.period steps; post-local SGD after its warm-up (the
    // steady state: the warm-up's steps are allreduce's); synchronous EASGD's all-reduce of
    // the parameters every period steps, with the run's check of alpha on each cluster.
    const sim::LocalSgdOptions o{engine, train::local_sgd_options(c.strategy).period};
    const bool easgd = c.strategy.name == "easgd";
    return [profile, o, c, easgd](const sim::Cluster& cluster) {
      if (easgd) train::easgd_options(c, cluster.world());
      return sim::predict_local_sgd_step(profile, o, cluster);
    };
  }
  if (c.strategy.name == "gossip") {
    const std::string topology = c.strategy.topology;
    train::parse_gossip_topology(topology);  // before any size
    return [profile, topology](const sim::Cluster& cluster) {
      return sim::predict_gossip_step(profile, topology, cluster);
    };
  }
  throw UsageError(
      cat("distml simulate: strategy.name = \"", c.strategy.name, "\"",
          averages_models              ? " with strategy.average_optimizer_state"
          : c.strategy.name == "easgd" ? " with strategy.asynchronous"
                                       : "",
          " is not simulated yet; \"allreduce\", \"zero\", \"local_sgd\", \"post_local_sgd\", "
          "\"easgd\", \"gossip\" and \"ps\" are (docs/simulator.md)"));
}

void run(const SimulateOptions& o) {
  const auto profile = sim::read_profile(o.profile_path);
  const auto config = o.config_path.empty() ? train::parse_config("", "<defaults>", o.sets)
                                            : train::load_config(o.config_path, o.sets);
  const std::string engine = o.engine.empty() ? profile.engine : o.engine;
  comm::check_engine_name(engine);
  const auto predict = predictor(config, profile, engine, o.steps);
  const std::string label = o.label.empty() ? strategy_label(config) : o.label;
  sim::Cluster cluster;
  cluster.ranks_per_host = o.ranks_per_host;
  std::string link_text;  // for the table's title
  if (!o.link_from.empty()) {
    if (!o.bandwidth.empty() || o.latency != "0" || o.burst == "emulated")
      throw UsageError(
          "--link-from fits the link's latency and bandwidth: leave out --bandwidth, "
          "--latency and --burst emulated");
    const auto fit = fit_link(o.link_from);
    cluster.network = {fit.latency_s, fit.bytes_per_s};
    char text[160];
    std::snprintf(text, sizeof text,
                  "links fitted from %s: latency %.1f us (%lld bytes), %.3g GB/s "
                  "(%lld bytes)",
                  o.link_from.c_str(), 1e6 * fit.latency_s, static_cast<long long>(fit.small_bytes),
                  fit.bytes_per_s / 1e9, static_cast<long long>(fit.large_bytes));
    link_text = text;
  } else {
    if (o.bandwidth.empty())
      throw UsageError("--bandwidth is required (a rate such as 1gbit), or --link-from");
    cluster.network = {parse_duration_s(o.latency, "--latency"),
                       rate_of(o.bandwidth, "--bandwidth")};
    link_text = cat("links ", o.bandwidth, ", latency ", o.latency);
  }
  cluster.shared_cores = o.shared_cores;
  cluster.p2p_overhead_s = parse_duration_s(o.p2p_overhead, "--p2p-overhead");
  cluster.within_host = {parse_duration_s(o.host_latency, "--host-latency"),
                         rate_of(o.host_bandwidth, "--host-bandwidth")};
  cluster.burst_bytes = o.burst == "emulated"
                            ? emulated_burst_bytes(o.bandwidth)
                            : static_cast<double>(parse_bytes(o.burst, "--burst"));
  if (o.burst == "emulated") {  // the link's bytes are frames: a share of them is payload
    cluster.network.bytes_per_s *= kEmulatedPayloadShare;
    cluster.burst_bytes *= kEmulatedPayloadShare;
  }
  if (!o.burst_rate.empty()) cluster.burst_bytes_per_s = rate_of(o.burst_rate, "--burst-rate");
  cluster.hosts_per_rack = o.hosts_per_rack;
  cluster.oversubscription = o.oversubscription;

  const double one_rank_s = sim::one_rank_step_s(profile, cluster);
  const auto sizes = host_counts(o.hosts);
  // Every size first, so that one the strategy refuses stops the run before any output.
  std::vector<sim::StepPrediction> predictions;
  for (int hosts : sizes) {
    cluster.hosts = hosts;
    try {
      predictions.push_back(predict(cluster));
    } catch (const ConfigError& e) {
      throw UsageError(
          cat("--hosts ", hosts, " with --ranks-per-host ", o.ranks_per_host, ": ", e.what()));
    }
  }
  if (!o.json)
    std::printf("%s, %s per rank, %s of gradients; %s\n%6s %6s %10s %10s %12s %14s\n",
                profile.model.c_str(), counted(profile.batch_size, "sample").c_str(),
                readable_bytes(profile.gradient_bytes()).c_str(), link_text.c_str(), "hosts",
                "ranks", "step_s", "efficiency", "exposed_s", "bytes/link");
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const int hosts = cluster.hosts = sizes[i];
    const sim::StepPrediction& p = predictions[i];
    // Samples per second against every rank training a batch alone at its one-rank speed.
    const double efficiency = p.batches * one_rank_s / p.step_s / cluster.world();
    if (o.json) {
      nlohmann::json buckets = nlohmann::json::array();
      for (const auto& b : p.buckets) {
        nlohmann::json bucket = {{"bytes", b.bytes}, {"start_s", b.start_s}, {"end_s", b.end_s}};
        if (b.server >= 0)
          bucket["server"] = b.server;
        else
          bucket["algorithm"] = comm::algorithm_name(b.algorithm);
        buckets.push_back(bucket);
      }
      std::cout << nlohmann::json{{"event", "prediction"},
                                  {"label", label},
                                  {"hosts", hosts},
                                  {"ranks", cluster.world()},
                                  {"step_s", p.step_s},
                                  {"efficiency", efficiency},
                                  {"comm_s", p.comm_s},
                                  {"exposed_comm_s", p.exposed_comm_s},
                                  {"bytes_per_link", p.bytes_per_link},
                                  {"busiest_link", cat("h", p.busiest_host, " out")},
                                  {"buckets", buckets}}
                       .dump()
                << "\n";
    } else {
      std::printf("%6d %6d %10.4f %9.1f%% %12.4f %14s\n", hosts, cluster.world(), p.step_s,
                  100 * efficiency, p.exposed_comm_s, readable_bytes(p.bytes_per_link).c_str());
    }
  }
  // The done line every subcommand's --json ends with.
  if (o.json)
    std::cout << nlohmann::json{{"event", "done"},
                                {"label", label},
                                {"model", profile.model},
                                {"one_rank_step_s", one_rank_s},
                                {"sizes", sizes.size()}}
                     .dump()
              << std::endl;
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto o = std::make_shared<SimulateOptions>();
  auto* sub = app.add_subcommand("simulate", kSimulateDescription);
  sub->add_option("--profile", o->profile_path, "The profile distml train --profile wrote")
      ->required();
  sub->add_option("--config", o->config_path,
                  "TOML file whose strategy is simulated, as for distml train (default: the "
                  "defaults, strategy allreduce)");
  sub->add_option("--set", o->sets, "Override a config key, as for distml train (repeatable)");
  sub->add_option("--hosts", o->hosts, "Host counts to predict (default 1,2,4,8)");
  sub->add_option("--ranks-per-host", o->ranks_per_host, "Ranks on each host")
      ->check(CLI::PositiveNumber);
  sub->add_option("--bandwidth", o->bandwidth,
                  "Each host's link, as distml launch --netns-cluster spells it: 100mbit, 1gbit");
  sub->add_option("--latency", o->latency, "Each link's one-way latency: 50us, 1ms (default 0)");
  sub->add_option("--link-from", o->link_from,
                  "Instead of --bandwidth and --latency: fit them to what distml bench sendrecv "
                  "--json measured on the link (latency from the smallest message, bandwidth "
                  "from the largest), e.g. distml bench sendrecv --np 2 --sizes 4,16M --json");
  sub->add_option("--p2p-overhead", o->p2p_overhead,
                  "Each point-to-point message's start-up in the engine beyond --latency (what "
                  "distml bench sendrecv takes for 4 bytes, less the latency): the parameter "
                  "server's and pipelines' messages (default 0)");
  sub->add_option("--host-bandwidth", o->host_bandwidth,
                  "Within a host, its ranks' copies through memory, shared by them (default "
                  "40gbit, 5 GB/s)");
  sub->add_option("--host-latency", o->host_latency,
                  "Within a host, a copy's start-up (default 2us)");
  sub->add_option("--shared-cores", o->shared_cores,
                  "Every rank of the cluster shares this many cores (emulated hosts on one "
                  "machine); default: each host has its own")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--burst", o->burst,
                  "Bytes a link passes at once after idling, as a token bucket does (64K); "
                  "\"emulated\": distml launch --netns-cluster's links (a burst of 4 ms of the "
                  "rate, which counts the frames' headers too); default 0, a plain link");
  sub->add_option("--burst-rate", o->burst_rate,
                  "The rate at which a burst goes (the wire's, or what the hosts' network stack "
                  "reaches: 2800mbit); default: at once");
  sub->add_option("--hosts-per-rack", o->hosts_per_rack,
                  "Hosts under one switch; the racks' switches meet at a spine (default: one "
                  "switch for all)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--oversubscription", o->oversubscription,
                  "A rack's hosts' link rate over its uplink's (default 1: none)")
      ->check(CLI::Range(1.0, 1e6));
  sub->add_option("--engine", o->engine, "mpi | gloo | local (default: the profile's)");
  sub->add_option("--steps", o->steps,
                  "Steps each parameter-server worker plays out (default 40); the second half "
                  "is measured")
      ->check(CLI::Range(2, 1000000));
  sub->add_option("--label", o->label,
                  "What distml report --predictions calls these predictions (default: the "
                  "strategy, as \"ps bsp\" or \"local_sgd H=8\")");
  sub->add_flag("--json", o->json,
                "One JSON line per cluster size, then a done line (distml report "
                "--predictions plots them)");
  sub->callback([o] { run(*o); });
}

}  // namespace distml::cli
