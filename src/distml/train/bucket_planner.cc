#include "distml/train/bucket_planner.h"

namespace distml::train {

BucketPlan plan_buckets(const std::vector<std::size_t>& param_bytes, std::size_t first_cap,
                        std::size_t cap) {
  BucketPlan plan;
  std::size_t filled = 0;
  for (std::size_t k = param_bytes.size(); k-- > 0;) {
    const std::size_t limit = plan.buckets.size() == 1 ? first_cap : cap;
    if (plan.buckets.empty() || (filled > 0 && filled + param_bytes[k] > limit)) {
      plan.buckets.emplace_back();
      filled = 0;
    }
    plan.buckets.back().push_back(k);
    filled += param_bytes[k];
  }
  return plan;
}

}  // namespace distml::train
