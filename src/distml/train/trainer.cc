#include "distml/train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "distml/comm/block_range.h"
#include "distml/core/clock.h"
#include "distml/core/error.h"
#include "distml/data/prefetch_loader.h"
#include "distml/data/sharded_sampler.h"
#include "distml/train/checkpoint_file.h"
#include "distml/train/optimizer_factory.h"
#include "distml/train/strategies/replicas.h"
#include "distml/train/strategy_factory.h"
#include "distml/train/tensor_buffer.h"

namespace distml::train {
namespace {

std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Model options completed from the data: classes, input shape, vocabulary.
nn::ModelOptions model_options(const TrainConfig& config, const TaskData& data) {
  nn::ModelOptions m = config.model;
  if (data.kind == TaskKind::language_model) {
    m.vocab_size = data.num_classes;
    return m;
  }
  m.num_classes = data.num_classes;
  const auto& shape = data.train.sample_shape;
  if (shape.size() == 2) {
    m.in_channels = 1;
    m.image_size = static_cast<std::int64_t>(shape[0]);
  } else if (shape.size() == 3) {
    m.in_channels = static_cast<std::int64_t>(shape[0]);
    m.image_size = static_cast<std::int64_t>(shape[1]);
  }
  if (m.name == "mlp") {
    const auto features = static_cast<std::int64_t>(data.train.feature_dim);
    if (m.mlp_layers.front() != features || m.mlp_layers.back() != data.num_classes)
      throw ConfigError(cat(config.source, ": model.layers must start with the ", features,
                            " input features and end with the ", data.num_classes,
                            " classes of the data, got ", m.mlp_layers.front(), " ... ",
                            m.mlp_layers.back()));
  }
  return m;
}

torch::ScalarType scalar_type(const std::string& dtype) {
  return dtype == "float64" ? torch::kFloat64 : torch::kFloat32;
}

// torch's default generator is process-wide: ranks that are threads of one process must not
// draw from it at the same time, or their initial weights would depend on the interleaving.
// The weights are drawn in float32 and then converted, so both dtypes start from one model.
nn::Model seeded_model(const nn::ModelOptions& options, std::uint64_t seed,
                       torch::ScalarType dtype) {
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  torch::manual_seed(seed);
  auto model = nn::make_model(options);
  model.module().to(dtype);
  return model;
}

// Keys a resumed run may change: they steer the run, not the trajectory.
bool steers_the_run_only(const std::string& key) {
  static const std::set<std::string> keys = {
      "train.epochs",     "train.max_steps",        "train.log_every",
      "train.eval_every", "train.checkpoint_every", "train.checkpoint_dir",
      "train.export",     "train.timeout_s",        "train.threads"};
  return keys.contains(key);
}

// "key = value" lines of a canonical text that differ between two configs, run keys aside.
std::vector<std::string> trajectory_differences(const std::string& saved, const std::string& now) {
  auto lines = [](const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  };
  auto a = lines(saved), b = lines(now);
  std::vector<std::string> diffs;
  for (std::size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string x = i < a.size() ? a[i] : "", y = i < b.size() ? b[i] : "";
    if (x == y || steers_the_run_only(y.substr(0, y.find(' ')))) continue;
    diffs.push_back(cat("checkpoint has '", x, "', this run '", y, "'"));
  }
  return diffs;
}

torch::Tensor bytes_tensor(const std::string& s) {
  auto t = torch::empty({static_cast<std::int64_t>(s.size())}, torch::kUInt8);
  std::memcpy(t.data_ptr(), s.data(), s.size());
  return t;
}
std::string tensor_bytes(const torch::Tensor& t) {
  return {static_cast<const char*>(t.data_ptr()), static_cast<std::size_t>(t.numel())};
}

}  // namespace

std::string checkpoint_path(const std::string& dir) {
  return (std::filesystem::path(dir) / "checkpoint.dml").string();
}

namespace {

// Every rank must run the same configuration: compare hashes of the canonical text.
void check_same_config(const TrainConfig& config, comm::Communicator& comm) {
  const std::string text = canonical_text(config);
  std::uint64_t mine = fnv1a(text.data(), text.size());
  std::vector<std::uint64_t> all(comm.size());
  comm.allgather(comm::ConstBuffer{&mine, 1, comm::DType::i64},
                 comm::Buffer{all.data(), all.size(), comm::DType::i64});
  std::string differ;
  for (int r = 1; r < comm.size(); ++r)
    if (all[r] != all[0]) differ += cat(differ.empty() ? "" : ", ", r);
  if (!differ.empty())
    throw ConfigError(cat("rank(s) ", differ,
                          " run a different configuration than rank 0: start every rank with "
                          "the same --config file and --set options"));
}

// The strategy, once every rank is known to run the same configuration.
std::unique_ptr<Strategy> agreed_strategy(const TrainConfig& config, comm::Communicator& world) {
  check_same_config(config, world);
  if (config.train.slow_rank >= world.size())
    throw ConfigError(cat(config.source, ": train.slow_rank = ", config.train.slow_rank,
                          " is not a rank of this run (0 to ", world.size() - 1, ")"));
  return make_strategy(config, world);
}

}  // namespace

struct Trainer::State {
  TrainConfig config;
  comm::Communicator& world;  // every rank of the run
  const TaskData& data;
  nn::Model model;
  std::unique_ptr<Strategy> strategy;
  comm::Communicator& comm;  // the ranks that train (all of them but a parameter server's)
  data::ShardedSampler sampler;
  double base_lr;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::int64_t global_step = 0;

