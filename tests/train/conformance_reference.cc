#include "conformance_reference.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "distml/data/permutation.h"

namespace distml::train::conformance {
namespace {

using Tensors = std::vector<torch::Tensor>;

// ---- The model, by hand --------------------------------------------------------------------

// The mlp's layers first..last (Linear, then ReLU but after the last of the four).
torch::Tensor mlp_layers(const Tensors& p, torch::Tensor h, int first, int last) {
  for (int l = first; l <= last; ++l) {
    h = h.matmul(p[2 * l].t()) + p[2 * l + 1];
    if (l < 3) h = torch::relu(h);
  }
  return h;
}

// fastText: the mean of the embedding rows of a sample's ids, the padding id 0 left out of the
// mean, then a Linear layer.
torch::Tensor fasttext(const Tensors& p, const torch::Tensor& x) {
  const auto ids = x.to(torch::kLong);
  const auto keep = (ids != 0).to(torch::kFloat64).unsqueeze(-1);
  const auto rows = p[0].index_select(0, ids.reshape(-1)).view({ids.size(0), ids.size(1), -1});
  const auto mean = (rows * keep).sum(1) / keep.sum(1).clamp_min(1);
  return mean.matmul(p[1].t()) + p[2];
}

Tensors leaves(const Tensors& p) {
  Tensors out;
  for (const auto& t : p) out.push_back(t.detach().clone().requires_grad_(true));
  return out;
}

Tensors grads(const Tensors& leaves) {
  Tensors out;
  for (const auto& l : leaves) out.push_back(l.grad().defined() ? l.grad() : torch::zeros_like(l));
  return out;
}

// The gradient of the mean cross-entropy of rows `rows` at parameters `p`.
Tensors gradient(const Setup& s, const Tensors& p, const torch::Tensor& rows) {
  auto w = leaves(p);
  const auto x = s.x.index_select(0, rows);
  const auto out = s.fasttext ? fasttext(w, x) : mlp_layers(w, x, 0, 3);
  torch::nn::functional::cross_entropy(out, s.y.index_select(0, rows)).backward();
  return grads(w);
}

// ---- Units: what one strategy instance keeps consistent over the replicas ------------------

struct Piece {
  int param;
  int dim = -1;  // -1: the whole tensor; else a slice [begin, begin + length) along dim
  std::int64_t begin = 0, length = 0;
  bool owner = true;  // false for a copy another unit updates (the row-parallel bias)
};
using Unit = std::vector<Piece>;

torch::Tensor view(const Tensors& t, const Piece& p) {
  return p.dim < 0 ? t[p.param] : t[p.param].narrow(p.dim, p.begin, p.length);
}

// The pieces' values end to end, in unit order or (an all-reduce bucket's) reversed.
torch::Tensor flat(const Unit& u, const Tensors& t, bool reversed = false) {
  Tensors parts;
  for (const auto& p : u) parts.push_back(view(t, p).reshape(-1));
  if (reversed) std::reverse(parts.begin(), parts.end());
  return torch::cat(parts);
}

std::vector<std::vector<std::int64_t>> shapes(const Unit& u, const Tensors& t, bool reversed) {
  std::vector<std::vector<std::int64_t>> out;
  for (const auto& p : u) out.push_back(view(t, p).sizes().vec());
  if (reversed) std::reverse(out.begin(), out.end());
  return out;
}

// Pieces of a flat vector laid out as flat() lays them.
Tensors unflat(const Unit& u, const Tensors& like, const torch::Tensor& f, bool reversed = false) {
  Tensors out(u.size());
  std::int64_t at = 0;
  for (std::size_t k = 0; k < u.size(); ++k) {
    const std::size_t i = reversed ? u.size() - 1 - k : k;
    const auto v = view(like, u[i]);
    out[i] = f.narrow(0, at, v.numel()).view(v.sizes());
    at += v.numel();
  }
  return out;
}

void assign(const Unit& u, Tensors& t, const torch::Tensor& f) {
  const auto parts = unflat(u, t, f);
  for (std::size_t i = 0; i < u.size(); ++i)
    if (u[i].owner) view(t, u[i]).copy_(parts[i]);
}

// The mlp's stages (layers 0-1 and 2-3, parallel.partition = [2, 2]), each as units: whole, or
// per tensor rank its slices of each Linear pair: the first split by output rows, the second by
// input columns, whose bias every tensor rank holds whole (tensor_parallel/parallel_linear.h).
std::vector<Unit> units(const Cell& c, const Tensors& p) {
  const int S = stages(c.split), T = tensor_ranks(c.split);
  const int params = static_cast<int>(p.size()), per_stage = params / S;
  std::vector<Unit> out;
  for (int s = 0; s < S; ++s)
    for (int t = 0; t < T; ++t) {
      Unit u;
      for (int i = s * per_stage; i < (s + 1) * per_stage; ++i) {
        if (T == 1) {
          u.push_back({i});
          continue;
        }
        const bool first_of_pair = (i / 2) % 2 == 0, weight = i % 2 == 0;
        if (first_of_pair) {  // column-parallel: rows
          const auto n = p[i].size(0) / T;
          u.push_back({i, 0, t * n, n});
        } else if (weight) {  // row-parallel weight: columns
          const auto n = p[i].size(1) / T;
          u.push_back({i, 1, t * n, n});
        } else {  // row-parallel bias: whole on every tensor rank
          u.push_back({i, -1, 0, 0, t == 0});
        }
      }
      out.push_back(u);
    }
  return out;
}

// ---- Compressors, each rank's state kept here ------------------------------------------------

struct Reduced {
  torch::Tensor average;
  Tensors sent;  // per rank
};

struct CompressorState {
  Tensors residual;        // per rank (error feedback)
  std::vector<Tensors> q;  // PowerSGD: per rank, per matrix
};

// PowerSGD's plan of a bucket: which tensors it sends as factors (rank 1), the rest plainly.
struct Matrix {
  std::int64_t offset, rows, cols;
};

std::vector<Matrix> powersgd_matrices(const std::vector<std::vector<std::int64_t>>& shapes) {
  std::vector<Matrix> out;
  std::int64_t offset = 0;
  for (const auto& shape : shapes) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    if (shape.size() >= 2) {
      const std::int64_t rows = shape[0], cols = n / rows;
      if (2 * (rows + cols) <= rows * cols) out.push_back({offset, rows, cols});
    }
    offset += n;
  }
  return out;
}

// Q's first value: uniform in [-1, 1) from the stream of (seed, bucket), as float32.
Tensors initial_q(const std::vector<Matrix>& matrices, std::size_t bucket) {
  data::SplitMix64 rng(data::derive_seed(kSeed, bucket, 0x706f776572));
  Tensors q;
  for (const auto& m : matrices) {
    auto t = torch::empty({m.cols, 1}, torch::kFloat64);
    for (std::int64_t i = 0; i < m.cols; ++i)
      t[i][0] = static_cast<double>(static_cast<float>(rng.uniform(-1, 1)));
    q.push_back(t);
  }
  return q;
}

torch::Tensor normalised(const torch::Tensor& p) {
  const double norm = p.norm().item<double>();
  return norm > 0 ? p / norm : p;
}

// fp16's common scale: the power of two that brings `ranks` times the largest magnitude to at
// most 2^15, computed in float32 as the compressor does.
double half_scale(double largest, int ranks) {
  const float total = static_cast<float>(largest) * static_cast<float>(ranks);
  if (!(total > 0)) return 1;
  return std::ldexp(1.0, static_cast<int>(std::floor(std::log2(32768.0f / total))));
}

torch::Tensor to_half_and_back(const torch::Tensor& g, double scale) {
  return (g * scale).to(torch::kHalf).to(torch::kFloat64) / scale;
}

// One bucket's compressed average over the ranks' `inputs`, with error feedback. `own`: a
// parameter server's pushes, each rank compressed on its own and decoded alone.
Reduced compressed(Compressor kind, CompressorState& state, Tensors inputs,
                   const std::vector<std::vector<std::int64_t>>& layout, std::size_t bucket,
                   bool own) {
  const int R = static_cast<int>(inputs.size());
  if (state.residual.empty()) state.residual.assign(R, torch::Tensor());
  for (int r = 0; r < R; ++r)
    if (state.residual[r].defined()) inputs[r] = inputs[r] + state.residual[r];
  Reduced out;
  const std::int64_t n = inputs[0].numel();
  if (kind == Compressor::fp16) {
    double largest = 0;
    for (const auto& g : inputs) largest = std::max(largest, g.abs().max().item<double>());
    for (const auto& g : inputs)
      out.sent.push_back(to_half_and_back(
          g, own ? half_scale(g.abs().max().item<double>(), 1) : half_scale(largest, R)));
  } else if (kind == Compressor::topk) {
    const auto k = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::ceil(0.25 * n)), 1, n);
    for (const auto& g : inputs) {
      const auto idx = std::get<1>(g.abs().topk(k));
      out.sent.push_back(torch::zeros_like(g).index_put_({idx}, g.index({idx})));
    }
  } else {  // PowerSGD, rank 1: P = M Q, averaged and normalised; Q = M^T P, averaged
    const auto matrices = powersgd_matrices(layout);
    if (state.q.empty()) state.q.assign(R, initial_q(matrices, bucket));
    for (const auto& g : inputs) out.sent.push_back(g.clone());  // the plain elements
    auto m_of = [&](int r, const Matrix& m) {
      return inputs[r].narrow(0, m.offset, m.rows * m.cols).view({m.rows, m.cols});
    };
    for (std::size_t i = 0; i < matrices.size(); ++i) {
      const auto& m = matrices[i];
      if (own) {  // each worker's own factors
        for (int r = 0; r < R; ++r) {
          const auto p = normalised(m_of(r, m).matmul(state.q[r][i]));
          state.q[r][i] = m_of(r, m).t().matmul(p);
          out.sent[r]
              .narrow(0, m.offset, m.rows * m.cols)
              .copy_(p.matmul(state.q[r][i].t()).reshape(-1));
        }
        continue;
      }
      auto p = torch::zeros({m.rows, 1}, torch::kFloat64);
      for (int r = 0; r < R; ++r) p += m_of(r, m).matmul(state.q[r][i]) / R;
      p = normalised(p);
      auto q = torch::zeros({m.cols, 1}, torch::kFloat64);
      for (int r = 0; r < R; ++r) q += m_of(r, m).t().matmul(p) / R;
      for (int r = 0; r < R; ++r) {
        state.q[r][i] = q;
        out.sent[r].narrow(0, m.offset, m.rows * m.cols).copy_(p.matmul(q.t()).reshape(-1));
      }
    }
  }
  // The decodes' mean (PowerSGD's factors are every rank's alike; its plain elements differ).
  out.average = torch::zeros_like(inputs[0]);
  for (const auto& s : out.sent) out.average += s / R;
  for (int r = 0; r < R; ++r) state.residual[r] = inputs[r] - out.sent[r];
  return out;
}

