// Prioritized replay throughput at CartPole size (observation 4, action 1, capacity 100k) in
// Ape-X's mix: per learner step actors insert 128 transitions, the learner samples 64 and
// updates their 64 priorities. Prints one JSON line; a rough number, not a test.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "distml/rl/prioritized_replay.h"

int main() {
  using Clock = std::chrono::steady_clock;
  constexpr std::size_t kCapacity = 100000, kBatch = 64, kInsertsPerStep = 2 * kBatch;
  constexpr int kSteps = 20000;
  distml::rl::PrioritizedReplay replay(kCapacity, 4, 1, 0.6, 1);

  distml::rl::Transition t{{0.1f, 0.2f, 0.3f, 0.4f}, {1.0f}, 1.0f, 0.99f, {0.2f, 0.3f, 0.4f, 0.5f}};
  // Warm up to a full buffer so every step overwrites, as in a long run.
  std::uint64_t state = 12345;
  auto next_priority = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return 0.01 + static_cast<double>(state >> 11) * 0x1.0p-53;
  };
  for (std::size_t k = 0; k < kCapacity; ++k) replay.add(t, next_priority());

  std::vector<float> priorities(kBatch);
  std::uint64_t inserted = 0, sampled = 0;
  double checksum = 0;  // keeps the compiler from dropping the sampled data
  const auto start = Clock::now();
  for (int step = 0; step < kSteps; ++step) {
    for (std::size_t k = 0; k < kInsertsPerStep; ++k) {
      t.reward = static_cast<float>(k);
      replay.add(t, next_priority());
    }
    inserted += kInsertsPerStep;
    const auto batch = replay.sample(kBatch, 0.4);
    sampled += kBatch;
    for (std::size_t k = 0; k < kBatch; ++k) {
      checksum += batch.weights[k] + batch.rewards[k];
      priorities[k] = static_cast<float>(next_priority());
    }
    replay.update_priorities(batch.indices, priorities);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf(
      "{\"inserts_per_sec\": %.0f, \"samples_per_sec\": %.0f, \"ops_per_sec\": %.0f, "
      "\"seconds\": %.3f, \"capacity\": %zu, \"batch\": %zu, \"inserts_per_step\": %zu, "
      "\"checksum\": %.1f}\n",
      inserted / seconds, sampled / seconds, (inserted + sampled) / seconds, seconds, kCapacity,
      kBatch, kInsertsPerStep, checksum);
  return 0;
}
