#include "distml/rl/normalizer.h"

#include <algorithm>
#include <cmath>

#include "distml/core/error.h"

namespace distml::rl {

void Normalizer::Part::refresh(double epsilon) {
  RunningMeanStd all = shared;
  all.merge(pending);
  mean = all.mean();
  inv_std = all.variance();
  for (double& v : inv_std) v = 1.0 / std::sqrt(v + epsilon);
}

template <class Self>
auto Normalizer::parts_of(Self& self) {
  std::vector<decltype(&self.observations_)> out;
  if (self.config_.observations) out.push_back(&self.observations_);
  if (self.config_.rewards) out.push_back(&self.returns_);
  return out;
}

Normalizer::Normalizer(const NormalizeConfig& config, int observation_size, int copies,
                       double gamma)
    : config_(config), gamma_(gamma), discounted_(static_cast<std::size_t>(copies), 0.0) {
  observations_.shared = observations_.pending =
      RunningMeanStd(config.observations ? static_cast<std::size_t>(observation_size) : 0);
  returns_.shared = returns_.pending = RunningMeanStd(config.rewards ? 1 : 0);
  for (Part* p : parts_of(*this)) p->refresh(config_.epsilon);
}

void Normalizer::observe(std::span<float> rows) {
  if (!config_.observations) return;
  observations_.pending.add(rows);
  observations_.refresh(config_.epsilon);
  normalize(rows);
}

void Normalizer::normalize(std::span<float> rows) const {
  if (!config_.observations) return;
  const std::size_t w = observations_.mean.size();
  DML_CHECK(rows.size() % w == 0, "observations do not fill whole rows");
  const double clip = config_.clip_observations;
  for (std::size_t at = 0; at < rows.size(); ++at) {
    const std::size_t i = at % w;
    const double z = (rows[at] - observations_.mean[i]) * observations_.inv_std[i];
    rows[at] = static_cast<float>(std::clamp(z, -clip, clip));
  }
}

void Normalizer::scale_rewards(std::span<float> rewards, std::span<const std::uint8_t> ended,
                               int first_copy) {
  if (!config_.rewards) return;
  DML_CHECK(first_copy >= 0 && first_copy + rewards.size() <= discounted_.size(),
            "rewards per copy");
  DML_CHECK_EQ(ended.size(), rewards.size(), "episode ends per copy");
  const std::span<double> discounted =
      std::span<double>(discounted_).subspan(first_copy, rewards.size());
  std::vector<float> returns(rewards.size());
  for (std::size_t c = 0; c < rewards.size(); ++c) {
    discounted[c] = discounted[c] * gamma_ + rewards[c];
    returns[c] = static_cast<float>(discounted[c]);
  }
  returns_.pending.add(returns);
  returns_.refresh(config_.epsilon);
  const double clip = config_.clip_rewards;
  for (std::size_t c = 0; c < rewards.size(); ++c) {
    rewards[c] = static_cast<float>(std::clamp(rewards[c] * returns_.inv_std[0], -clip, clip));
    if (ended[c]) discounted[c] = 0;
  }
}

void Normalizer::sync(comm::Communicator& comm) {
  const std::vector<double> mine = take_pending();
  if (mine.empty()) return;
  std::vector<double> all(mine.size() * static_cast<std::size_t>(comm.size()));
  comm.allgather(comm::cview(mine), comm::view(all));
  for (int r = 0; r < comm.size(); ++r)
    merge_pending(std::span<const double>(all).subspan(r * mine.size(), mine.size()));
}

std::size_t Normalizer::packed_size() const {
  std::size_t n = 0;
  for (const Part* p : parts_of(*this)) n += RunningMeanStd::packed_size(p->shared.width());
  return n;
}

std::vector<double> Normalizer::take_pending() {
  std::vector<double> out;
  for (Part* p : parts_of(*this)) {
    const std::vector<double> packed = p->pending.pack();
    out.insert(out.end(), packed.begin(), packed.end());
    p->pending.clear();
  }
  return out;
}

std::vector<double> Normalizer::shared_state() const {
  std::vector<double> out;
  for (const Part* p : parts_of(*this)) {
    const std::vector<double> packed = p->shared.pack();
    out.insert(out.end(), packed.begin(), packed.end());
  }
  return out;
}

namespace {

// Splits `packed` into one RunningMeanStd per part, by the parts' widths.
template <class Visit>
void for_each_packed(std::span<const double> packed, std::size_t expected,
                     const std::vector<std::size_t>& widths, Visit visit) {
  if (packed.size() != expected)
    throw Error(cat("normalisation statistics of ", packed.size(), " values, expected ", expected,
                    " (is [normalize] the same as where they came from?)"));
  std::size_t at = 0;
  for (std::size_t i = 0; i < widths.size(); ++i) {
    const std::size_t n = RunningMeanStd::packed_size(widths[i]);
    visit(i, RunningMeanStd::unpack(packed.subspan(at, n), widths[i]));
    at += n;
  }
}

}  // namespace

void Normalizer::merge_pending(std::span<const double> packed) {
  std::vector<Part*> ps = parts_of(*this);
  std::vector<std::size_t> widths;
  for (Part* p : ps) widths.push_back(p->shared.width());
  for_each_packed(packed, packed_size(), widths, [&](std::size_t i, const RunningMeanStd& s) {
    ps[i]->shared.merge(s);
    ps[i]->refresh(config_.epsilon);
  });
}

void Normalizer::set_shared(std::span<const double> packed) {
  std::vector<Part*> ps = parts_of(*this);
  std::vector<std::size_t> widths;
  for (Part* p : ps) widths.push_back(p->shared.width());
  for_each_packed(packed, packed_size(), widths, [&](std::size_t i, const RunningMeanStd& s) {
    ps[i]->shared = s;
    ps[i]->refresh(config_.epsilon);
  });
}

}  // namespace distml::rl
