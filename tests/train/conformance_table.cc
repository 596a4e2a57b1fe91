#include "conformance_table.h"

#include <map>
#include <set>
#include <sstream>

namespace distml::train::conformance {

const std::vector<Strategy>& strategies() {
  static const std::vector<Strategy> all = {
      Strategy::allreduce,         Strategy::zero1, Strategy::zero2,        Strategy::zero3,
      Strategy::zero3_no_prefetch, Strategy::ps,    Strategy::local_sgd_h1, Strategy::local_sgd_h2,
      Strategy::post_local_sgd,    Strategy::easgd, Strategy::gossip,       Strategy::hybrid};
  return all;
}

const std::vector<Split>& splits() {
  static const std::vector<Split> all = {Split::none,
                                         Split::gpipe,
                                         Split::one_f_one_b,
                                         Split::gpipe_recompute,
                                         Split::one_f_one_b_recompute,
                                         Split::pipedream,
                                         Split::ddg,
                                         Split::tensor2,
                                         Split::grid2x2};
  return all;
}

const std::vector<Compressor>& compressors() {
  static const std::vector<Compressor> all = {Compressor::none, Compressor::fp16, Compressor::topk,
                                              Compressor::powersgd};
  return all;
}

const std::vector<Extra>& extras() {
  static const std::vector<Extra> all = {Extra::plain, Extra::eval, Extra::resume,
                                         Extra::accumulate, Extra::clip};
  return all;
}

std::string name(Strategy s) {
  switch (s) {
    case Strategy::allreduce: return "allreduce";
    case Strategy::zero1: return "zero 1";
    case Strategy::zero2: return "zero 2";
    case Strategy::zero3: return "zero 3";
    case Strategy::zero3_no_prefetch: return "zero 3 no prefetch";
    case Strategy::ps: return "ps bsp";
    case Strategy::local_sgd_h1: return "local_sgd H=1";
    case Strategy::local_sgd_h2: return "local_sgd H=2";
    case Strategy::post_local_sgd: return "post_local_sgd";
    case Strategy::easgd: return "easgd";
    case Strategy::gossip: return "gossip";
    case Strategy::hybrid: return "hybrid";
  }
  return "?";
}

std::string name(Split s) {
  switch (s) {
    case Split::none: return "none";
    case Split::gpipe: return "gpipe";
    case Split::one_f_one_b: return "1f1b";
    case Split::gpipe_recompute: return "gpipe+recompute";
    case Split::one_f_one_b_recompute: return "1f1b+recompute";
    case Split::pipedream: return "pipedream";
    case Split::ddg: return "ddg";
    case Split::tensor2: return "tensor 2";
    case Split::grid2x2: return "2 stages x tensor 2";
  }
  return "?";
}

std::string name(Compressor c) {
  switch (c) {
    case Compressor::none: return "none";
    case Compressor::fp16: return "fp16";
    case Compressor::topk: return "topk+EF";
    case Compressor::powersgd: return "powersgd";
  }
  return "?";
}

std::string name(Extra e) {
  switch (e) {
    case Extra::plain: return "plain";
    case Extra::eval: return "eval";
    case Extra::resume: return "resume";
    case Extra::accumulate: return "accumulate";
    case Extra::clip: return "clip";
  }
  return "?";
}

std::string describe(const Cell& c) {
  return name(c.strategy) + " | " + name(c.split) + " | " + name(c.compressor) + " | " +
         name(c.extra) + " | np" + std::to_string(c.world);
}

int stages(Split s) { return s == Split::none || s == Split::tensor2 ? 1 : 2; }

int tensor_ranks(Split s) { return s == Split::tensor2 || s == Split::grid2x2 ? 2 : 1; }

int replicas(const Cell& c) {
  const int world = c.strategy == Strategy::ps ? c.world - 1 : c.world;
  return world / (stages(c.split) * tensor_ranks(c.split));
}

std::vector<std::string> overrides(const Cell& c, int steps) {
  std::vector<std::string> o = {
      "train.dtype=float64",
      "train.batch_size=" + std::to_string(kBatch),
      "train.max_steps=" + std::to_string(steps),
      "train.seed=" + std::to_string(kSeed),
      "train.log_every=1000",
      "train.timeout_s=30",  // a cell that hangs fails in 30 s, naming the rank it waited for
      "train.stall_warn_s=0",
      "optim.name=sgd",
      "optim.lr=" + std::to_string(kLr),
      "optim.momentum=" + std::to_string(c.strategy == Strategy::hybrid ? 0.0 : kMomentum),
  };
  if (c.strategy == Strategy::hybrid) {
    o.insert(o.end(), {"model.name=fasttext", "model.vocab_size=16", "model.embedding_dim=4"});
  } else {
    o.insert(o.end(), {"model.name=mlp", "model.layers=[6, 8, 8, 8, 3]"});
  }
  switch (c.strategy) {
    case Strategy::allreduce: o.push_back("strategy.name=allreduce"); break;
    case Strategy::zero1:
    case Strategy::zero2:
    case Strategy::zero3:
      o.insert(o.end(), {"strategy.name=zero",
                         std::string("strategy.stage=") + (c.strategy == Strategy::zero1   ? "1"
                                                           : c.strategy == Strategy::zero2 ? "2"
                                                                                           : "3")});
      break;
    case Strategy::zero3_no_prefetch:
      o.insert(o.end(), {"strategy.name=zero", "strategy.stage=3", "strategy.prefetch=false"});
      break;
    case Strategy::ps: o.insert(o.end(), {"strategy.name=ps", "strategy.mode=bsp"}); break;
    case Strategy::local_sgd_h1:
      o.insert(o.end(), {"strategy.name=local_sgd", "strategy.period=1"});
      break;
    case Strategy::local_sgd_h2:
      o.insert(o.end(), {"strategy.name=local_sgd", "strategy.period=" + std::to_string(kPeriod)});
      break;
    case Strategy::post_local_sgd:
      o.insert(o.end(),
               {"strategy.name=post_local_sgd", "strategy.period=" + std::to_string(kPeriod),
                "strategy.warmup_steps=" + std::to_string(kWarmup)});
      break;
    case Strategy::easgd:
      o.insert(o.end(), {"strategy.name=easgd", "strategy.period=" + std::to_string(kPeriod),
                         "strategy.alpha=" + std::to_string(kAlpha)});
      break;
    case Strategy::gossip:
      o.insert(o.end(), {"strategy.name=gossip", "strategy.topology=ring"});
      break;
    case Strategy::hybrid: o.push_back("strategy.name=hybrid"); break;
  }
  switch (c.split) {
    case Split::none: break;
    case Split::gpipe:
    case Split::one_f_one_b:
    case Split::gpipe_recompute:
    case Split::one_f_one_b_recompute:
    case Split::pipedream: {
      const bool one_f_one_b =
          c.split == Split::one_f_one_b || c.split == Split::one_f_one_b_recompute;
      o.insert(o.end(),
               {"parallel.pipeline_stages=2", "parallel.partition=[2, 2]",
                "parallel.micro_batches=" + std::to_string(kMicroBatches),
                std::string("parallel.schedule=") + (one_f_one_b                   ? "1f1b"
                                                     : c.split == Split::pipedream ? "pipedream"
                                                                                   : "gpipe")});
      if (c.split == Split::gpipe_recompute || c.split == Split::one_f_one_b_recompute)
        o.push_back("parallel.recompute=true");
      break;
    }
    case Split::ddg:
      o.insert(o.end(), {"parallel.pipeline_stages=2", "parallel.partition=[2, 2]",
                         "parallel.schedule=ddg"});
      break;
    case Split::tensor2: o.push_back("parallel.tensor=2"); break;
    case Split::grid2x2:
      o.insert(o.end(), {"parallel.pipeline_stages=2", "parallel.partition=[2, 2]",
                         "parallel.micro_batches=" + std::to_string(kMicroBatches),
                         "parallel.schedule=1f1b", "parallel.tensor=2"});
      break;
  }
  switch (c.compressor) {
    case Compressor::none: break;
    case Compressor::fp16: o.push_back("compress.name=fp16"); break;
    case Compressor::topk: o.insert(o.end(), {"compress.name=topk", "compress.ratio=0.25"}); break;
    case Compressor::powersgd:
      o.insert(o.end(), {"compress.name=powersgd", "compress.rank=1"});
      break;
  }
  switch (c.extra) {
    case Extra::plain:
    case Extra::resume: break;  // the checkpoint folder is the test's
    case Extra::eval: o.push_back("train.eval_every=1"); break;
    case Extra::accumulate: o.push_back("train.accumulate=2"); break;
    case Extra::clip: o.push_back("train.clip_grad_norm=" + std::to_string(kClip)); break;
  }
  return o;
}

std::string refused_key(const Cell& c) {
  const bool split = c.split != Split::none;
  const Strategy s = c.strategy;
  // What a config alone rules out (train/config.cc), in the order it is checked.
  if (split && (s == Strategy::zero3 || s == Strategy::zero3_no_prefetch)) return "strategy.stage";
  if (c.split == Split::pipedream && s != Strategy::allreduce) return "parallel.schedule";
  if (split && (s == Strategy::ps || s == Strategy::hybrid)) return "strategy.name";
  if (split && c.extra == Extra::accumulate) return "train.accumulate";
  if (split && c.extra == Extra::clip) return "train.clip_grad_norm";
  if (c.split == Split::ddg && c.extra == Extra::resume) return "train.checkpoint_dir";
  if (tensor_ranks(c.split) > 1 && c.compressor != Compressor::none) return "compress.name";
  // What the strategy refuses (train/strategy_factory.cc) and the world size.
  if (c.world % (stages(c.split) * tensor_ranks(c.split)) != 0) return "parallel.pipeline_stages";
  if (s == Strategy::ps && c.extra == Extra::clip) return "train.clip_grad_norm";
  if (s == Strategy::ps && c.world < 2) return "strategy.servers";
  if (c.compressor != Compressor::none &&
      !(s == Strategy::allreduce || s == Strategy::local_sgd_h1 || s == Strategy::local_sgd_h2 ||
        s == Strategy::post_local_sgd || s == Strategy::ps))
    return "compress.name";
  if (s == Strategy::hybrid && c.extra == Extra::clip) return "train.clip_grad_norm";
  return "";
}

namespace {

// "1-4", "2, 4", "4": the world sizes, compactly.
std::string worlds_text(const std::set<int>& worlds) {
  if (worlds.size() == static_cast<std::size_t>(kMaxWorld)) return "1-4";
  std::string out;
  for (int w : worlds) out += (out.empty() ? "" : ", ") + std::to_string(w);
  return out;
}

}  // namespace

std::set<int> running_worlds(Strategy s, Split sp) {
  std::set<int> worlds;
  for (int w = 1; w <= kMaxWorld; ++w)
    if (refused_key({s, sp, Compressor::none, Extra::plain, w}).empty()) worlds.insert(w);
  return worlds;
}

bool refused_everywhere(Strategy s, Split sp, Compressor co, Extra e) {
  for (int w : running_worlds(s, sp))
    if (refused_key({s, sp, co, e, w}).empty()) return false;
  return true;
}

std::string markdown() {
  std::ostringstream out;
  out << "| strategy |";
  for (Split sp : splits()) out << " " << name(sp) << " |";
  out << "\n| --- |";
  for (std::size_t i = 0; i < splits().size(); ++i) out << " --- |";
  out << "\n";
  for (Strategy s : strategies()) {
    out << "| " << name(s) << " |";
    for (Split sp : splits()) {
      const auto worlds = running_worlds(s, sp);
      if (worlds.empty()) {
        out << " refused: " << refused_key({s, sp, Compressor::none, Extra::plain, kMaxWorld})
            << " |";
        continue;
      }
      std::vector<std::string> without;
      for (Compressor co : compressors())
        if (co != Compressor::none && refused_everywhere(s, sp, co, Extra::plain))
          without.push_back(name(co));
      if (without.size() + 1 == compressors().size()) without = {"compression"};
      for (Extra e : extras())
        if (e != Extra::plain && refused_everywhere(s, sp, Compressor::none, e))
          without.push_back(name(e));
      out << " np " << worlds_text(worlds);
      for (std::size_t i = 0; i < without.size(); ++i)
        out << (i ? ", " : "; without ") << without[i];
      out << " |";
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace distml::train::conformance
