// Gradients gathered into flat buckets while backward produces them: the part the all-reduce,
// ZeRO and parameter-server strategies share. A hook on each parameter adds its gradient
// (plus what .grad() holds from earlier micro-steps) into its bucket's flat tensor and tells
// the owner when a bucket is complete; the owner decides what to send, and when.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "distml/train/bucket_planner.h"
#include "distml/train/strategies/replicas.h"

namespace distml::train {

class GradientBuckets {
 public:
  struct Bucket {
    std::vector<std::size_t> params;    // parameter indices, in plan order
    std::vector<std::int64_t> offsets;  // element offset of each parameter in `flat`
    std::int64_t elements = 0;          // flat's size: the gradients, padded up to `pad_to`
    torch::Tensor flat;                 // allocated on first use, and again after release()
    std::vector<char> arrived;
    std::size_t pending = 0;    // gradients still to arrive this step
    std::int64_t flag_at = -1;  // with flags: the element after the gradients
  };
  /// Called with a bucket's index when its last gradient has arrived (in arrival order).
  using ReadyFn = std::function<void(std::size_t bucket)>;

  /// Buckets by `plan` over `params`, whose flat tensors hold a multiple of `pad_to` elements
  /// (zeros after the gradients); registers the hooks. UsageError when a bucket would mix
  /// dtypes. The object must stay where it is: the hooks point to it, until the destructor
  /// removes them (the model may outlive the strategy).
  /// With `flags`, each bucket carries one more element after its gradients: 0, or 1 on a
  /// rank where one of the bucket's parameters got no gradient (complete_unused()). Reduced
  /// with the gradients, it tells every rank that some rank missed one (missing_elsewhere()).
  GradientBuckets(TrainableParameters params, const BucketPlan& plan, std::int64_t pad_to,
                  ReadyFn on_ready, bool flags = false);
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  /// False on the micro-steps of gradient accumulation: the hooks then do nothing. A second
  /// gradient for a parameter in one synchronising step (a second backward) is a UsageError
  /// naming it: its bucket may already be in flight.
  void set_sync(bool sync) { sync_ = sync; }
  /// Parameters that got no gradient this step: with `send_current`, or with flags, their
  /// current .grad() (zeros if none) completes their buckets, and with flags (and not
  /// `send_current`) their buckets' flags are raised and the first one's name returned, so that
  /// the collectives still match on every rank. Without either, an Error naming the first.
  std::string complete_unused(bool send_current);
  /// After the reduction (with flags): when some rank raised a bucket's flag, resets the
  /// buckets and throws an Error on every rank, naming `missing_here` (what complete_unused()
  /// returned) where this rank is the one that lacked it.
  void throw_if_missing(const std::string& missing_here);
  /// The same for bucket `index` alone, which must hold its flat tensor.
  void throw_if_missing(std::size_t index, const std::string& missing_here);
  /// Whether bucket `index` (holding its flat tensor) has its flag raised.
  bool flag_raised(std::size_t index) const {
    const Bucket& b = buckets_[index];
    return b.flag_at >= 0 && b.flat[b.flag_at].item<double>() != 0;
  }
  /// Ready for the next step's gradients.
  void reset();
  /// Frees a bucket's flat tensor until its next use (ZeRO's gradient memory).
  void release(std::size_t bucket) { buckets_[bucket].flat = torch::Tensor(); }
  /// How many buckets hold a flat tensor now.
  std::size_t flats_held() const {
    return static_cast<std::size_t>(std::count_if(
        buckets_.begin(), buckets_.end(), [](const Bucket& b) { return b.flat.defined(); }));
  }

  /// `values` (laid out like the bucket) into the .grad() of its parameters.
  void copy_to_grads(std::size_t bucket, const torch::Tensor& values);
  /// `values` (laid out like the bucket) into its parameters.
  void copy_to_params(std::size_t bucket, const torch::Tensor& values);

  std::vector<Bucket>& buckets() { return buckets_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  const std::vector<torch::Tensor>& params() const { return params_.tensors; }
  torch::Tensor& flat(std::size_t bucket);

 private:
  void on_gradient(std::size_t param, const torch::Tensor& grad);
  void arrived(std::size_t bucket, std::size_t slot);

  TrainableParameters params_;
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_, slot_of_;  // parameter -> bucket, its place in it
  ReadyFn on_ready_;
  std::vector<unsigned> hooks_;  // one per parameter, to remove them
  bool flags_ = false;
  bool sync_ = true;
};

}  // namespace distml::train