// ---- The run --------------------------------------------------------------------------------

class Run {
 public:
  Run(const Cell& c, const Setup& s)
      : c_(c),
        s_(s),
        R_(replicas(c)),
        order_(data::shuffled_permutation(static_cast<std::size_t>(s.x.size(0)), kSeed, 0)) {
    for (int r = 0; r < R_; ++r) {
      Tensors w, v;
      for (const auto& t : s.initial) {
        w.push_back(t.clone());
        v.push_back(torch::zeros_like(t));
      }
      W_.push_back(w);
      V_.push_back(v);
    }
    units_ = units(c, s.initial);
    for (const auto& u : units_) {
      centre_.push_back(flat(u, s.initial));
      anchor_.push_back(flat(u, s.initial));
    }
    allreduce_state_.resize(units_.size());
    local_state_.resize(units_.size());
    local_apart_.assign(units_.size(), false);
    momentum_apart_.assign(units_.size(), false);
  }

  std::vector<torch::Tensor> run() {
    if (c_.split == Split::pipedream) return pipedream();
    if (c_.split == Split::ddg) return ddg();
    for (int t = 1; t <= kSteps; ++t) {
      std::vector<Tensors> g;
      for (int r = 0; r < R_; ++r) g.push_back(gradient(s_, W_[r], rows(t, r, rows_per_replica())));
      for (std::size_t u = 0; u < units_.size(); ++u) update(u, t, g);
      if (c_.extra == Extra::resume && t == kResumeAt) checkpoint();
    }
    return consensus();
  }

