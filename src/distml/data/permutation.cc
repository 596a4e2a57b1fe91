#include "distml/data/permutation.h"

#include <numeric>
#include <utility>

namespace distml::data {
namespace {

std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

std::uint64_t splitmix64(std::uint64_t z) { return mix(z + 0x9e3779b97f4a7c15ULL); }

std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t a, std::uint64_t b) {
  SplitMix64 h(seed);
  SplitMix64 ha(h.next() ^ a);
  SplitMix64 hb(ha.next() ^ b);
  return hb.next();
}

std::uint64_t SplitMix64::next() {
  state_ += 0x9e3779b97f4a7c15ULL;
  return mix(state_);
}

std::uint64_t SplitMix64::below(std::uint64_t bound) {
  const std::uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
  for (;;) {
    const std::uint64_t x = next();
    if (x >= threshold) return x % bound;
  }
}

std::vector<std::size_t> shuffled_permutation(std::size_t n, std::uint64_t seed,
                                              std::uint64_t epoch) {
  std::vector<std::size_t> p(n);
  std::iota(p.begin(), p.end(), std::size_t{0});
  SplitMix64 rng(mix(seed ^ mix(epoch)));
  for (std::size_t i = n; i > 1; --i) std::swap(p[i - 1], p[rng.below(i)]);
  return p;
}

}  // namespace distml::data
