#include "distml/train/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "distml/core/error.h"

namespace distml::train {
namespace {

// The message of the ConfigError that parsing `text` as "x.toml" throws; a test failure if none.
std::string config_error(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    parse_config(text, "x.toml", overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError for:\n" << text;
  return "";
}

std::string override_error(const std::string& override_text) {
  return config_error("", {override_text});
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Config, EmptyDocumentKeepsEveryDefault) {
  const TrainConfig config = parse_config("", "empty.toml");
  EXPECT_EQ(config.source, "empty.toml");
  EXPECT_EQ(canonical_text(config), canonical_text(TrainConfig{}));
  EXPECT_EQ(config.model.name, "lenet5");
  EXPECT_EQ(config.optim.name, "sgd");
  EXPECT_EQ(config.train.batch_size, 64);
  EXPECT_EQ(config.strategy.name, "allreduce");
}

TEST(Config, ReadsEverySection) {
  const TrainConfig c = parse_config(R"(
[data]
dataset = "csv"
path = "train.csv"
test_path = "test.csv"
test_fraction = 0.2
label = "y"
seq_len = 128

[model]
name = "mlp"
layers = [20, 16, 2]
embedding_dim = 32
hidden_size = 128
lstm_layers = 2

[optim]
name = "adamw"
lr = 0.003
momentum = 0.5
nesterov = true
weight_decay = 0.01
beta1 = 0.8
beta2 = 0.99
eps = 1e-6
scale_lr = true
schedule = "cosine"
warmup_steps = 10
step_size = 50
gamma = 0.5
min_lr = 1e-5

[train]
epochs = 3
max_steps = 1000
batch_size = 32
accumulate = 4
seed = 7
threads = 2
log_every = 10
eval_every = 100
checkpoint_every = 200
checkpoint_dir = "ckpt"
export = "model.pt"
timeout_s = 60

[strategy]
name = "allreduce"
bucket_mb = 10
first_bucket_mb = 0.5
algorithm = "ring"
find_unused_parameters = true
)",
                                     "full.toml");
  EXPECT_EQ(c.data.dataset, "csv");
  EXPECT_EQ(c.data.path, "train.csv");
  EXPECT_EQ(c.data.test_path, "test.csv");
  EXPECT_DOUBLE_EQ(c.data.test_fraction, 0.2);
  EXPECT_EQ(c.data.label, "y");
  EXPECT_EQ(c.data.seq_len, 128);

  EXPECT_EQ(c.model.name, "mlp");
  EXPECT_EQ(c.model.mlp_layers, (std::vector<int64_t>{20, 16, 2}));
  EXPECT_EQ(c.model.embedding_dim, 32);
  EXPECT_EQ(c.model.hidden_size, 128);
  EXPECT_EQ(c.model.lstm_layers, 2);

  EXPECT_EQ(c.optim.name, "adamw");
  EXPECT_DOUBLE_EQ(c.optim.lr, 0.003);
  EXPECT_DOUBLE_EQ(c.optim.momentum, 0.5);
  EXPECT_TRUE(c.optim.nesterov);
  EXPECT_DOUBLE_EQ(c.optim.weight_decay, 0.01);
  EXPECT_DOUBLE_EQ(c.optim.beta1, 0.8);
  EXPECT_DOUBLE_EQ(c.optim.beta2, 0.99);
  EXPECT_DOUBLE_EQ(c.optim.eps, 1e-6);
  EXPECT_TRUE(c.scale_lr);
  EXPECT_EQ(c.schedule.name, "cosine");
  EXPECT_EQ(c.schedule.warmup_steps, 10);
  EXPECT_EQ(c.schedule.step_size, 50);
  EXPECT_DOUBLE_EQ(c.schedule.gamma, 0.5);
  EXPECT_DOUBLE_EQ(c.schedule.min_lr, 1e-5);

  EXPECT_EQ(c.train.epochs, 3);
  EXPECT_EQ(c.train.max_steps, 1000);
  EXPECT_EQ(c.train.batch_size, 32);
  EXPECT_EQ(c.train.accumulate, 4);
  EXPECT_EQ(c.train.seed, 7u);
  EXPECT_EQ(c.train.threads, 2);
  EXPECT_EQ(c.train.log_every, 10);
  EXPECT_EQ(c.train.eval_every, 100);
  EXPECT_EQ(c.train.checkpoint_every, 200);
  EXPECT_EQ(c.train.checkpoint_dir, "ckpt");
  EXPECT_EQ(c.train.export_path, "model.pt");
  EXPECT_DOUBLE_EQ(c.train.timeout_s, 60);

  EXPECT_EQ(c.strategy.name, "allreduce");
  EXPECT_DOUBLE_EQ(c.strategy.bucket_mb, 10);
  EXPECT_DOUBLE_EQ(c.strategy.first_bucket_mb, 0.5);
  EXPECT_EQ(c.strategy.algorithm, "ring");
  EXPECT_TRUE(c.strategy.find_unused_parameters);
}

TEST(Config, AcceptsAnIntegerWhereAFloatIsExpected) {
  const TrainConfig c = parse_config("[optim]\nlr = 1\n[strategy]\nbucket_mb = 50\n", "x.toml");
  EXPECT_DOUBLE_EQ(c.optim.lr, 1.0);
  EXPECT_DOUBLE_EQ(c.strategy.bucket_mb, 50.0);
}

TEST(Config, WrongTypeNamesTheSourceKeyExpectationAndValue) {
  EXPECT_EQ(config_error("[train]\nbatch_size = \"abc\"\n"),
            "x.toml: key 'train.batch_size' must be an integer >= 1, got \"abc\"");
  EXPECT_EQ(config_error("[train]\nbatch_size = 1.5\n"),
            "x.toml: key 'train.batch_size' must be an integer >= 1, got 1.5");
  EXPECT_EQ(config_error("[optim]\nlr = \"fast\"\n"),
            "x.toml: key 'optim.lr' must be a number > 0, got \"fast\"");
  EXPECT_EQ(config_error("[optim]\nnesterov = 1\n"),
            "x.toml: key 'optim.nesterov' must be a boolean (true or false), got 1");
  EXPECT_EQ(config_error("[data]\npath = 3\n"), "x.toml: key 'data.path' must be a string, got 3");
  EXPECT_EQ(config_error("[model]\nlayers = [784, \"a\", 10]\n"),
            "x.toml: key 'model.layers' must be an array of at least 2 integers >= 1, got "
            "[784, \"a\", 10]");
  EXPECT_EQ(config_error("[train.batch_size]\n"),
            "x.toml: key 'train.batch_size' must be an integer >= 1, got a table");
}

TEST(Config, OutOfRangeNamesTheRange) {
  EXPECT_EQ(config_error("[train]\nbatch_size = 0\n"),
            "x.toml: key 'train.batch_size' must be an integer >= 1, got 0");
  EXPECT_EQ(config_error("[train]\nmax_steps = -1\n"),
            "x.toml: key 'train.max_steps' must be an integer >= 0, got -1");
  EXPECT_EQ(config_error("[data]\ntest_fraction = 1\n"),
            "x.toml: key 'data.test_fraction' must be a number in (0, 1), got 1");
  EXPECT_EQ(config_error("[optim]\nbeta2 = 1.0\n"),
            "x.toml: key 'optim.beta2' must be a number in [0, 1), got 1.0");
  EXPECT_EQ(config_error("[optim]\nlr = -0.1\n"),
            "x.toml: key 'optim.lr' must be a number > 0, got -0.1");
  EXPECT_EQ(config_error("[optim]\nlr = nan\n"),
            "x.toml: key 'optim.lr' must be a number > 0, got nan");
  EXPECT_EQ(config_error("[model]\nlayers = [784]\n"),
            "x.toml: key 'model.layers' must be an array of at least 2 integers >= 1, got [784]");
  EXPECT_EQ(config_error("[model]\nlayers = [784, 0, 10]\n"),
            "x.toml: key 'model.layers' must be an array of at least 2 integers >= 1, got "
            "[784, 0, 10]");
}

TEST(Config, NamesMustBeOneOfTheKnownChoices) {
  EXPECT_EQ(config_error("[data]\ndataset = \"imagenet\"\n"),
            "x.toml: key 'data.dataset' must be one of mnist, fashion-mnist, csv, text, npz, got "
            "\"imagenet\"");
  EXPECT_TRUE(contains(config_error("[model]\nname = \"vgg\"\n"), "one of mlp, lenet5"));
  EXPECT_EQ(config_error("[optim]\nschedule = \"linear\"\n"),
            "x.toml: key 'optim.schedule' must be one of constant, step, cosine, got \"linear\"");
  EXPECT_EQ(config_error("[strategy]\nname = \"hogwild\"\n"),
            "x.toml: key 'strategy.name' must be one of allreduce, ps, local_sgd, post_local_sgd, "
            "easgd, gossip, zero, hybrid, got \"hogwild\"");
  EXPECT_EQ(config_error("[strategy]\ntopology = \"torus\"\n"),
            "x.toml: key 'strategy.topology' must be one of ring, exponential, complete, got "
            "\"torus\"");
  EXPECT_EQ(config_error("[strategy]\nalgorithm = \"butterfly\"\n"),
            "x.toml: key 'strategy.algorithm' must be one of auto, native, ring, hd, tree, "
            "hierarchical, shm, got \"butterfly\"");
  EXPECT_EQ(config_error("[compress]\nname = \"zip\"\n"),
            "x.toml: key 'compress.name' must be one of none, fp16, bf16, topk, randomk, qsgd, "
            "natural, sign, powersgd, got \"zip\"");
}

TEST(Config, UnknownKeySuggestsTheNearestValidKey) {
  EXPECT_EQ(config_error("[train]\nbatchsize = 8\n"),
            "x.toml: unknown key 'train.batchsize'; did you mean 'train.batch_size'?");
  EXPECT_EQ(config_error("[optim]\nlrr = 0.1\n"),
            "x.toml: unknown key 'optim.lrr'; did you mean 'optim.lr'?");
  // A key written outside any section is found in the section it belongs to.
  EXPECT_EQ(config_error("epochs = 3\n"),
            "x.toml: unknown key 'epochs'; did you mean 'train.epochs'?");
}

TEST(Config, UnknownKeyWithNothingCloseListsTheSectionsKeys) {
  // The shared section name does not make an unrelated key look close: `foo` is not `eps`.
  EXPECT_TRUE(contains(config_error("[optim]\nfoo = 1\n"), "valid keys in [optim]: name, lr"));
  EXPECT_EQ(config_error("[strategy]\ncompression = \"topk\"\n"),
            "x.toml: unknown key 'strategy.compression'; valid keys in [strategy]: name, "
            "bucket_mb, first_bucket_mb, algorithm, find_unused_parameters, period, "
            "warmup_steps, average_optimizer_state, alpha, asynchronous, topology, stage, "
            "prefetch, servers, mode, staleness");
}

TEST(Config, UnknownSectionSuggestsOrListsTheSections) {
  EXPECT_EQ(config_error("[trian]\nepochs = 3\n"),
            "x.toml: unknown section 'trian'; did you mean 'train'?");
  EXPECT_EQ(config_error("[logging]\nlevel = 1\n"),
            "x.toml: unknown section 'logging'; valid sections: data, model, optim, train, "
            "strategy, compress, parallel");
  EXPECT_EQ(config_error("train = 3\n"), "x.toml: 'train' must be a section [train], got 3");
}

TEST(Config, SyntaxErrorNamesTheLineAndColumn) {
  const std::string message = config_error("[train]\nepochs = = 2\n");
  EXPECT_TRUE(message.starts_with("x.toml:2:")) << message;
  EXPECT_TRUE(contains(message, "TOML syntax error")) << message;
}

TEST(Config, NesterovNeedsMomentum) {
  EXPECT_EQ(config_error("[optim]\nnesterov = true\n"),
            "x.toml: optim.nesterov = true needs optim.momentum > 0, got 0.0");
  EXPECT_TRUE(parse_config("[optim]\nnesterov = true\nmomentum = 0.9\n", "x.toml").optim.nesterov);
}

TEST(Config, PrecisionIsBf16OnFloat32) {
  EXPECT_EQ(parse_config("[train]\nprecision = \"bf16\"\n", "x.toml").train.precision, "bf16");
  EXPECT_TRUE(contains(config_error("[train]\nprecision = \"fp16\"\n"),
                       "x.toml: train.precision = \"fp16\" is refused: LibTorch 1.13's CPU "
                       "autocast casts to bfloat16 only"));
  EXPECT_TRUE(contains(config_error("[train]\nprecision = \"bf16\"\ndtype = \"float64\"\n"),
                       "set train.dtype = \"float32\""));
  EXPECT_EQ(
      parse_config("[train]\nprecision = \"bf16\"\n[parallel]\npipeline_stages = 2\n", "x.toml")
          .parallel.pipeline_stages,
      2);
  EXPECT_TRUE(contains(config_error("[train]\nprecision = \"fp8\"\n"), "fp32"));
}

TEST(Config, StrategyKeysHaveTheirRanges) {
  EXPECT_EQ(config_error("[strategy]\nperiod = 0\n"),
            "x.toml: key 'strategy.period' must be an integer >= 1, got 0");
  EXPECT_EQ(config_error("[strategy]\nstage = 4\n"),
            "x.toml: strategy.stage: expected 1, 2 or 3 (ZeRO stages), got 4");
  // Stage 3 runs the model layer by layer: not a split model, not a forward(x, y) loss.
  EXPECT_TRUE(contains(
      config_error("[strategy]\nname = \"zero\"\nstage = 3\n[parallel]\npipeline_stages = 2\n"),
      "x.toml: strategy.stage = 3 shards the parameters of whole replicas"));
  EXPECT_TRUE(contains(config_error("[strategy]\nname = \"zero\"\nstage = 3\n[train]\nloss = "
                                    "\"model\"\n[model]\nname = \"torchscript\"\n"),
                       "train.loss = \"model\""));
  EXPECT_TRUE(contains(config_error("[strategy]\nalpha = 1.5\n"), "in [0, 1]"));
  EXPECT_TRUE(contains(config_error("[train]\nslow_factor = 0.5\n"), ">= 1"));
}

TEST(Config, CompressKeysHaveTheirRanges) {
  EXPECT_TRUE(contains(config_error("[compress]\nratio = 0\n"), "in (0, 1]"));
  EXPECT_TRUE(contains(config_error("[compress]\nratio = 1.5\n"), "in (0, 1]"));
  EXPECT_EQ(config_error("[compress]\nlevels = 200\n"),
            "x.toml: compress.levels: expected 1 to 127 (QSGD's levels travel in 7 bits), got 200");
  EXPECT_TRUE(contains(config_error("[compress]\nrank = 0\n"), ">= 1"));
}

TEST(ConfigOverrides, ApplyAfterTheFileInOrder) {
  const TrainConfig c =
      parse_config("[train]\nepochs = 2\n[optim]\nnesterov = true\n", "x.toml",
                   {"train.epochs=3", "train.epochs = 4", "optim.momentum=0.9", "optim.lr=1",
                    "strategy.find_unused_parameters=true", "data.dataset=fashion-mnist",
                    "data.path=\"with spaces/and=equals\"", "model.layers=[784,64,10]"});
  EXPECT_EQ(c.train.epochs, 4);
  EXPECT_DOUBLE_EQ(c.optim.momentum, 0.9);  // and so the file's nesterov is consistent
  EXPECT_DOUBLE_EQ(c.optim.lr, 1.0);
  EXPECT_TRUE(c.strategy.find_unused_parameters);
  EXPECT_EQ(c.data.dataset, "fashion-mnist");
  EXPECT_EQ(c.data.path, "with spaces/and=equals");
  EXPECT_EQ(c.model.mlp_layers, (std::vector<int64_t>{784, 64, 10}));
}

TEST(ConfigOverrides, StringKeyTakesTextThatTomlReadsAsAnotherType) {
  const TrainConfig c =
      parse_config("", "x.toml", {"data.label=1", "data.path=", "train.export=/tmp/w.pt"});
  EXPECT_EQ(c.data.label, "1");
  EXPECT_EQ(c.data.path, "");
  EXPECT_EQ(c.train.export_path, "/tmp/w.pt");
}

// A TOML document is UTF-8, so a --set string must be too: otherwise the canonical text (what
// --print-config shows and a checkpoint stores) is no TOML and a resume could not read it.
// Found by fuzz/train_config (kept in fuzz/regressions/train_config/).
TEST(ConfigOverrides, AStringThatIsNotUtf8IsRefusedAndOneThatIsRoundTrips) {
  for (const std::string bad :
       {"\xff", "ab\xc3", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "x\x80y"}) {
    const std::string message = override_error("data.label=" + bad);
    EXPECT_NE(message.find("--set data.label: the value is not UTF-8"), std::string::npos)
        << message;
  }
  const std::string text = "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80";  // café 日本 😀
  const TrainConfig c = parse_config("", "x.toml", {"data.label=" + text});
  EXPECT_EQ(c.data.label, text);
  EXPECT_EQ(canonical_text(parse_config(canonical_text(c), "canonical")), canonical_text(c));
}

TEST(ConfigOverrides, ErrorsNameTheOverride) {
  EXPECT_EQ(override_error("train.epochs"),
            "--set train.epochs: an override must read section.key=value");
  EXPECT_EQ(override_error("epochs=3"),
            "--set epochs=3: the key must read section.key, like train.epochs");
  EXPECT_EQ(override_error("train.batch_size=abc"),
            "--set train.batch_size=abc: key 'train.batch_size' must be an integer >= 1, got "
            "\"abc\"");
  EXPECT_EQ(override_error("train.batch_size=2.5"),
            "--set train.batch_size=2.5: key 'train.batch_size' must be an integer >= 1, got 2.5");
  EXPECT_EQ(override_error("train.batchsize=8"),
            "--set train.batchsize=8: unknown key 'train.batchsize'; did you mean "
            "'train.batch_size'?");
  EXPECT_EQ(override_error("trian.epochs=3"),
            "--set trian.epochs=3: unknown section 'trian'; did you mean 'train'?");
}

TEST(ConfigCanonicalText, ListsEveryKeyInOrderAsToml) {
  const std::string text = canonical_text(TrainConfig{});
  std::istringstream lines(text);
  std::string line;
  for (const std::string& key : config_keys()) {
    ASSERT_TRUE(std::getline(lines, line));
    EXPECT_TRUE(line.starts_with(key + " = ")) << line;
  }
  EXPECT_FALSE(std::getline(lines, line)) << "extra line: " << line;
  EXPECT_TRUE(contains(text, "data.dataset = \"mnist\"\n"));
  EXPECT_TRUE(contains(text, "model.layers = [784, 1024, 512, 10]\n"));
  EXPECT_TRUE(contains(text, "optim.lr = 0.01\n"));
  EXPECT_TRUE(contains(text, "optim.eps = 1e-08\n"));
  EXPECT_TRUE(contains(text, "optim.nesterov = false\n"));
  EXPECT_TRUE(contains(text, "strategy.bucket_mb = 25.0\n"));
  EXPECT_TRUE(contains(text, "train.export = \"\"\n"));
}

TEST(ConfigCanonicalText, ParsesBackToTheSameText) {
  const TrainConfig original = parse_config(
      "[data]\npath = 'odd \"name\" \\ with\ttab'\n[optim]\nlr = 0.30000000000000004\n"
      "momentum = 0.9\nnesterov = true\n[model]\nname = \"mlp\"\nlayers = [3, 2]\n"
      "[train]\nseed = 123456789012\n",
      "x.toml");
  const std::string text = canonical_text(original);
  const TrainConfig reread = parse_config(text, "canonical");
  EXPECT_EQ(canonical_text(reread), text);
  EXPECT_EQ(reread.data.path, original.data.path);
  EXPECT_EQ(reread.optim.lr, original.optim.lr);  // exactly: ranks hash this text
  EXPECT_EQ(canonical_text(TrainConfig{}), canonical_text(parse_config(canonical_text({}), "d")));
}

TEST(Config, PipelineKeys) {
  EXPECT_TRUE(
      parse_config("[parallel]\npartition = \"balanced\"\n", "x").parallel.partition.empty());
  const auto c = parse_config("[parallel]\npipeline_stages = 2\npartition = [2, 3]\n", "x");
  EXPECT_EQ(c.parallel.partition, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(parse_config(canonical_text(c), "x").parallel.partition, c.parallel.partition);
  EXPECT_EQ(
      config_error("[parallel]\npartition = \"even\"\n"),
      "x.toml: key 'parallel.partition' must be \"balanced\", \"profile\" or an array of layer "
      "counts >= 1, one per stage, got \"even\"");
  const auto profiled = parse_config("[parallel]\npartition = \"profile\"\n", "x");
  EXPECT_TRUE(profiled.parallel.partition_by_profile);
  EXPECT_TRUE(parse_config(canonical_text(profiled), "x").parallel.partition_by_profile);
  EXPECT_EQ(config_error("[parallel]\npipeline_stages = 2\npartition = [5]\n"),
            "x.toml: parallel.partition lists 1 layer counts for parallel.pipeline_stages = 2");
  EXPECT_TRUE(parse_config("[parallel]\nrecompute = true\n", "x").parallel.recompute);  // 1f1b
  EXPECT_EQ(config_error("[parallel]\nschedule = \"ddg\"\nrecompute = true\n"),
            "x.toml: parallel.schedule = \"ddg\" re-computes its forwards already; "
            "parallel.recompute is for \"gpipe\" and \"1f1b\"");
  EXPECT_EQ(config_error("[parallel]\nspectrain = true\n"),
            "x.toml: parallel.spectrain predicts the weights of the asynchronous pipeline; set "
            "parallel.schedule = \"pipedream\"");
  EXPECT_EQ(config_error("[parallel]\nschedule = \"pipedream\"\nspectrain = true\n"),
            "x.toml: parallel.spectrain extrapolates the weights along the momentum; it needs "
            "optim.name = \"sgd\" with optim.momentum > 0");
  EXPECT_EQ(config_error("[parallel]\nschedule = \"pipedream\"\n", {"strategy.name=local_sgd"}),
            "x.toml: parallel.schedule = \"pipedream\" updates after every micro-batch; its "
            "replicas use strategy.name = \"allreduce\", got \"local_sgd\"");
  // ddg pipelines whole batches: one per step unless a micro-batch count is set, then refused.
  const auto ddg = parse_config("[parallel]\nschedule = \"ddg\"\n", "x");
  EXPECT_EQ(ddg.parallel.micro_batches, 1);
  EXPECT_EQ(parse_config(canonical_text(ddg), "x").parallel.micro_batches, 1);
  EXPECT_EQ(config_error("[parallel]\nschedule = \"ddg\"\n", {"parallel.micro_batches=4"}),
            "--set parallel.micro_batches=4: parallel.schedule = \"ddg\" pipelines whole "
            "batches, one per step; parallel.micro_batches must be 1, got 4");
  EXPECT_EQ(config_error("[parallel]\npipeline_stages = 2\nschedule = \"ddg\"\n",
                         {"train.checkpoint_dir=ck"}),
            std::string("--set train.checkpoint_dir=ck: ") + kDdgHoldsBatches);
  EXPECT_EQ(config_error("[parallel]\npipeline_stages = 2\n", {"strategy.name=ps"}),
            "--set strategy.name=ps: strategy.name = \"ps\" does not combine with a split "
            "model (parallel.pipeline_stages = 2, parallel.tensor = 1) yet");
  EXPECT_EQ(config_error("[parallel]\ntensor = 2\n[train]\naccumulate = 2\n"),
            "x.toml: train.accumulate (use parallel.micro_batches) does not combine with a "
            "split model (parallel.pipeline_stages = 1, parallel.tensor = 2) yet");
}

TEST(ConfigKeys, NameEveryKeyOnceSectionBySection) {
  const std::vector<std::string>& keys = config_keys();
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()).size(), keys.size());
  EXPECT_EQ(keys.front(), "data.dataset");
  EXPECT_EQ(keys.back(), "parallel.partition");
  EXPECT_NE(std::find(keys.begin(), keys.end(), "train.export"), keys.end());
  EXPECT_NE(std::find(keys.begin(), keys.end(), "optim.scale_lr"), keys.end());
}

TEST(ConfigLoad, ReadsTheFileThenTheOverrides) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / cat("distml_config_test_", ::getpid(), ".toml");
  std::ofstream(path) << "[train]\nepochs = 5\nbatch_size = 16\n";
  const TrainConfig c = load_config(path.string(), {"train.epochs=6"});
  std::filesystem::remove(path);
  EXPECT_EQ(c.source, path.string());
  EXPECT_EQ(c.train.epochs, 6);
  EXPECT_EQ(c.train.batch_size, 16);
}