 private:
  int rows_per_replica() const { return kBatch * (c_.extra == Extra::accumulate ? 2 : 1); }

  // Replica r's rows of step t: its block of the step's window of one shuffled order.
  torch::Tensor rows(int t, int r, int per_replica) const {
    std::vector<std::int64_t> out;
    const std::size_t begin = static_cast<std::size_t>((t - 1) * R_ + r) * per_replica;
    for (int i = 0; i < per_replica; ++i)
      out.push_back(static_cast<std::int64_t>(order_[begin + i]));
    return torch::tensor(out, torch::kLong);
  }

  static double clipped_scale(const torch::Tensor& g) {
    const double coef = kClip / (g.norm().item<double>() + 1e-6);
    return coef < 1 ? coef : 1;
  }

  void sgd_step(int r, std::size_t u, const torch::Tensor& g) {
    const auto parts = unflat(units_[u], W_[r], g);
    for (std::size_t i = 0; i < units_[u].size(); ++i) {
      if (!units_[u][i].owner) continue;
      auto v = view(V_[r], units_[u][i]);
      v.mul_(momentum()).add_(parts[i]);
      view(W_[r], units_[u][i]).sub_(kLr * v);
    }
  }

  double momentum() const { return c_.strategy == Strategy::hybrid ? 0.0 : kMomentum; }

