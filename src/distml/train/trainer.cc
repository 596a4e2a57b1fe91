#include "distml/train/trainer.h"

#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "distml/comm/block_range.h"
#include "distml/core/clock.h"
#include "distml/core/error.h"
#include "distml/core/fnv1a.h"
#include "distml/core/preemption.h"
#include "distml/data/prefetch_loader.h"
#include "distml/data/sharded_sampler.h"
#include "distml/train/checkpoint_contents.h"
#include "distml/train/checkpoint_dir.h"
#include "distml/train/checkpoint_exchange.h"
#include "distml/train/checkpoint_owner.h"
#include "distml/train/generator_state.h"
#include "distml/train/model_export.h"
#include "distml/train/model_setup.h"
#include "distml/train/optimizer_factory.h"
#include "distml/train/pipeline/grid.h"
#include "distml/train/pipeline/pipeline_stage.h"
#include "distml/train/split_model.h"
#include "distml/train/strategies/replicas.h"
#include "distml/train/strategy_factory.h"

namespace distml::train {

namespace {

// Every rank must run the same configuration: compare hashes of the canonical text.
void check_same_config(const TrainConfig& config, comm::Communicator& comm) {
  const std::string text = canonical_text(config);
  Fnv1a hash;
  hash.mix(text.data(), text.size());
  std::string differ;
  for (int r : ranks_unlike_rank0(hash.value(), comm)) differ += cat(differ.empty() ? "" : ", ", r);
  if (!differ.empty())
    throw ConfigError(cat("rank(s) ", differ,
                          " run a different configuration than rank 0: start every rank with "
                          "the same --config file and --set options"));
}

// Collective: checks that every rank runs the same configuration, then forms the grid of
// ranks when the model is split (parallel.pipeline_stages > 1 or parallel.tensor > 1).
std::optional<pipeline::Grid> agreed_grid(const TrainConfig& config, comm::Communicator& world) {
  check_same_config(config, world);
  if (config.train.slow_rank >= world.size())
    throw ConfigError(cat(config.origin("train.slow_rank"),
                          ": train.slow_rank = ", config.train.slow_rank,
                          " is not a rank of this run (0 to ", world.size() - 1, ")"));
  const auto stages = static_cast<int>(config.parallel.pipeline_stages);
  const auto tensor = static_cast<int>(config.parallel.tensor);
  if (stages == 1 && tensor == 1) return std::nullopt;
  if (world.size() % (stages * tensor) != 0)
    throw ConfigError(cat(config.origin("parallel.pipeline_stages"),
                          ": parallel.pipeline_stages = ", stages, " x parallel.tensor = ", tensor,
                          " does not divide the ", world.size(),
                          " ranks of this run (they form replicas x stages x tensor ranks)"));
  return pipeline::make_grid(world, stages, tensor);
}

// The rows this rank trains and evaluates on: all of them, or for data read in part (npz)
// its own block, read into `storage`. A rank that does not train reads none.
const TaskData& rows_for(const TaskData& data, const Strategy& strategy, comm::Communicator& comm,
                         TaskData& storage) {
  if (!data.shard || !strategy.trains()) return data;
  storage = data.shard(comm.rank(), comm.size());
  return storage;
}

// Data held whole is cut from one global order (sharded_sampler.h); a rank's own block of
// rows is shuffled on its own, by a seed of its own.
data::ShardedSampler sampler_for(const TaskData& data, const TrainConfig& c,
                                 comm::Communicator& comm) {
  const auto per_step = static_cast<std::size_t>(c.train.batch_size * c.train.accumulate);
  if (data.is_shard)
    return {data.train.num_samples,
            1,
            0,
            per_step,
            c.train.seed ^ (0x9E3779B97F4A7C15ull * (comm.rank() + 1)),
            true};
  return {data.train.num_samples, comm.size(), comm.rank(), per_step, c.train.seed, true};
}

}  // namespace

struct Trainer::State {
  TrainConfig config;
  comm::Communicator& world;           // every rank of the run
  std::optional<pipeline::Grid> grid;  // with pipeline stages
  std::unique_ptr<Strategy> strategy;  // among the replicas (of this stage, in a pipeline)
  nn::LayerBuilt on_layer_built;       // set where the strategy takes the model as it is built
  nn::Model model;
  std::optional<pipeline::StageOfModel> part;         // with pipeline stages: this one's layers
  std::optional<tensor_parallel::SplitLayers> split;  // with tensor ranks: them split
  std::unique_ptr<pipeline::PipelineStage> stage;
  comm::Communicator& comm;  // the ranks that train (all of them but a parameter server's; in a
                             // pipeline, this stage in every replica)
  TaskData own_rows;         // this rank's rows, for data read in part
  const TaskData& data;      // the rows this rank uses: `own_rows` or the shared data
  data::ShardedSampler sampler;
  Objective objective;
  double base_lr;
  std::unique_ptr<torch::optim::Optimizer> optimizer;  // over what this rank trains
  pipeline::StageStats stage_totals;       // summed over the run's steps (peaks: the largest)
  std::vector<double> window_stage_times;  // since the last step event: compute, wait per step
  std::int64_t global_step = 0;
  Timeline::Lane* lane = nullptr;      // the run's timeline ("main"), when one is recorded
  std::string run_id = this_run_id();  // written in its checkpoints (checkpoint_owner.h)

