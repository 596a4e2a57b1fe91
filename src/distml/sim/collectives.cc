#include "distml/sim/collectives.h"

#include <bit>

#include "distml/core/error.h"

namespace distml::sim {
namespace {

Round ring_round(const std::vector<int>& ranks, double block_bytes) {
  Round round;
  const int n = static_cast<int>(ranks.size());
  for (int i = 0; i < n; ++i) round.messages.push_back({ranks[i], ranks[(i + 1) % n], block_bytes});
  round.repeat = 2 * (n - 1);
  return round;
}

std::vector<Round> ring(int world, double bytes) {
  if (world < 2) return {};
  std::vector<int> ranks(world);
  for (int r = 0; r < world; ++r) ranks[r] = r;
  return {ring_round(ranks, bytes / world)};
}

// Rabenseifner's halving-doubling, or with `halving` false recursive doubling (the whole vector
// at every step), each with the fold of the ranks above the largest power of two.
std::vector<Round> doubling(int world, double bytes, bool halving) {
  if (world < 2) return {};
  const int pow2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(world)));
  const int extra = world - pow2;
  const auto real_rank = [&](int nr) { return nr < extra ? 2 * nr + 1 : nr + extra; };
  std::vector<Round> rounds;
  Round fold, unfold;
  for (int e = 0; e < extra; ++e) {
    fold.messages.push_back({2 * e, 2 * e + 1, bytes});
    unfold.messages.push_back({2 * e + 1, 2 * e, bytes});
  }
  if (extra > 0) rounds.push_back(fold);
  std::vector<Round> down;
  double size = bytes;
  for (int d = pow2 / 2; d >= 1; d /= 2) {
    if (halving) size /= 2;
    Round step;
    for (int nr = 0; nr < pow2; ++nr)
      step.messages.push_back({real_rank(nr), real_rank(nr ^ d), size});
    down.push_back(step);
  }
  rounds.insert(rounds.end(), down.begin(), down.end());
  if (halving) rounds.insert(rounds.end(), down.rbegin(), down.rend());  // the doublings back
  if (extra > 0) rounds.push_back(unfold);
  return rounds;
}

std::vector<Round> binomial_tree(int world, double bytes) {
  std::vector<Round> reduce;
  for (int mask = 1; mask < world; mask <<= 1) {
    Round step;
    for (int r = mask; r < world; r += 2 * mask) step.messages.push_back({r, r - mask, bytes});
    reduce.push_back(step);
  }
  std::vector<Round> rounds = reduce;
  for (auto it = reduce.rbegin(); it != reduce.rend(); ++it) {  // the broadcast, back down
    Round step;
    for (const auto& m : it->messages) step.messages.push_back({m.to, m.from, bytes});
    rounds.push_back(step);
  }
  return rounds;
}

// Within each host: every rank hands each other rank of its host that rank's block, through
// shared memory (a reduce-scatter; the all-gather moves the same bytes back).
Round within_hosts(const Cluster& c, double bytes) {
  Round round;
  const int per_host = c.ranks_per_host;
  for (int h = 0; h < c.hosts; ++h)
    for (int i = 0; i < per_host; ++i)
      for (int j = 0; j < per_host; ++j)
        if (i != j)
          round.messages.push_back({h * per_host + i, h * per_host + j, bytes / per_host});
  return round;
}

std::vector<Round> hierarchical(const Cluster& c, double bytes) {
  std::vector<Round> rounds;
  if (c.ranks_per_host > 1) rounds.push_back(within_hosts(c, bytes));
  if (c.hosts > 1) {
    Round across;  // the rank at index i of every host, for every i, in one ring each
    for (int i = 0; i < c.ranks_per_host; ++i) {
      std::vector<int> ranks;
      for (int h = 0; h < c.hosts; ++h) ranks.push_back(h * c.ranks_per_host + i);
      const Round ring = ring_round(ranks, bytes / c.ranks_per_host / c.hosts);
      across.messages.insert(across.messages.end(), ring.messages.begin(), ring.messages.end());
      across.repeat = ring.repeat;
    }
    rounds.push_back(across);
  }
  if (c.ranks_per_host > 1) rounds.push_back(within_hosts(c, bytes));
  return rounds;
}

}  // namespace

std::vector<Round> allreduce_rounds(comm::Algorithm algorithm, std::string_view engine,
                                    double bytes, const Cluster& cluster) {
  using comm::Algorithm;
  const int world = cluster.world();
  if (world < 2 || bytes <= 0) return {};
  switch (algorithm) {
    case Algorithm::ring: return ring(world, bytes);
    case Algorithm::halving_doubling: return doubling(world, bytes, true);
    case Algorithm::tree: return binomial_tree(world, bytes);
    case Algorithm::hierarchical: return hierarchical(cluster, bytes);
    case Algorithm::shm:
      if (cluster.hosts > 1)
        throw UsageError("the shm all-reduce runs within one host; this cluster has several");
      return hierarchical(cluster, bytes);
    case Algorithm::native:
      if (engine == "local") return hierarchical(cluster, bytes);
      if (engine == "mpi" && bytes < 10000) return doubling(world, bytes, false);
      return ring(world, bytes);
    default:
      throw UsageError(cat("the simulator has no model of the ", comm::algorithm_name(algorithm),
                           " all-reduce"));
  }
}

// n - 1 steps of a ring, each rank passing `block_bytes` to the next.
std::vector<Round> ring_pass(double block_bytes, const Cluster& cluster) {
  const int world = cluster.world();
  if (world < 2) return {};
  std::vector<int> ranks(world);
  for (int r = 0; r < world; ++r) ranks[r] = r;
  Round round = ring_round(ranks, block_bytes);
  round.repeat = world - 1;
  return {round};
}

std::vector<Round> allgather_rounds(double bytes, const Cluster& cluster) {
  return ring_pass(bytes, cluster);
}

std::vector<Round> reduce_scatter_rounds(double bytes, const Cluster& cluster) {
  return ring_pass(bytes / cluster.world(), cluster);
}

}  // namespace distml::sim