  // One update of unit u, the strategy's step `label`, from each replica's gradient.
  void update(std::size_t u, int label, const std::vector<Tensors>& g) {
    switch (c_.strategy) {
      case Strategy::local_sgd_h1: return local(u, label, 1, g);
      case Strategy::local_sgd_h2: return local(u, label, kPeriod, g);
      case Strategy::post_local_sgd:
        if (label <= kWarmup) {
          synchronous(u, g);
          if (label == kWarmup) anchor_[u] = flat(units_[u], W_[0]);  // local SGD starts here
          return;
        }
        return local(u, label - kWarmup, kPeriod, g);
      case Strategy::easgd: return easgd(u, label, g);
      case Strategy::gossip: return gossip(u, g);
      default: return synchronous(u, g);
    }
  }

  bool clips() const { return c_.extra == Extra::clip; }

  // All-reduce, ZeRO, the parameter server (bsp), hybrid: every replica applies the average.
  void synchronous(std::size_t u, const std::vector<Tensors>& g) {
    const bool reversed = true;  // an all-reduce bucket holds its parameters last to first
    torch::Tensor avg;
    if (c_.compressor == Compressor::none) {
      avg = torch::zeros_like(flat(units_[u], g[0]));
      for (int r = 0; r < R_; ++r) avg += flat(units_[u], g[r]) / R_;
    } else {
      Tensors inputs;
      for (int r = 0; r < R_; ++r) inputs.push_back(flat(units_[u], g[r], reversed));
      const auto reduced =
          compressed(c_.compressor, allreduce_state_[u], inputs, shapes(units_[u], W_[0], reversed),
                     0, c_.strategy == Strategy::ps);
      Tensors back = unflat(units_[u], W_[0], reduced.average, reversed);
      Tensors flat_parts;
      for (auto& b : back) flat_parts.push_back(b.reshape(-1));
      avg = torch::cat(flat_parts);
    }
    if (clips()) avg = avg * clipped_scale(avg);
    for (int r = 0; r < R_; ++r) sgd_step(r, u, avg);
  }

  // Each replica steps on its own gradient; every `period` steps the unit is averaged (the
  // change since the last average through the compressor, added to it).
  void local(std::size_t u, int label, int period, const std::vector<Tensors>& g) {
    for (int r = 0; r < R_; ++r) {
      auto own = flat(units_[u], g[r]);
      if (clips()) own = own * clipped_scale(own);
      sgd_step(r, u, own);
    }
    local_apart_[u] = momentum_apart_[u] = true;
    if (label % period != 0) return;
    if (c_.compressor == Compressor::none) {
      average_replicas(u);
    } else {
      Tensors changes;
      for (int r = 0; r < R_; ++r) changes.push_back(flat(units_[u], W_[r]) - anchor_[u]);
      anchor_[u] = anchor_[u] + compressed(c_.compressor, local_state_[u], changes,
                                           shapes(units_[u], W_[0], false), 0, false)
                                    .average;
      for (int r = 0; r < R_; ++r) assign(units_[u], W_[r], anchor_[u]);
    }
    local_apart_[u] = false;
  }

  torch::Tensor mean_of(std::size_t u, const std::vector<Tensors>& t) const {
    auto m = torch::zeros_like(flat(units_[u], t[0]));
    for (int r = 0; r < R_; ++r) m += flat(units_[u], t[r]) / R_;
    return m;
  }

  void average_replicas(std::size_t u) {
    const auto m = mean_of(u, W_);
    for (int r = 0; r < R_; ++r) assign(units_[u], W_[r], m);
  }

