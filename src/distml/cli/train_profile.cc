#include "train_profile.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <thread>

#include "distml/core/error.h"
#include "distml/nn/layers.h"
#include "distml/train/model_setup.h"
#include "distml/train/objective.h"
#include "distml/train/pipeline/profile.h"

namespace distml::cli {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Per step (the "step" spans), the seconds of each phase inside it; the medians over the
// steps, the first left out when there are more. One pass: a lane records each span when it
// ends, so a step's phases come just before the step itself, and what runs between steps
// (an evaluation, a checkpoint) starts before the next step does.
void measure_phases(const Timeline::Lane& lane, sim::Profile& p) {
  std::map<std::string, std::vector<double>> per_step;  // phase -> seconds in each step
  std::vector<double> eval_s;
  std::vector<const Timeline::Event*> since_last_step;
  std::size_t steps = 0;
  for (const auto& e : lane.events()) {
    const std::string_view name = e.name;
    if (name == "eval") eval_s.push_back(e.duration_ns * 1e-9);
    if (name != "step") {
      since_last_step.push_back(&e);
      continue;
    }
    std::map<std::string_view, double> in_step;
    double recorded = 0;  // every span inside the step (communication's included)
    for (const auto* inner : since_last_step)
      if (inner->start_ns >= e.start_ns) {
        in_step[inner->name] += inner->duration_ns * 1e-9;
        recorded += inner->duration_ns * 1e-9;
      }
    since_last_step.clear();
    for (const char* phase : {"data", "forward", "backward", "optimizer"})
      per_step[phase].push_back(in_step[phase]);
    per_step["step"].push_back(e.duration_ns * 1e-9);
    per_step["other"].push_back(std::max(0.0, e.duration_ns * 1e-9 - recorded));
    ++steps;
  }
  if (steps > 1)
    for (auto& [phase, seconds] : per_step) seconds.erase(seconds.begin());
  p.steps = static_cast<std::int64_t>(per_step["step"].size());
  p.data_s = median(per_step["data"]);
  p.forward_s = median(per_step["forward"]);
  p.backward_s = median(per_step["backward"]);
  p.optimizer_s = median(per_step["optimizer"]);
  p.other_s = median(per_step["other"]);
  p.step_s = median(per_step["step"]);
  p.eval_s = median(eval_s);
}

// Seconds after backward starts when each layer's gradients are ready, scaled to `backward_s`.
std::vector<double> layer_ready_s(const std::vector<train::pipeline::LayerCost>& costs,
                                  double backward_s) {
  double total = 0;
  for (const auto& c : costs) total += c.backward_s;
  std::vector<double> ready(costs.size());
  double done = 0;
  for (std::size_t i = costs.size(); i-- > 0;) {
    done += costs[i].backward_s;
    ready[i] = total > 0 ? done / total * backward_s : backward_s;
  }
  return ready;
}

}  // namespace

sim::Profile measure_profile(Timeline& timeline, const train::TrainConfig& config,
                             const train::TaskData& data, int world, const std::string& engine) {
  sim::Profile p;
  p.model = config.model.name;
  p.dtype = config.train.dtype;
  p.engine = engine;
  p.batch_size = config.train.batch_size * config.train.accumulate;
  p.world = world;
  p.threads = static_cast<int>(config.train.threads);
  p.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  measure_phases(timeline.lane("main"), p);

  // The layers are measured on a model of their own: the trained one's gradients belong to
  // its strategy, whose hooks would take a backward outside a step for a second gradient.
  const auto model = train::build_model(config, data);
  const auto tensors = model.tensors();
  for (std::size_t i = 0; i < tensors.parameters.size(); ++i) {
    const auto& t = tensors.parameters[i];
    if (t.requires_grad())
      p.parameters.push_back({tensors.parameter_names[i],
                              static_cast<double>(t.numel() * t.element_size()), p.backward_s,
                              t.sizes().vec()});
  }
  std::vector<nn::Layer> layers;
  try {
    layers = model.layers();
  } catch (const ConfigError&) {  // not a sequence of layers: by bytes, below
  }
  if (!layers.empty()) {
    // Each layer at the batch (for the gradients' ready times) and at the micro-batches of
    // 2, 4 and 8 of them (for pipelines).
    const train::Objective objective(config, data, model);
    const std::int64_t batch =
        std::min<std::int64_t>(config.train.batch_size, data.train.num_samples);
    for (std::int64_t parts : {8, 4, 2, 1}) {
      const std::int64_t rows = (batch + parts - 1) / parts;
      if (!p.layers.empty() && p.layers.back().rows == rows) continue;
      const auto sample = train::rows_of(data.train, 0, rows);
      p.layers.push_back(
          {rows, train::pipeline::profile_layers(layers, tensors, objective.model_input(sample),
                                                 [&](const torch::Tensor& out) {
                                                   return objective.mean_loss_of(out, sample);
                                                 })});
    }
    for (const auto& l : layers) p.layer_names.push_back(l.name);
    const auto ready = layer_ready_s(p.layers.back().costs, p.backward_s);
    for (auto& q : p.parameters)
      for (std::size_t l = 0; l < layers.size(); ++l)
        for (const auto& module : layers[l].modules)
          if (q.name.rfind(module + ".", 0) == 0) q.ready_s = ready[l];
  } else {
    double after = 0, total = 0;
    for (const auto& q : p.parameters) total += q.bytes;
    for (auto it = p.parameters.rbegin(); it != p.parameters.rend(); ++it) {
      after += it->bytes;
      it->ready_s = total > 0 ? after / total * p.backward_s : p.backward_s;
    }
  }
  return p;
}

void replay_main_lane(const nlohmann::json& trace, const std::string& source, Timeline& timeline,
                      std::deque<std::string>& names) {
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array())
    throw DataError(cat(source, ": not a timeline (no \"traceEvents\" list)"));
  const auto& events = trace["traceEvents"];
  int main_tid = -1;
  for (const auto& e : events)
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name" &&
        e.value("pid", -1) == 0 && e.contains("args") && e["args"].value("name", "") == "main")
      main_tid = e.value("tid", -1);
  if (main_tid < 0) throw DataError(cat(source, ": no \"main\" lane of rank 0 in the timeline"));
  struct Span {
    std::string name;
    std::int64_t start_ns, end_ns;
  };
  std::vector<Span> spans;
  for (const auto& e : events) {
    if (e.value("ph", "") != "X" || e.value("pid", -1) != 0 || e.value("tid", -1) != main_tid)
      continue;
    if (!e.contains("ts") || !e["ts"].is_number() || !e.contains("dur") || !e["dur"].is_number())
      throw DataError(
          cat(source, ": an event of rank 0's main lane without \"ts\" and \"dur\": ", e.dump()));
    // Microseconds with three decimals: whole nanoseconds.
    const auto start = std::llround(e["ts"].get<double>() * 1e3);
    spans.push_back(
        {e.value("name", ""), start, start + std::llround(e["dur"].get<double>() * 1e3)});
  }
  std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.end_ns != b.end_ns ? a.end_ns < b.end_ns : a.start_ns > b.start_ns;
  });
  auto& lane = timeline.lane("main");
  for (const auto& s : spans) lane.add_ns(names.emplace_back(s.name).c_str(), s.start_ns, s.end_ns);
}

}  // namespace distml::cli
