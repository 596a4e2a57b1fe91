#include "distml/train/generator_state.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cstring>

namespace distml::train {
namespace {

std::mutex& drawing_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::string state_now() {
  const auto t = at::detail::getDefaultCPUGenerator().get_state().contiguous();
  return {static_cast<const char*>(t.data_ptr()), static_cast<std::size_t>(t.numel())};
}

void set_state_now(const std::string& state) {
  auto t = torch::empty({static_cast<std::int64_t>(state.size())}, torch::kUInt8);
  std::memcpy(t.data_ptr(), state.data(), state.size());
  at::Generator generator = at::detail::getDefaultCPUGenerator();  // a handle to it
  generator.set_state(t);
}

}  // namespace

// Between draws from streams of one's own, so that what is read or set is the default's.
std::string generator_state() {
  std::lock_guard lock(drawing_mutex());
  return state_now();
}

void set_generator_state(const std::string& state) {
  std::lock_guard lock(drawing_mutex());
  set_state_now(state);
}

void draw_seeded(std::uint64_t seed, const std::function<void()>& draw) {
  std::lock_guard lock(drawing_mutex());
  torch::manual_seed(seed);
  draw();
}

DrawingFrom::DrawingFrom(std::string& state)
    : lock_(drawing_mutex()), state_(state), saved_(state_now()) {
  set_state_now(state_);
}

DrawingFrom::~DrawingFrom() {
  state_ = state_now();
  set_state_now(saved_);
}

}  // namespace distml::train