  // x_i <- x_i - alpha (x_i - centre); centre <- centre + alpha N (mean - centre), from the
  // values before either moves.
  void easgd(std::size_t u, int label, const std::vector<Tensors>& g) {
    for (int r = 0; r < R_; ++r) {
      auto own = flat(units_[u], g[r]);
      if (clips()) own = own * clipped_scale(own);
      sgd_step(r, u, own);
    }
    if (label % kPeriod != 0) return;
    const auto mean = mean_of(u, W_);
    for (int r = 0; r < R_; ++r) {
      const auto x = flat(units_[u], W_[r]);
      assign(units_[u], W_[r], x - kAlpha * (x - centre_[u]));
    }
    centre_[u] = centre_[u] + kAlpha * R_ * (mean - centre_[u]);
  }

  // D-PSGD on a ring: x_i <- sum_j W_ij x_j (from before the step) + the step's update.
  void gossip(std::size_t u, const std::vector<Tensors>& g) {
    std::vector<torch::Tensor> before;
    for (int r = 0; r < R_; ++r) before.push_back(flat(units_[u], W_[r]));
    for (int r = 0; r < R_; ++r) {
      auto own = flat(units_[u], g[r]);
      if (clips()) own = own * clipped_scale(own);
      sgd_step(r, u, own);
    }
    std::vector<int> from;  // in-neighbours' offsets: r - 1, and r + 1 from three ranks on
    if (R_ >= 2) from.push_back(1);
    if (R_ >= 3) from.push_back(R_ - 1);
    const double w = 1.0 / (1 + static_cast<double>(from.size()));
    for (int r = 0; r < R_; ++r) {
      auto x = flat(units_[u], W_[r]) - before[r] + w * before[r];
      for (int d : from) x += w * before[(r - d + R_) % R_];
      assign(units_[u], W_[r], x);
    }
  }

  // A checkpoint installs the consensus, with the optimizer state averaged.
  void checkpoint() {
    for (std::size_t u = 0; u < units_.size(); ++u) {
      switch (c_.strategy) {
        case Strategy::local_sgd_h1:
        case Strategy::local_sgd_h2:
        case Strategy::post_local_sgd:
          if (local_apart_[u]) {
            average_replicas(u);
            anchor_[u] = flat(units_[u], W_[0]);
          }
          if (momentum_apart_[u]) average_momentum(u);
          local_apart_[u] = momentum_apart_[u] = false;
          break;
        case Strategy::easgd:
          for (int r = 0; r < R_; ++r) assign(units_[u], W_[r], centre_[u]);
          average_momentum(u);
          break;
        case Strategy::gossip:
          average_replicas(u);
          average_momentum(u);
          break;
        default: break;  // the replicas never differ
      }
    }
  }

  void average_momentum(std::size_t u) {
    const auto m = mean_of(u, V_);
    for (int r = 0; r < R_; ++r) assign(units_[u], V_[r], m);
  }

  // The model the run ends with: the replicas' mean, EASGD's centre.
  Tensors consensus() {
    Tensors out;
    for (const auto& t : s_.initial) out.push_back(t.clone());
    for (std::size_t u = 0; u < units_.size(); ++u) {
      const bool apart = c_.strategy == Strategy::easgd
                             ? true
                             : c_.strategy == Strategy::gossip || local_apart_[u];
      const auto model = c_.strategy == Strategy::easgd ? centre_[u]
                         : apart                        ? mean_of(u, W_)
                                                        : flat(units_[u], W_[0]);
      assign(units_[u], out, model);
    }
    return out;
  }

  // ---- Pipedream: 1F1B over two stages, every micro-batch an update of its own, its forward
  // and backward at the weights its forward met (stashed). The stages' replicas all-reduce.
  Tensors pipedream() {
    const int m = kMicroBatches, S = 2;
    for (int t = 1; t <= kSteps; ++t) {
      // Stage s's operations: min(m, S - s) forwards, then backward and forward alternating.
      std::vector<std::vector<std::pair<bool, int>>> ops(S);  // (forward, micro-batch)
      for (int s = 0; s < S; ++s) {
        int f = 0, b = 0;
        for (; f < std::min(m, S - s); ++f) ops[s].push_back({true, f});
        while (b < m) {
          ops[s].push_back({false, b++});
          if (f < m) ops[s].push_back({true, f++});
        }
      }
      std::vector<std::vector<Tensors>> stash(S, std::vector<Tensors>(m));  // stage's params
      std::map<int, std::vector<Tensors>> grad_of;  // micro-batch -> per replica, whole model
      std::vector<std::size_t> next(S, 0);
      std::vector<std::vector<bool>> forwarded(S, std::vector<bool>(m)),
          backwarded(S, std::vector<bool>(m));
      for (bool progress = true; progress;) {
        progress = false;
        for (int s = 0; s < S; ++s) {
          if (next[s] == ops[s].size()) continue;
          const auto [forward, i] = ops[s][next[s]];
          if (forward && s > 0 && !forwarded[s - 1][i]) continue;
          if (!forward && s < S - 1 && !backwarded[s + 1][i]) continue;
          if (forward) {
            stash[s][i] = stage_params(s, W_[0]);
            forwarded[s][i] = true;
          } else {
            if (!grad_of.count(i)) grad_of[i] = micro_batch_gradients(t, i, stash);
            update(static_cast<std::size_t>(s), t, grad_of[i]);
            backwarded[s][i] = true;
          }
          ++next[s];
          progress = true;
        }
      }
      if (c_.extra == Extra::resume && t == kResumeAt) checkpoint();
    }
    return consensus();
  }