  State(const TrainConfig& c, comm::Communicator& world, const TaskData& d)
      : config(c),
        world(world),
        grid(agreed_grid(c, world)),
        strategy(make_strategy(c, grid ? *grid->peers : world)),
        on_layer_built(grid ? nn::LayerBuilt() : strategy->on_layer_built()),
        model(build_model(c, d, on_layer_built)),
        part(grid ? std::optional(pipeline::cut_model(
                        model, stage_counts(c, *grid, world, model, d), grid->stages, grid->stage))
                  : std::nullopt),
        split(grid ? split_of(c, *grid, *part, model) : std::nullopt),
        stage(grid ? stage_of(c, *grid, *part, split,
                              [this] {  // the optimizer comes later; SpecTrain asks in a step
                                return sgd_velocity(*optimizer, trained_tensors().parameters);
                              })
                   : nullptr),
        comm(strategy->training_comm() ? *strategy->training_comm()
                                       : (grid ? *grid->peers : world)),
        data(rows_for(d, *strategy, comm, own_rows)),
        sampler(sampler_for(data, c, comm)),
        objective(c, d, model),
        base_lr(c.scale_lr ? linearly_scaled_lr(c.optim.lr, comm.size()) : c.optim.lr),
        optimizer(make_optimizer(trained_tensors().parameters, c.optim)) {}

  // What the strategy keeps consistent among the replicas: the model, or this stage of it
  // (with tensor ranks: this rank's slices of it).
  nn::ModelTensors trained_tensors() const {
    return split ? split->tensors() : part ? part->own : model.tensors();
  }

  // From the sampler's position, so that a run resumed on fewer ranks (whose epochs have
  // more steps) still ends with the last epoch.
  std::int64_t total_steps() const {
    return config.train.max_steps > 0
               ? config.train.max_steps
               : global_step + static_cast<std::int64_t>(sampler.steps_before_epoch(
                                   static_cast<std::uint64_t>(config.train.epochs)));
  }

  // One optimizer step on this rank's batch; returns its mean loss.
  double step(const data::Batch& batch) {
    if (stage) return pipeline_step(batch);
    const std::int64_t micro = config.train.batch_size, k = config.train.accumulate;
    const auto compute_start = Clock::now();
    optimizer->zero_grad();
    double loss_sum = 0;
    for (std::int64_t m = 0; m < k; ++m) {
      strategy->before_backward(m == k - 1);
      torch::Tensor scaled;
      {
        Span forward(lane, "forward", "micro_batch", m);
        scaled =
            objective.mean_loss(model, rows_of(batch, m * micro, micro)) / static_cast<double>(k);
      }
      {
        Span backward(lane, "backward", "micro_batch", m);  // the buckets launch during it
        scaled.backward();
      }
      loss_sum += scaled.item<double>();
    }
    if (world.rank() == config.train.slow_rank) straggle(seconds_since(compute_start));
    {
      Span sync(lane, "grad_sync");  // all-reduce: the wait for buckets still in flight
      strategy->before_optimizer_step();
    }
    {
      Span update(lane, "optimizer");
      if (config.train.clip_grad_norm > 0)
        strategy->clip_gradients(config.train.clip_grad_norm, model.parameters());
      strategy->optimizer_step(*optimizer);
    }
    Span averaging(lane, "model_sync");  // local SGD, EASGD, gossip: the models averaged
    strategy->after_optimizer_step(*optimizer, global_step + 1);
    return loss_sum;
  }