  State(const TrainConfig& c, comm::Communicator& world, const TaskData& d)
      : config(c),
        world(world),
        data(d),
        model(seeded_model(model_options(c, d), c.train.seed, scalar_type(c.train.dtype))),
        strategy(agreed_strategy(c, world)),
        comm(strategy->training_comm() ? *strategy->training_comm() : world),
        sampler(d.train.num_samples, comm.size(), comm.rank(),
                c.train.batch_size * c.train.accumulate, c.train.seed, /*drop_last=*/true),
        base_lr(c.scale_lr ? linearly_scaled_lr(c.optim.lr, comm.size()) : c.optim.lr),
        optimizer(make_optimizer(model.parameters(), c.optim)) {}

  std::int64_t total_steps() const {
    return config.train.max_steps > 0
               ? config.train.max_steps
               : config.train.epochs * static_cast<std::int64_t>(sampler.steps_per_epoch());
  }

  // Cross-entropy of a batch: summed (for evaluation) or mean (for training), and the number
  // of correct predictions.
  struct Loss {
    torch::Tensor value;
    std::int64_t correct = 0, count = 0;
  };
  Loss loss_of(const float* features, const std::int64_t* labels, std::int64_t rows,
               torch::nn::functional::CrossEntropyFuncOptions::reduction_t reduction,
               bool count_correct) {
    const auto dim = static_cast<std::int64_t>(data.train.feature_dim);
    auto x = torch::from_blob(const_cast<float*>(features), {rows, dim}, torch::kFloat32);
    torch::Tensor input, target;
    if (data.kind == TaskKind::language_model) {
      auto ids = x.to(torch::kInt64);
      input = ids.narrow(1, 0, dim - 1);
      target = ids.narrow(1, 1, dim - 1).reshape(-1);
    } else {
      input = x.to(scalar_type(config.train.dtype));
      target = torch::from_blob(const_cast<std::int64_t*>(labels), {rows}, torch::kInt64);
    }
    auto logits = model.forward(input);
    logits = logits.reshape({target.size(0), -1});
    Loss out;
    out.value = torch::nn::functional::cross_entropy(
        logits, target, torch::nn::functional::CrossEntropyFuncOptions().reduction(reduction));
    out.count = target.size(0);
    if (count_correct) out.correct = logits.argmax(1).eq(target).sum().item<std::int64_t>();
    return out;
  }

  // One optimizer step on this rank's batch; returns its mean loss.
  double step(const data::Batch& batch) {
    const std::int64_t micro = config.train.batch_size, k = config.train.accumulate;
    const auto compute_start = Clock::now();
    optimizer->zero_grad();
    double loss_sum = 0;
    for (std::int64_t m = 0; m < k; ++m) {
      strategy->before_backward(m == k - 1);
      auto loss = loss_of(batch.features.data() + m * micro * batch.feature_dim,
                          batch.labels.data() + m * micro, micro, torch::kMean, false);
      auto scaled = loss.value / static_cast<double>(k);
      scaled.backward();
      loss_sum += scaled.item<double>();
    }
    if (world.rank() == config.train.slow_rank) straggle(seconds_since(compute_start));
    strategy->before_optimizer_step();
    strategy->optimizer_step(*optimizer);
    strategy->after_optimizer_step(*optimizer, global_step + 1);
    return loss_sum;
  }