  Tensors stage_params(int s, const Tensors& w) const {
    Tensors out;
    for (const auto& p : units_[s]) out.push_back(w[p.param].clone());
    return out;
  }

  // Each replica's gradient of micro-batch i's mean loss at the weights stashed for it.
  std::vector<Tensors> micro_batch_gradients(int t, int i,
                                             const std::vector<std::vector<Tensors>>& stash) {
    std::vector<Tensors> out;
    for (int r = 0; r < R_; ++r) {
      Tensors w = W_[r];
      for (std::size_t s = 0; s < units_.size(); ++s)
        for (std::size_t k = 0; k < units_[s].size(); ++k) w[units_[s][k].param] = stash[s][i][k];
      const auto all = rows(t, r, kBatch);
      const int per = kBatch / kMicroBatches;
      out.push_back(gradient(s_, w, all.narrow(0, i * per, per)));
    }
    return out;
  }

  // ---- ddg over two stages: the last stage steps on batch t; stage 0 on batch t - 1, at the
  // weights batch t - 1's forward met, with the gradient stage 1 sent in step t - 1. The batch
  // left at the end is applied after the last step.
  Tensors ddg() {
    std::vector<Tensors> stash0(R_), delta(R_);
    std::vector<torch::Tensor> held_rows(R_);
    auto stage0_update = [&](int label) {
      std::vector<Tensors> g;
      for (int r = 0; r < R_; ++r) {
        Tensors w = W_[r];
        for (std::size_t k = 0; k < units_[0].size(); ++k) w[units_[0][k].param] = stash0[r][k];
        auto l = leaves(w);
        (mlp_layers(l, s_.x.index_select(0, held_rows[r]), 0, 1) * delta[r][0]).sum().backward();
        g.push_back(grads(l));
      }
      update(0, label, g);
    };
    for (int t = 1; t <= kSteps; ++t) {
      std::vector<Tensors> g1;
      std::vector<Tensors> new_delta(R_);
      std::vector<Tensors> new_stash(R_);
      std::vector<torch::Tensor> new_rows(R_);
      for (int r = 0; r < R_; ++r) {
        new_rows[r] = rows(t, r, kBatch);
        new_stash[r] = stage_params(0, W_[r]);
        const auto h = mlp_layers(W_[r], s_.x.index_select(0, new_rows[r]), 0, 1)
                           .detach()
                           .requires_grad_(true);
        auto l = leaves(W_[r]);
        torch::nn::functional::cross_entropy(mlp_layers(l, h, 2, 3),
                                             s_.y.index_select(0, new_rows[r]))
            .backward();
        g1.push_back(grads(l));
        new_delta[r] = {h.grad()};
      }
      update(1, t, g1);
      if (t >= 2) stage0_update(t);
      stash0 = new_stash;
      delta = new_delta;
      held_rows = new_rows;
    }
    stage0_update(kSteps + 1);  // the drain
    return consensus();
  }

  const Cell c_;
  const Setup& s_;
  const int R_;
  const std::vector<std::size_t> order_;  // epoch 0's shuffled order of the rows
  std::vector<Tensors> W_, V_;            // per replica: parameters, momentum
  std::vector<Unit> units_;
  std::vector<torch::Tensor> centre_, anchor_;  // per unit: EASGD's centre, local SGD's anchor
  std::vector<CompressorState> allreduce_state_, local_state_;
  // Per unit, local SGD's: a local step since the parameters, the momentum were averaged.
  std::vector<bool> local_apart_, momentum_apart_;
};

}  // namespace

std::vector<torch::Tensor> reference_run(const Cell& c, const Setup& setup) {
  return Run(c, setup).run();
}

}  // namespace distml::train::conformance