  // The same through this rank's pipeline stage: the stage's micro-batches replace
  // train.accumulate, and the strategy communicates during the stage's last backward; under
  // pipedream every micro-batch's backward is followed by its own update, under ddg every
  // step's delayed backward. The loss is the last stage's (0 on the others).
  double pipeline_step(const data::Batch& batch) {
    optimizer->zero_grad();
    const auto rows = static_cast<std::int64_t>(batch.size);
    const auto input =
        stage->stage() == 0 ? objective.model_input(rows_of(batch, 0, rows)) : torch::Tensor();
    Span stage_step(lane, "pipeline_stage");
    const double loss = stage->step(
        input, rows,
        [&](const torch::Tensor& out, std::int64_t begin, std::int64_t count) {
          return objective.mean_loss_of(out, rows_of(batch, begin, count));
        },
        [&](bool last) { strategy->before_backward(last); }, [&] { stage_update(); });
    pipeline::accumulate(stage_totals, stage->stats());
    window_stage_times.insert(window_stage_times.end(),
                              {stage->stats().compute_seconds, stage->stats().wait_seconds});
    if (!stage->asynchronous()) stage_update();
    return loss;
  }

  // The strategy's and the optimizer's step on what this stage trains.
  void stage_update() {
    strategy->before_optimizer_step();
    strategy->optimizer_step(*optimizer);
    strategy->after_optimizer_step(*optimizer, global_step + 1);
    optimizer->zero_grad();
  }

  // At the end of the run: ddg's delayed backwards still held, applied.
  void drain_pipeline() {
    if (!stage) return;
    optimizer->zero_grad();
    stage->drain([&](bool last) { strategy->before_backward(last); }, [&] { stage_update(); });
    pipeline::accumulate(stage_totals, stage->stats());
  }

  // Straggler experiments: this rank's compute takes slow_factor times as long.
  void straggle(double compute_s) const {
    const double extra = (config.train.slow_factor - 1) * compute_s;
    std::this_thread::sleep_for(std::chrono::duration<double>(extra));
  }

  // Collective: one model on every rank (the strategy's reconcile, BatchNorm statistics
  // averaged), before it is evaluated, saved or exported. With tensor ranks each then gathers
  // its stage's slices into the whole stage; with stages each holds only its own.
  // `for_a_moment`: a mid-run evaluation, after which every replica gets its own state back.
  void consolidate(bool for_a_moment = false) {
    if (for_a_moment)
      strategy->reconcile_for_evaluation(*optimizer);
    else
      strategy->reconcile(*optimizer);
    agree_on_buffers(trained_tensors().buffers, comm);  // BatchNorm statistics: see the header
    if (split) split->gather_into_whole();
  }

  // Collective: the test metrics, every replica scoring its block of the test rows (through
  // its pipeline's stages, with stages: the last one scores, then tells the others).
  EvalMetrics evaluate(bool for_a_moment = false) {
    consolidate(for_a_moment);
    const auto& test = data.test;
    const auto range = data.is_shard
                           ? comm::BlockRange{0, test.num_samples}
                           : comm::block_range(test.num_samples, comm.size(), comm.rank());
    const std::int64_t chunk = std::max<std::int64_t>(256, config.train.batch_size);
    const auto rows = [&](std::int64_t i) {
      const auto begin = range.begin + i * chunk;
      return rows_of(test, begin, std::min<std::int64_t>(chunk, range.end - begin));
    };
    const auto chunks = (static_cast<std::int64_t>(range.end - range.begin) + chunk - 1) / chunk;
    auto sums = objective.empty_sums();
    model.train(false);
    if (grid) {
      pipeline::forward_through(
          part->layers, *grid, chunks, config.train.precision == "bf16",
          [&](std::int64_t i) { return objective.model_input(rows(i)); },
          [&](std::int64_t i, const torch::Tensor& out) {
            objective.add_prediction_to(sums, out, rows(i));
          });
    } else {
      for (std::int64_t i = 0; i < chunks; ++i) objective.add_to(sums, model, rows(i));
    }
    model.train(true);
    comm.allreduce(comm::Buffer{sums.data(), sums.size(), comm::DType::f64});
    if (grid) pipeline::take_from_last_stage(sums, *grid);
    return objective.metrics(sums);
  }