  // Straggler experiments: this rank's compute takes slow_factor times as long.
  void straggle(double compute_s) const {
    const double extra = (config.train.slow_factor - 1) * compute_s;
    std::this_thread::sleep_for(std::chrono::duration<double>(extra));
  }

  // Collective: one model on every rank (the strategy's reconcile, BatchNorm statistics
  // averaged), before it is evaluated, saved or exported.
  void consolidate() {
    strategy->reconcile(*optimizer);
    average_buffers();
  }

  // Running statistics (BatchNorm) differ between ranks: average them (see the header).
  void average_buffers() {
    torch::NoGradGuard no_grad;
    for (auto& b : model.named_buffers()) {
      auto& t = b.value();
      if (t.is_floating_point())
        comm.allreduce(buffer_of(t), {.op = comm::ReduceOp::avg});
      else
        comm.broadcast(buffer_of(t), 0);
    }
  }

  EvalMetrics evaluate() {
    consolidate();
    const auto& test = data.test;
    auto range = comm::block_range(test.num_samples, comm.size(), comm.rank());
    const std::int64_t chunk = std::max<std::int64_t>(256, config.train.batch_size);
    double sums[3] = {0, 0, 0};  // loss, correct, count
    model.module().eval();
    {
      torch::NoGradGuard no_grad;
      for (std::size_t i = range.begin; i < range.end; i += chunk) {
        const auto rows = std::min<std::int64_t>(chunk, range.end - i);
        auto l = loss_of(test.row(i), test.labels.data() + i, rows, torch::kSum, true);
        sums[0] += l.value.item<double>();
        sums[1] += l.correct;
        sums[2] += l.count;
      }
    }
    model.module().train();
    comm.allreduce(comm::Buffer{sums, 3, comm::DType::f64});
    EvalMetrics m;
    m.count = static_cast<std::int64_t>(sums[2]);
    if (m.count > 0) {
      m.loss = sums[0] / sums[2];
      m.accuracy = sums[1] / sums[2];
    }
    if (data.kind == TaskKind::language_model) m.perplexity = std::exp(m.loss);
    return m;
  }

  // Collective: every rank averages its buffers, rank 0 writes, and all learn whether it did.
  void save_checkpoint(const data::SamplerPosition& position) {
    consolidate();
    const std::string& dir = config.train.checkpoint_dir;
    std::int32_t failed = 0;
    std::string why;
    if (comm.rank() == 0) {
      try {
        torch::serialize::OutputArchive archive, model_archive, optimizer_archive;
        model.module().save(model_archive);
        optimizer->save(optimizer_archive);
        archive.write("model", model_archive);
        archive.write("optimizer", optimizer_archive);
        archive.write("global_step", torch::tensor(global_step, torch::kInt64));
        archive.write("sampler_epoch",
                      torch::tensor(static_cast<std::int64_t>(position.epoch), torch::kInt64));
        archive.write("sampler_step",
                      torch::tensor(static_cast<std::int64_t>(position.step), torch::kInt64));
        archive.write("world_size", torch::tensor(comm.size(), torch::kInt64));
        archive.write("rng", at::detail::getDefaultCPUGenerator().get_state());
        archive.write("config", bytes_tensor(canonical_text(config)));
        std::ostringstream out;
        archive.save_to(out);
        write_checked_file(checkpoint_path(dir), out.str());
      } catch (const std::exception& e) {
        failed = 1;
        why = e.what();
      }
    }
    comm.broadcast(comm::Buffer{&failed, 1, comm::DType::i32}, 0);
    if (!failed) return;
    if (comm.rank() == 0) throw CheckpointError(why);
    throw CheckpointError(cat("rank 0 could not write the checkpoint in ", dir));
  }

  // Rank 0 reads the file and sends it to the others, so ranks need not share a disk.
  std::string read_checkpoint(const std::string& dir) {
    std::string payload, why;
    std::int64_t size = -1;
    if (comm.rank() == 0) {
      try {
        payload = read_checked_file(checkpoint_path(dir));
        size = static_cast<std::int64_t>(payload.size());
      } catch (const std::exception& e) {
        why = e.what();
      }
    }
    comm.broadcast(comm::Buffer{&size, 1, comm::DType::i64}, 0);
    if (size < 0) {
      if (comm.rank() == 0) throw CheckpointError(why);
      throw CheckpointError(cat("rank 0 could not read the checkpoint in ", dir));
    }
    payload.resize(size);
    comm.broadcast(comm::Buffer{payload.data(), payload.size(), comm::DType::u8}, 0);
    return payload;
  }

