#include "distml/rl/policy_state.h"

#include <cstring>

#include "distml/core/error.h"
#include "distml/rl/policy.h"

namespace distml::rl {

static_assert(sizeof(double) == 2 * sizeof(float));

void put_doubles(std::vector<float>& out, std::span<const double> values) {
  const std::size_t at = out.size();
  out.resize(at + 2 * values.size());
  std::memcpy(out.data() + at, values.data(), values.size_bytes());
}

std::vector<double> get_doubles(std::span<const float> in, std::size_t count) {
  DML_CHECK(in.size() >= 2 * count, "fewer floats than the doubles they should hold");
  std::vector<double> out(count);
  std::memcpy(out.data(), in.data(), count * sizeof(double));
  return out;
}

std::size_t policy_floats(torch::nn::Module& net, const Normalizer* normalizer) {
  return parameter_count(net) + (normalizer ? 2 * normalizer->packed_size() : 0);
}

std::vector<float> pack_policy(torch::nn::Module& net, const Normalizer* normalizer) {
  std::vector<float> out = flat_parameters(net);
  if (normalizer) put_doubles(out, normalizer->shared_state());
  return out;
}

void unpack_policy(std::span<const float> payload, torch::nn::Module& net,
                   Normalizer* normalizer) {
  DML_CHECK_EQ(payload.size(), policy_floats(net, normalizer), "parameters payload");
  const std::size_t n = parameter_count(net);
  load_flat_parameters(net, payload.first(n));
  if (normalizer)
    normalizer->set_shared(get_doubles(payload.subspan(n), normalizer->packed_size()));
}

}  // namespace distml::rl
