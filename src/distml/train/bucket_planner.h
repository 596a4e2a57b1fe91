// How gradients are grouped into buckets for all-reduce: in reverse parameter order (about
// the order backward produces them), capped in bytes, identical on every rank.
#pragma once

#include <cstddef>
#include <vector>

namespace distml::train {

struct BucketPlan {
  /// Parameter indices of each bucket, in the order the buckets are reduced.
  std::vector<std::vector<std::size_t>> buckets;
};

/// Walks the parameters from last to first and starts a new bucket when adding one would pass
/// the cap: `first_cap` bytes for the first bucket (so that communication starts early in
/// backward), `cap` for the others. A parameter larger than the cap gets a bucket of its own.
BucketPlan plan_buckets(const std::vector<std::size_t>& param_bytes, std::size_t first_cap,
                        std::size_t cap);

}  // namespace distml::train