  data::SamplerPosition restore(const std::string& dir) {
    const std::string payload = read_checkpoint(dir), path = checkpoint_path(dir);
    torch::serialize::InputArchive archive, model_archive, optimizer_archive;
    torch::Tensor t;
    try {
      archive.load_from(payload.data(), payload.size());
      archive.read("config", t);
      auto diffs = trajectory_differences(tensor_bytes(t), canonical_text(config));
      if (!diffs.empty()) throw CheckpointError(cat(path, ": cannot resume: ", diffs.front()));
      archive.read("world_size", t);
      if (t.item<std::int64_t>() != comm.size())
        throw CheckpointError(cat(path, ": written by a run of ", t.item<std::int64_t>(),
                                  " ranks; resume it with the same number, not ", comm.size()));
      archive.read("model", model_archive);
      model.module().load(model_archive);
      archive.read("optimizer", optimizer_archive);
      optimizer->load(optimizer_archive);
      archive.read("global_step", t);
      global_step = t.item<std::int64_t>();
      data::SamplerPosition position;
      archive.read("sampler_epoch", t);
      position.epoch = t.item<std::int64_t>();
      archive.read("sampler_step", t);
      position.step = t.item<std::int64_t>();
      archive.read("rng", t);
      at::Generator generator = at::detail::getDefaultCPUGenerator();  // a handle to it
      generator.set_state(t);
      return position;
    } catch (const CheckpointError&) {
      throw;
    } catch (const std::exception& e) {
      throw CheckpointError(cat(path, ": unreadable checkpoint contents: ", e.what()));
    }
  }

