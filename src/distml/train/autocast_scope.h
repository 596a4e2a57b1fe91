// train.precision = "bf16": the model's forward in bfloat16 through LibTorch's CPU autocast,
// as torch.autocast("cpu", dtype=torch.bfloat16) runs it. The parameters stay float32 (the
// master weights, and the optimizer's state beside them): autocast casts each weight to
// bfloat16 where an operation on its list takes it (matrix products, convolutions), and the
// cast's backward hands the gradient back in float32. Operations on autocast's float32 list run
// in float32, those on neither list in their inputs' type.
#pragma once

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include <utility>

namespace distml::train {

/// While alive, with `bf16` true: this thread's CPU operations under autocast to bfloat16.
/// Nests; the last scope to end drops the casts it cached (the weights change every step).
class AutocastScope {
 public:
  explicit AutocastScope(bool bf16) : on_(bf16) {
    if (!on_) return;
    was_enabled_ = at::autocast::is_cpu_enabled();
    was_dtype_ = at::autocast::get_autocast_cpu_dtype();
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (!on_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_cpu_enabled(was_enabled_);
    at::autocast::set_autocast_cpu_dtype(was_dtype_);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool on_, was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kBFloat16;
};

/// `forward()` under an AutocastScope(bf16); with bf16, a floating-point result comes back
/// in float32 (the dtype bf16 trains in), as after torch.autocast's scope: the loss, the
/// metrics and a pipeline's links see float32.
template <class Forward>
at::Tensor in_precision(bool bf16, Forward&& forward) {
  if (!bf16) return std::forward<Forward>(forward)();
  at::Tensor out;
  {
    const AutocastScope autocast(true);
    out = std::forward<Forward>(forward)();
  }
  return out.is_floating_point() ? out.to(at::kFloat) : out;
}

}  // namespace distml::train