  // Collective: checksum(model.tensors()) (replicas.h), each parameter read while the strategy
  // holds its values, so that ZeRO stage 3 need not hold the whole model.
  std::uint64_t checksum_in_turn() {
    const auto tensors = model.tensors();
    Fnv1a h;
    strategy->read_parameters_in_turn(tensors.parameters,
                                      [&](std::size_t i) { mix_into(h, tensors.parameters[i]); });
    for (const auto& b : tensors.buffers) mix_into(h, b);
    return h.value();
  }

  // A mid-run evaluation: consolidating installs the consensus model (and averages the
  // optimizer state and BatchNorm statistics) on every replica; each replica gets its own
  // back afterwards, so how often a run evaluates does not change its trajectory. Sharded
  // parameters (ZeRO stage 3) hold no values to keep, and the evaluation leaves them.
  EvalMetrics evaluate_without_changing_training() {
    std::vector<torch::Tensor> own, saved;
    for (const auto& tensors : {model.tensors(), trained_tensors()}) {
      if (!strategy->shards_parameters())
        own.insert(own.end(), tensors.parameters.begin(), tensors.parameters.end());
      own.insert(own.end(), tensors.buffers.begin(), tensors.buffers.end());
    }
    const auto state = optimizer_state_tensors(*optimizer);
    own.insert(own.end(), state.begin(), state.end());
    torch::NoGradGuard no_grad;
    for (const auto& t : own) saved.push_back(t.clone());
    const auto metrics = evaluate(/*for_a_moment=*/true);
    for (std::size_t i = 0; i < own.size(); ++i) own[i].copy_(saved[i]);
    return metrics;
  }

  // The ranks that share a checkpoint: every rank of a split model (each saves its own
  // optimizer state), else those that train.
  comm::Communicator& checkpointing() const { return grid ? world : comm; }

  // Collective over the ranks that checkpoint, at steps they all agree on: whether one of them
  // was asked to stop (core/preemption.h), so that all stop after the same step. A check is a
  // round trip (1.7 ms between two local gloo processes, more than a small model's step), so
  // it comes about every half second: each check sets how many steps to the next one from the
  // slowest rank's pace since the last.
  bool stop_agreed() {
    if (--steps_to_check > 0) return false;
    double seen[2] = {preemption_requested() ? 1.0 : 0.0, seconds_since(last_check)};
    checkpointing().allreduce(comm::Buffer{seen, 2, comm::DType::f64}, {.op = comm::ReduceOp::max});
    last_check = Clock::now();
    steps_between_checks = std::clamp<std::int64_t>(
        std::llround(steps_between_checks * 0.5 / std::max(seen[1], 1e-6)), 1, 100000);
    steps_to_check = steps_between_checks;
    return seen[0] > 0;
  }
  std::int64_t steps_between_checks = 1, steps_to_check = 1;
  Clock::time_point last_check = Clock::now();

  // Collective: every rank averages its buffers, rank 0 writes, and all learn whether it did.
  // With stages rank 0 gathers the whole model for it, and frees the others' stages after.
  void save_checkpoint(const data::SamplerPosition& position) {
    consolidate();
    strategy->gather_model();
    if (part) pipeline::gather_on_rank0(*part, *grid);
    const auto ranks =
        gather_rank_states({stage ? stage->random_state() : generator_state(),
                            strategy->save_state(), grid ? optimizer_state(*optimizer) : ""},
                           checkpointing());
    const auto& dir = config.train.checkpoint_dir;
    write_on_rank0(
        checkpoint_file(dir, global_step),
        [&] {
          return encode_checkpoint(model, *optimizer, {global_step, position}, ranks, config);
        },
        run_id, checkpointing());
    if (checkpointing().rank() == 0)
      keep_newest_checkpoints(dir, config.train.keep_checkpoints, run_id);
    if (part) pipeline::release_other_stages(*part);
  }

