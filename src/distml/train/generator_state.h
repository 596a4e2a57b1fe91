// torch's default CPU generator, which dropout draws from: its state as bytes (checkpoints
// keep it, so that a resumed run draws the same masks), and a stream of one's own where ranks
// are threads of one process and would otherwise share it.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace distml::train {

/// The default CPU generator's state, and setting it back; never while a DrawingFrom of
/// another thread has its own state in the generator.
std::string generator_state();
void set_generator_state(const std::string& state);

/// Seeds the default CPU generator with `seed` and runs `draw` while no DrawingFrom is alive
/// (and no other draw_seeded): ranks that are threads of one process build their models one at
/// a time, from the same draws, whatever the others' pipeline stages draw meanwhile. The
/// generator is left where `draw` left it.
void draw_seeded(std::uint64_t seed, const std::function<void()>& draw);

/// While it lives, torch's default CPU generator draws from `state` (which it advances), and
/// no other DrawingFrom of the process is alive. So ranks that are threads of one process (the
/// local engine) each draw from a stream of their own, whatever the others do meanwhile, and a
/// forward re-computed from a saved state draws its first masks again. Afterwards the default
/// generator is as it was.
class DrawingFrom {
 public:
  explicit DrawingFrom(std::string& state);
  ~DrawingFrom();
  DrawingFrom(const DrawingFrom&) = delete;
  DrawingFrom& operator=(const DrawingFrom&) = delete;

 private:
  std::unique_lock<std::mutex> lock_;
  std::string& state_;
  std::string saved_;
};

}  // namespace distml::train
