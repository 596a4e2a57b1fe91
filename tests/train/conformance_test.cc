// The conformance matrix (conformance_table.h): every combination of strategy, split,
// compressor, extra and world size 1-4 is either refused at start with a ConfigError naming the
// key (what the command line turns into exit code 2) or runs, in float64 on ranks that are
// threads, and ends where the single-process reference (conformance_reference.h) ends. One
// suite per strategy, so that ctest runs them side by side.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>

#include "../data/temp_dir.h"
#include "conformance_reference.h"
#include "conformance_table.h"
#include "distml/core/error.h"
#include "distml/data/permutation.h"
#include "distml/data/sharded_sampler.h"
#include "distml/nn/model_registry.h"
#include "trainer_fixture.h"

namespace distml::train::conformance {
namespace {

constexpr std::size_t kRows = 160, kTestRows = 16;  // 160 rows: no epoch ends in 4 steps

// Rows with a signal: the class of an mlp row is the largest of three fixed projections; a
// fastText row is 5 ids (0 pads), the first never 0, its class the first id mod 3.
TaskData task(bool fasttext) {
  TaskData t;
  t.num_classes = 3;
  data::SplitMix64 rng(fasttext ? 31 : 32);
  for (auto* d : {&t.train, &t.test}) {
    d->num_samples = d == &t.train ? kRows : kTestRows;
    d->feature_dim = fasttext ? 5 : 6;
    d->sample_shape = {d->feature_dim};
    for (std::size_t i = 0; i < d->num_samples; ++i) {
      std::vector<float> row;
      for (std::size_t j = 0; j < d->feature_dim; ++j)
        row.push_back(fasttext ? static_cast<float>(j == 0 ? 1 + rng.below(15) : rng.below(16))
                               : static_cast<float>(rng.uniform(-1, 1)));
      d->features.insert(d->features.end(), row.begin(), row.end());
      if (fasttext) {
        d->labels.push_back(static_cast<std::int64_t>(row[0]) % 3);
      } else {
        const float a = row[0] + row[1], b = row[2] - row[3], c = row[4] + row[5] - row[0];
        d->labels.push_back(a > b && a > c ? 0 : b > c ? 1 : 2);
      }
    }
  }
  return t;
}

const TaskData& data_for(const Cell& c) {
  static const TaskData mlp = task(false), fasttext = task(true);
  return c.strategy == Strategy::hybrid ? fasttext : mlp;
}

// The reference's inputs: the rows in float64 (exactly the stored float32 values) and the model
// the trainer builds from train.seed, in float64.
Setup setup_for(const Cell& c) {
  const auto& d = data_for(c).train;
  Setup s;
  s.fasttext = c.strategy == Strategy::hybrid;
  s.x = torch::from_blob(
            const_cast<float*>(d.features.data()),
            {static_cast<std::int64_t>(d.num_samples), static_cast<std::int64_t>(d.feature_dim)},
            torch::kFloat32)
            .to(torch::kFloat64);
  s.y = torch::tensor(d.labels, torch::kLong);
  torch::manual_seed(kSeed);
  auto model =
      s.fasttext ? nn::make_model(
                       {.name = "fasttext", .num_classes = 3, .vocab_size = 16, .embedding_dim = 4})
                 : nn::make_model({.name = "mlp", .mlp_layers = {6, 8, 8, 8, 3}});
  model.to(torch::kFloat64);
  for (const auto& p : model.parameters()) s.initial.push_back(p.detach().clone());
  return s;
}

// How a cell ended: refused (with the message), failed otherwise, or rank 0's outcome.
struct CellRun {
  std::string refusal, failure;
  testing::RankOutcome outcome;
};

CellRun run_on_ranks(const TrainConfig& config, int world, const TaskData& data,
                     const std::string& resume_from = "") {
  std::mutex mutex;
  CellRun run;
  int refused = 0;
  comm::local::run_ranks(world, {}, [&](comm::Communicator& comm) {
    try {
      auto o = testing::train_once(config, comm, data, resume_from);
      std::lock_guard lock(mutex);
      if (comm.rank() == 0) run.outcome = std::move(o);
    } catch (const ConfigError& e) {
      std::lock_guard lock(mutex);
      run.refusal = e.what();
      ++refused;
    } catch (const std::exception& e) {
      std::lock_guard lock(mutex);
      run.failure += cat("rank ", comm.rank(), ": ", e.what(), "\n");
    }
  });
  if (refused > 0 && refused < world)
    run.failure += cat("refused on ", refused, " of ", world, " ranks only: ", run.refusal);
  return run;
}

// The cell through the config parser, as the command line takes it; a resume cell first runs
// kResumeAt steps into a checkpoint folder, then resumes from it to kSteps.
CellRun run_cell(const Cell& c) {
  const auto& data = data_for(c);
  data::testing::TempDir dir;
  const auto with_checkpoints = [&](std::vector<std::string> o) {
    if (c.extra == Extra::resume) o.push_back("train.checkpoint_dir=" + dir.file("ckpt"));
    return o;
  };
  TrainConfig config, first;
  try {
    config = parse_config("", "conformance", with_checkpoints(overrides(c)));
    first = parse_config("", "conformance", with_checkpoints(overrides(c, kResumeAt)));
  } catch (const ConfigError& e) {
    return {.refusal = e.what()};
  }
  if (c.extra != Extra::resume) return run_on_ranks(config, c.world, data);
  auto run = run_on_ranks(first, c.world, data);
  if (!run.refusal.empty() || !run.failure.empty()) return run;
  return run_on_ranks(config, c.world, data, dir.file("ckpt"));
}

// What trajectory_difference (trainer_fixture.h) may be. Exact methods: the float64 rounding
// bound of the trainer tests, kSteps steps of sums in another order. fp16 adds the rounding of
// the all-reduce's partial sums, which the reference leaves out (it averages the fp16 values
// exactly): at most (R + 1) u of the mean magnitude per element and update (u = 2^-11; see
// compress_test.cc), carried into later steps by the momentum, whose weights sum to at most
// 1 / (1 - 0.9) = 10, over kSteps updates; a factor 4 allows for gradients that partly cancel
// between replicas (their mean magnitude above the magnitude of their mean). One replica sums
// nothing: exact.
bool rounds_its_sums(const Cell& c) { return c.compressor == Compressor::fp16 && replicas(c) > 1; }

double tolerance(const Cell& c) {
  const double exact = testing::trajectory_tolerance(kSteps);
  if (!rounds_its_sums(c)) return exact;
  return exact + (replicas(c) + 1) * 0x1p-11 * 10 * kSteps * 4;
}

struct Tally {
  std::string strategy;
  int refused = 0, equal = 0;
  double worst_exact = 0, worst_fp16 = 0;  // the largest differences, and their bounds
  Cell worst_fp16_cell{};
  ~Tally() {
    std::cout << "[ measured ] " << strategy << ": " << refused << " cells refused naming a key, "
              << equal << " equal to the reference; largest difference " << worst_exact
              << " (bound " << testing::trajectory_tolerance(kSteps) << ")";
    if (worst_fp16 > 0)
      std::cout << ", with fp16's rounded sums " << worst_fp16 << " (bound "
                << tolerance(worst_fp16_cell) << ")";
    std::cout << "\n";
  }
};

void walk(Strategy strategy) {
  torch::set_num_threads(1);
  Tally tally{name(strategy)};
  for (Split split : splits())
    for (Compressor compressor : compressors())
      for (Extra extra : extras())
        for (int world = 1; world <= kMaxWorld; ++world) {
          const Cell c{strategy, split, compressor, extra, world};
          const auto key = refused_key(c);
          const auto run = run_cell(c);
          ASSERT_TRUE(run.failure.empty()) << describe(c) << ": " << run.failure;
          if (!key.empty()) {
            ASSERT_FALSE(run.refusal.empty())
                << describe(c) << ": ran; expected a refusal naming " << key;
            EXPECT_NE(run.refusal.find(key), std::string::npos)
                << describe(c) << ": the refusal does not name " << key << ": " << run.refusal;
            ++tally.refused;
            continue;
          }
          ASSERT_TRUE(run.refusal.empty()) << describe(c) << ": refused: " << run.refusal;
          const auto setup = setup_for(c);
          testing::RankOutcome want;
          want.initial = setup.initial;
          want.params = reference_run(c, setup);
          ASSERT_EQ(run.outcome.params.size(), want.params.size()) << describe(c);
          const double d = testing::trajectory_difference(run.outcome, want);
          if (!rounds_its_sums(c)) {
            tally.worst_exact = std::max(tally.worst_exact, d);
          } else if (d > tally.worst_fp16) {
            tally.worst_fp16 = d;
            tally.worst_fp16_cell = c;
          }
          EXPECT_LE(d, tolerance(c)) << describe(c);
          ++tally.equal;
        }
}

TEST(ConformanceAllreduce, EveryCellIsRefusedOrEqualsItsReference) { walk(Strategy::allreduce); }
TEST(ConformanceZero1, EveryCellIsRefusedOrEqualsItsReference) { walk(Strategy::zero1); }
TEST(ConformanceZero2, EveryCellIsRefusedOrEqualsItsReference) { walk(Strategy::zero2); }
TEST(ConformanceZero3, EveryCellIsRefusedOrEqualsItsReference) { walk(Strategy::zero3); }
TEST(ConformanceZero3NoPrefetch, EveryCellIsRefusedOrEqualsItsReference) {
  walk(Strategy::zero3_no_prefetch);
}
TEST(ConformancePs, EveryCellIsRefusedOrEqualsItsReference) { walk(Strategy::ps); }
TEST(ConformanceLocalSgdH1, EveryCellIsRefusedOrEqualsItsReference) {
  walk(Strategy::local_sgd_h1);
}
TEST(ConformanceLocalSgdH2, EveryCellIsRefusedOrEqualsItsReference) {
  walk(Strategy::local_sgd_h2);
}
TEST(ConformancePostLocalSgd, EveryCellIsRefusedOrEqualsItsReference) {
  walk(Strategy::post_local_sgd);
}
TEST(ConformanceEasgd, EveryCellIsRefusedOrEqualsItsReference) { walk(Strategy::easgd); }
TEST(ConformanceGossip, EveryCellIsRefusedOrEqualsItsReference) { walk(Strategy::gossip); }
TEST(ConformanceHybrid, EveryCellIsRefusedOrEqualsItsReference) { walk(Strategy::hybrid); }

// The reference takes replica r's rows of step t as the r-th block of the step's window of
// epoch 0's shuffled order: what the sampler documents (data/sharded_sampler.h).
TEST(ConformanceData, ReplicasTakeBlocksOfOneShuffledOrder) {
  const auto order = data::shuffled_permutation(kRows, kSeed, 0);
  for (int world = 1; world <= kMaxWorld; ++world)
    for (int r = 0; r < world; ++r) {
      data::ShardedSampler sampler(kRows, world, r, kBatch, kSeed, true);
      for (std::size_t t = 0; t < 3; ++t) {
        const auto got = sampler.indices(0, t);
        for (int i = 0; i < kBatch; ++i)
          ASSERT_EQ(got[i], order[(t * world + r) * kBatch + i]) << world << " " << r << " " << t;
      }
    }
}

// The Markdown matrix summarises each strategy and split by its world sizes and by the
// compressors and extras refused at all of them: that summary must say which cells run.
TEST(ConformanceDoc, TheSummaryTellsEveryCell) {
  for (Strategy s : strategies())
    for (Split sp : splits()) {
      const auto worlds = running_worlds(s, sp);
      for (Compressor co : compressors())
        for (Extra e : extras())
          for (int w = 1; w <= kMaxWorld; ++w) {
            const bool runs = worlds.contains(w) && !refused_everywhere(s, sp, co, Extra::plain) &&
                              !refused_everywhere(s, sp, Compressor::none, e);
            EXPECT_EQ(refused_key({s, sp, co, e, w}).empty(), runs) << describe({s, sp, co, e, w});
          }
    }
}

// docs/training.md shows the matrix this table defines, between its markers, exactly.
TEST(ConformanceDoc, TheTrainingGuideShowsThisMatrix) {
  std::ifstream in(DISTML_SOURCE_DIR "/docs/training.md");
  ASSERT_TRUE(in) << "cannot read docs/training.md";
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str(), begin = "<!-- conformance matrix: begin -->\n",
                    end = "<!-- conformance matrix: end -->";
  const auto from = doc.find(begin), to = doc.find(end);
  ASSERT_NE(from, std::string::npos) << "no '" << begin << "' in docs/training.md";
  ASSERT_NE(to, std::string::npos);
  EXPECT_EQ(doc.substr(from + begin.size(), to - from - begin.size()), markdown())
      << "regenerate it: build/tests/train/distml_conformance_doc";
}

}  // namespace
}  // namespace distml::train::conformance