  // Fails unless every rank holds bit-identical parameters and buffers.
  std::uint64_t check_replicas_agree() {
    std::uint64_t h = 1469598103934665603ull;
    auto mix = [&](const torch::Tensor& t) {
      auto c = t.contiguous();
      h = fnv1a(c.data_ptr(), c.numel() * c.element_size(), h);
    };
    for (auto& p : model.parameters()) mix(p);
    for (auto& b : model.named_buffers()) mix(b.value());
    std::vector<std::uint64_t> all(comm.size());
    comm.allgather(comm::ConstBuffer{&h, 1, comm::DType::i64},
                   comm::Buffer{all.data(), all.size(), comm::DType::i64});
    for (int r = 1; r < comm.size(); ++r)
      if (all[r] != all[0])
        throw InternalError(
            cat("after training, rank ", r, " holds parameters that differ from rank 0's"));
    return h;
  }
};

Trainer::Trainer(const TrainConfig& config, comm::Communicator& comm, const TaskData& data)
    : s_(std::make_unique<State>(config, comm, data)) {
  torch::set_num_threads(static_cast<int>(config.train.threads));
  s_->strategy->setup(s_->model.module());
}

Trainer::~Trainer() = default;

nn::Model& Trainer::model() { return s_->model; }

EvalMetrics Trainer::evaluate() { return s_->evaluate(); }

void Trainer::resume(const std::string& dir) {
  s_->sampler.restore(s_->restore(dir));
  s_->strategy->resumed_at(s_->global_step);
}

TrainResult Trainer::run(const EventSink& on_event, const ProgressSink& on_progress) {
  State& s = *s_;
  const auto start = Clock::now();
  if (!s.strategy->trains()) {  // a parameter server: it serves until the workers finish
    s.strategy->serve();
    TrainResult served;
    served.bytes_sent = s.strategy->stats().bytes_sent;
    served.wall_s = seconds_since(start);
    return served;
  }
  const auto& t = s.config.train;
  const bool reporter = s.comm.rank() == 0;
  const std::int64_t total = s.total_steps();
  const std::int64_t samples_per_step = t.batch_size * t.accumulate * s.comm.size();
  ScheduleOptions schedule = s.config.schedule;
  if (schedule.total_steps == 0) schedule.total_steps = total;

  TrainResult result;
  data::SamplerPosition position = s.sampler.position();
  double excluded = 0, exposed = 0, window_loss = 0;
  std::int64_t window_steps = 0;
  auto window_start = Clock::now();
  // Evaluation and checkpoints do not count towards the training loop's time.
  auto aside = [&](auto&& work) {
    const auto t0 = Clock::now();
    work();
    excluded += seconds_since(t0);
  };
  // Collective: every rank saves (rank 0 writes); rank 0 reports it.
  auto checkpoint = [&] {
    s.save_checkpoint(position);
    if (reporter && on_event)
      on_event({{"event", "checkpoint"},
                {"step", s.global_step},
                {"path", checkpoint_path(t.checkpoint_dir)}});
  };
  const auto loop_start = Clock::now();
  {
    data::PrefetchLoader loader(s.data.train, s.sampler, 2);
    while (s.global_step < total) {
      auto batch = loader.next();
      if (!batch) continue;  // the loader's end-of-epoch marker
      const double lr = scheduled_lr(schedule, s.base_lr, s.global_step);
      set_lr(*s.optimizer, lr);
      window_loss += s.step(*batch);
      ++window_steps;
      ++s.global_step;
      ++result.steps;
      const auto stats = s.strategy->stats();
      result.comm_time_s += stats.comm_seconds;
      exposed += stats.exposed_seconds;
      result.early_bucket_launches += stats.early_launches;
      position = batch->position;
      const bool epoch_end = ++position.step == s.sampler.steps_per_epoch();
      if (epoch_end) position = {position.epoch + 1, 0};
      if (reporter && on_progress) on_progress(s.global_step, total);

      const bool last = s.global_step == total;
      if (s.global_step % t.log_every == 0 || last) {
        double mean_loss = window_loss / window_steps;
        s.comm.allreduce(comm::Buffer{&mean_loss, 1, comm::DType::f64},
                         {.op = comm::ReduceOp::avg});
        const double window_s = seconds_since(window_start);
        if (reporter && on_event)
          on_event({{"event", "step"},
                    {"step", s.global_step},
                    {"epoch", position.epoch - (epoch_end ? 1 : 0)},
                    {"loss", mean_loss},
                    {"lr", lr},
                    {"samples_per_sec", window_steps * samples_per_step / window_s},
                    {"comm_time_s", result.comm_time_s},
                    {"overlap_fraction",
                     result.comm_time_s > 0 ? 1 - exposed / result.comm_time_s : 0.0}});
        window_loss = 0;
        window_steps = 0;
        window_start = Clock::now();
      }
      const bool eval_now = t.eval_every > 0 ? s.global_step % t.eval_every == 0 : epoch_end;
      if (eval_now && !last) {
        const double train_s = seconds_since(loop_start) - excluded;  // for time-to-accuracy
        aside([&] {
          auto m = s.evaluate();
          if (reporter && on_event)
            on_event({{"event", "eval"},
                      {"step", s.global_step},
                      {"test_loss", m.loss},
                      {"test_accuracy", m.accuracy},
                      {"train_s", train_s}});
        });
      }
      if (!t.checkpoint_dir.empty() && t.checkpoint_every > 0 &&
          s.global_step % t.checkpoint_every == 0 && !last)
        aside(checkpoint);
    }
  }
  const double loop_s = seconds_since(loop_start) - excluded;
  s.sampler.restore(position);

  if (!t.checkpoint_dir.empty()) checkpoint();
  result.test = s.evaluate();  // also consolidates the replicas, before the export
  result.param_checksum = s.check_replicas_agree();
  s.strategy->finish();
  result.strategy_report = s.strategy->report();
  // Last, after every collective: a failure here cannot leave other ranks waiting.
  if (!t.export_path.empty() && reporter) {
    std::vector<std::pair<std::string, torch::Tensor>> named;
    for (auto& p : s.model.named_parameters()) named.emplace_back(p.key(), p.value());
    for (auto& b : s.model.named_buffers()) named.emplace_back(b.key(), b.value());
    export_tensors(t.export_path, named);
  }
  result.global_step = s.global_step;
  result.bytes_sent = s.strategy->stats().bytes_sent;
  result.consensus_distance = s.strategy->stats().consensus_distance;
  result.optimizer_state_bytes = s.strategy->stats().optimizer_state_bytes +
                                 payload_bytes(optimizer_state_tensors(*s.optimizer));
  if (loop_s > 0 && result.steps > 0) {
    result.steps_per_sec = result.steps / loop_s;
    result.samples_per_sec = result.steps_per_sec * samples_per_step;
  }
  result.overlap_fraction = result.comm_time_s > 0 ? 1 - exposed / result.comm_time_s : 0;
  result.wall_s = seconds_since(start);
  return result;
}

}  // namespace distml::train