TEST(ConfigLoad, MissingFileNamesThePath) {
  const std::string path = "/nonexistent/distml/run.toml";
  try {
    load_config(path);
    ADD_FAILURE() << "loaded a missing file";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(std::string(e.what()).starts_with(path + ": cannot open")) << e.what();
  }
}

// A rule between keys names what set the value at fault: the --set override, not the file.
TEST(ConfigOrigins, ARuleBrokenByAnOverrideNamesTheOverride) {
  EXPECT_EQ(config_error("[optim]\nmomentum = 0\n", {"optim.nesterov=true"}),
            "--set optim.nesterov=true: optim.nesterov = true needs optim.momentum > 0, got 0.0");
  EXPECT_EQ(config_error("[optim]\nnesterov = true\nmomentum = 0\n"),
            "x.toml: optim.nesterov = true needs optim.momentum > 0, got 0.0");
}

TEST(ConfigOrigins, EachKeyKnowsTheFileOrOverrideThatSetIt) {
  const auto c = parse_config("[train]\nepochs = 2\nseed = 5\n", "x.toml", {"train.epochs=3"});
  EXPECT_EQ(c.origin("train.epochs"), "--set train.epochs=3");
  EXPECT_EQ(c.origin("train.seed"), "x.toml");
  EXPECT_EQ(c.origin("train.batch_size"), "x.toml");  // a default: the run's file
}

TEST(ConfigOrigins, DescribedConfigListsEveryKeyWithValueSourceAndDefault) {
  const auto text =
      described_config(parse_config("[train]\nseed = 5\n", "x.toml", {"train.epochs=3"}));
  EXPECT_NE(text.find("train.epochs = 3"), std::string::npos) << text;
  EXPECT_NE(text.find("# --set train.epochs=3 (default 1)"), std::string::npos) << text;
  EXPECT_NE(text.find("# x.toml (default 1)"), std::string::npos) << text;  // train.seed
  EXPECT_NE(text.find("train.batch_size = 64"), std::string::npos) << text;
  std::size_t lines = 0;
  for (char ch : text) lines += ch == '\n';
  EXPECT_EQ(lines, config_keys().size());
}

}  // namespace
}  // namespace distml::train