  // The checkpoint holds the whole model: with stages every rank takes it whole, keeps its
  // own stage (with tensor ranks, its slices), and frees the rest again.
  // With WorldChange::elastic a checkpoint of more or fewer ranks resumes on these: the epoch
  // goes on from the first sample the old world had not taken (sharded_sampler.h).
  // `written_by`: only a checkpoint of that run.
  data::SamplerPosition restore(const std::string& dir, ResumePoint& from, WorldChange change,
                                const std::string& written_by) {
    if (part) pipeline::hold_other_stages(*part);
    strategy->gather_model();  // written below
    auto& ranks = checkpointing();
    const auto read = read_newest_on_rank0(dir, ranks, written_by);
    from.path = read.path;
    const auto resumed = decode_checkpoint(read.payload, read.path, model, *optimizer, ranks.rank(),
                                           ranks.size(), config, change);
    if (split) split->slice_from_whole();
    if (part) pipeline::release_other_stages(*part);
    if (stage)
      stage->set_random_state(resumed.own.rng);
    else if (!resumed.own.rng.empty())  // empty on a rank new to the run: its own seed's
      set_generator_state(resumed.own.rng);
    global_step = resumed.position.global_step;
    from.saved_world_size = resumed.saved_world_size;
    if (resumed.saved_world_size == ranks.size()) {
      strategy->load_state(resumed.own.strategy);
      return resumed.position.sampler;
    }
    if (data.is_shard)
      throw CheckpointError(cat(read.path, ": written by ", resumed.saved_world_size,
                                " ranks that each read their own part of the data; going on with ",
                                ranks.size(), " would read other rows"));
    strategy->load_resharded_state(resumed.strategies, ranks.rank());
    return sampler.resharded(resumed.position.sampler, resumed.saved_world_size);
  }
};

Trainer::Trainer(const TrainConfig& config, comm::Communicator& comm, const TaskData& data) {
  torch::set_num_threads(static_cast<int>(config.train.threads));  // before a profile
  s_ = std::make_unique<State>(config, comm, data);
  check_parameter_budget(config, s_->trained_tensors(), comm);
  // A model the strategy took as it was built runs only through the strategy.
  const bool built_whole = !s_->on_layer_built;
  const auto check_fits = [&] {
    if (s_->strategy->trains()) s_->objective.check_fits(s_->model, s_->data.train);
  };
  if (built_whole) check_fits();
  check_layers_make_the_model(config, s_->grid, s_->model, s_->data);
  if (s_->part) pipeline::release_other_stages(*s_->part);  // once the whole model has run
  s_->strategy->attach(s_->model);
  s_->strategy->setup(s_->trained_tensors());
  if (!built_whole) check_fits();
}

Trainer::~Trainer() = default;

nn::Model& Trainer::model() { return s_->model; }

std::vector<torch::Tensor> Trainer::parameter_values() {
  const auto params = s_->model.parameters();
  std::vector<torch::Tensor> values(params.size());
  s_->strategy->read_parameters_in_turn(
      params, [&](std::size_t i) { values[i] = params[i].detach().clone(); });
  return values;
}

EvalMetrics Trainer::evaluate() { return s_->evaluate(); }

void Trainer::record_into(Timeline* timeline) {
  s_->lane = lane_of(timeline, "main");  // first: lane 0, the top row of the rank
  s_->strategy->record_into(timeline);
}

void Trainer::claim_checkpoint_dir(Arrival arrival) {
  const auto& dir = s_->config.train.checkpoint_dir;
  if (dir.empty()) return;
  on_rank0_for_all(
      [&] {
        s_->run_id = train::claim_checkpoint_dir(dir, checkpoints_newest_first(dir), s_->run_id,
                                                 arrival, "train.checkpoint_dir");
        if (s_->run_id != this_run_id()) ::setenv(kRunIdVar, s_->run_id.c_str(), 1);
      },
      cat("take the checkpoint folder ", dir), s_->world);
}

// The newest checkpoint of the run that owns `dir`, where it wrote one; else the newest of any
// (a folder of checkpoints without run ids). Rank 0 decides: it alone reads the file.
ResumePoint Trainer::resume(const std::string& dir, WorldChange change) {
  std::string owner;
  if (s_->world.rank() == 0) {
    owner = owner_of(dir);
    if (!owner.empty() && checkpoints_of_run(dir, owner).empty()) owner.clear();
  }
  return resume_written_by(dir, change, owner);
}

ResumePoint Trainer::resume_written_by(const std::string& dir, WorldChange change,
                                       const std::string& run_id) {
  if (s_->grid && s_->config.parallel.schedule == "ddg")
    throw ConfigError(cat("--resume ", dir, ": ", kDdgHoldsBatches));
  ResumePoint from;
  // A rank that does not train reads no checkpoint: its strategy hears from the others.
  if (s_->strategy->trains()) s_->sampler.restore(s_->restore(dir, from, change, run_id));
  s_->strategy->resumed_at(s_->global_step);
  from.global_step = s_->global_step;
  return from;
}

std::optional<ResumePoint> Trainer::resume_own(const std::string& dir, WorldChange change) {
  // World rank 0 trains (servers and centres are the last ranks) and decides for all, so that a
  // server resumes exactly when its workers do.
  std::int32_t present = 0;
  if (s_->world.rank() == 0) present = !checkpoints_of_run(dir, s_->run_id).empty();
  s_->world.broadcast(comm::Buffer{&present, 1, comm::DType::i32}, 0);
  if (!present) return std::nullopt;
  return resume_written_by(dir, change, s_->run_id);
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
  const bool reporter = (s.grid ? s.world.rank() : s.comm.rank()) == 0;
  const std::int64_t total = s.total_steps();
  const std::int64_t samples_per_step = t.batch_size * t.accumulate * s.comm.size();
  ScheduleOptions schedule = s.config.schedule;
  if (schedule.total_steps == 0) schedule.total_steps = total;

  TrainResult result;
  bool preempted = false;
  data::SamplerPosition position = s.sampler.position();
  double excluded = 0, overlapped = 0, window_loss = 0;
  std::int64_t window_steps = 0;
  auto window_start = Clock::now();
  // The loop's time is tiled: each step runs from the end of what came before (the step
  // before, or an evaluation or checkpoint after it) to its own end, so that on the timeline
  // the steps and "loop_end" add up to the loop's time (steps / steps_per_sec) exactly.
  Clock::time_point mark;  // where the next span starts
  // Evaluation and checkpoints do not count towards the training loop's time.
  auto aside = [&](const char* name, auto&& work) {
    work();
    const auto end = Clock::now();
    excluded += seconds_between(mark, end);
    if (s.lane) s.lane->add(name, mark, end, "step", s.global_step);
    mark = end;
  };
  std::int64_t saved_at = -1;  // the step of the newest checkpoint written
  // Collective: every rank saves (rank 0 writes); rank 0 reports it.
  auto checkpoint = [&] {
    s.save_checkpoint(position);
    saved_at = s.global_step;
    if (reporter && on_event)
      on_event({{"event", "checkpoint"},
                {"step", s.global_step},
                {"path", checkpoint_file(t.checkpoint_dir, s.global_step)}});
  };
  const auto loop_start = Clock::now();
  mark = loop_start;
  {
    data::PrefetchLoader loader(s.data.train, s.sampler, 2);
    while (s.global_step < total) {
      auto batch = [&] {
        Span waiting(s.lane, "data");  // for the prefetch loader
        return loader.next();
      }();
      if (!batch) continue;  // the loader's end-of-epoch marker
      const double lr = scheduled_lr(schedule, s.base_lr, s.global_step);
      set_lr(*s.optimizer, lr);
      window_loss += s.step(*batch);
      ++window_steps;
      ++s.global_step;
      ++result.steps;
      const auto stats = s.strategy->stats();
      result.comm_time_s += stats.comm_seconds;
      overlapped += stats.overlapped_seconds;
      result.early_bucket_launches += stats.early_launches;
      position = s.sampler.following(batch->position);
      const bool epoch_end = position.epoch != batch->position.epoch;
      if (reporter && on_progress) on_progress(s.global_step, total);

      const bool last = s.global_step == total;
      if (s.global_step % t.log_every == 0 || last) {
        if (s.grid) pipeline::take_from_last_stage({&window_loss, 1}, *s.grid);
        double mean_loss = window_loss / window_steps;
        {
          Span logging(s.lane, "log");
          s.comm.allreduce(comm::Buffer{&mean_loss, 1, comm::DType::f64},
                           {.op = comm::ReduceOp::avg});
        }
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
                     result.comm_time_s > 0 ? overlapped / result.comm_time_s : 0.0}});
        if (s.grid) {  // each step's time per stage, so that the bubbles can be plotted
          const auto e = pipeline::stage_steps(s.window_stage_times, *s.grid,
                                               s.global_step - window_steps + 1);
          if (reporter && on_event) on_event(e);
          s.window_stage_times.clear();
        }
        window_loss = 0;
        window_steps = 0;
        window_start = Clock::now();
      }
      const auto step_end = Clock::now();
      if (s.lane) s.lane->add("step", mark, step_end, "step", s.global_step);
      mark = step_end;
      // The checkpoint first: it installs the consensus on every replica (which the run then
      // continues from, as a resume would), and the evaluation after it changes nothing.
      if (!t.checkpoint_dir.empty() && t.checkpoint_every > 0 &&
          s.global_step % t.checkpoint_every == 0 && !last)
        aside("checkpoint", checkpoint);
      const bool eval_now = t.eval_every > 0 ? s.global_step % t.eval_every == 0 : epoch_end;
      if (eval_now && !last) {
        const double train_s = seconds_since(loop_start) - excluded;  // for time-to-accuracy
        aside("eval", [&] {
          auto m = s.evaluate_without_changing_training();
          if (!reporter || !on_event) return;
          nlohmann::json event = {{"event", "eval"}, {"step", s.global_step}};
          event.update(s.objective.test_metrics(m));
          event["train_s"] = train_s;
          on_event(event);
        });
      }
      // A preemption stops here, where the ranks agree, when there is a checkpoint to go on from.
      if (preemption_caught() && !t.checkpoint_dir.empty() && !last && s.stop_agreed()) {
        preempted = true;
        break;
      }
    }
  }
  s.drain_pipeline();
  const auto loop_end = Clock::now();
  // The loader's shut-down and the pipeline's drain: in the loop's time, in no step.
  if (s.lane) s.lane->add("loop_end", mark, loop_end);
  const double loop_s = seconds_between(loop_start, loop_end) - excluded;
  s.sampler.restore(position);

  if (!t.checkpoint_dir.empty() && saved_at != s.global_step) {
    Span saving(s.lane, "checkpoint");
    checkpoint();
  }
  if (preempted)  // rank 0 says so, once
    throw Preempted(!reporter ? ""
                              : cat("preempted: stopped after step ", s.global_step, " of ", total,
                                    ", checkpointed in ",
                                    checkpoint_file(t.checkpoint_dir, s.global_step),
                                    "; go on with --resume ", t.checkpoint_dir));
  {
    Span evaluating(s.lane, "eval");
    result.test = s.evaluate();  // also consolidates the replicas, before the export
  }
  if (s.grid) {  // each stage's replicas agree; then rank 0 gathers the model to export it
    check_replicas_agree(s.part->own, *s.grid->peers);
    pipeline::gather_on_rank0(*s.part, *s.grid);
    result.param_checksum = checksum(s.model.tensors());
  } else {
    result.param_checksum = check_replicas_agree(s.checksum_in_turn(), s.comm);
  }
  s.strategy->finish();
  result.strategy_report = s.strategy->report();
  if (s.grid) {
    auto& report = result.strategy_report["pipeline"];
    report = pipeline::stage_report(s.stage_totals, *s.grid, *s.part,
                                    parameter_count(s.trained_tensors()));
    if (s.config.parallel.max_stage_params > 0)
      report["max_stage_params"] = s.config.parallel.max_stage_params;
    report["schedule"] = s.config.parallel.schedule;
    report["micro_batches"] = s.grid->stages > 1 ? s.config.parallel.micro_batches : 1;
  }
  const bool exports = !t.export_path.empty() || !t.export_module.empty();
  if (exports) s.strategy->gather_model();  // ZeRO stage 3's model is sharded until now
  // Last, after every collective: a failure here cannot leave other ranks waiting.
  if (reporter && exports) export_model(s.model, t.export_path, t.export_module);
  result.global_step = s.global_step;
  result.bytes_sent = s.strategy->stats().bytes_sent;
  result.consensus_distance = s.strategy->stats().consensus_distance;
  result.optimizer_state_bytes = s.strategy->stats().optimizer_state_bytes +
                                 payload_bytes(optimizer_state_tensors(*s.optimizer));
  if (loop_s > 0 && result.steps > 0) {
    result.steps_per_sec = result.steps / loop_s;
    result.samples_per_sec = result.steps_per_sec * samples_per_step;
  }
  result.overlap_fraction = result.comm_time_s > 0 ? overlapped / result.comm_time_s : 0;
  result.wall_s = seconds_since(start);
  return result;
}

}  // namespace distml::train
