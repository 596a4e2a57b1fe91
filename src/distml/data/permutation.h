// A seeded permutation of 0..n-1 that is the same on every platform and standard library,
// so that ranks built with different toolchains still agree on the global sample order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace distml::data {

/// splitmix64 (Steele, Lea & Flood 2014): state += 0x9e3779b97f4a7c15, then the output
/// is the state mixed by xor-shift-multiply. Small, fast and fully specified.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t state) : state_(state) {}
  std::uint64_t next();
  /// Uniform in [0, bound), bound >= 1, unbiased: rejects draws below 2^64 mod bound.
  std::uint64_t below(std::uint64_t bound);
  /// Uniform in [0, 1), from the top 53 bits of next().
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// Uniform in [low, high).
  double uniform(double low, double high) { return low + (high - low) * uniform(); }

 private:
  std::uint64_t state_;
};

/// splitmix64's output for state `z`: SplitMix64(z).next(). Each input bit flips about half the
/// output bits, so neighbouring inputs (seed, index) give unrelated seeds.
std::uint64_t splitmix64(std::uint64_t z);

/// An independent seed for stream (a, b) of `seed`, e.g. (rank, round).
std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0);

/// The permutation of 0..n-1 for (seed, epoch): a Fisher-Yates shuffle (for i = n-1 down
/// to 1, swap i with below(i + 1)) driven by SplitMix64 seeded with
/// mix(seed ^ mix(epoch)), where mix is splitmix64's output function.
std::vector<std::size_t> shuffled_permutation(std::size_t n, std::uint64_t seed,
                                              std::uint64_t epoch);

}  // namespace distml::data
