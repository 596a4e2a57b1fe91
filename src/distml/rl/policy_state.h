// What a learner sends its actors so that they act as it would: the flat parameters and the
// normaliser's shared statistics; and what an actor sends back besides its data: the rows it
// counted since (Normalizer::take_pending). Statistics travel as doubles, each as the bit pattern
// of two floats of the float payload, so that nothing is rounded on the way.
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <span>
#include <vector>

#include "distml/rl/normalizer.h"

namespace distml::rl {

/// Appends `values` as 2 floats each (bit patterns, never used as numbers).
void put_doubles(std::vector<float>& out, std::span<const double> values);
/// Reads `count` doubles written by put_doubles from the start of `in`.
std::vector<double> get_doubles(std::span<const float> in, std::size_t count);

/// Floats of a parameters payload of `net` and `normalizer` (null: no statistics).
std::size_t policy_floats(torch::nn::Module& net, const Normalizer* normalizer);
/// The parameters payload: flat parameters, then the shared statistics.
std::vector<float> pack_policy(torch::nn::Module& net, const Normalizer* normalizer);
/// Loads a pack_policy payload into `net` and the normaliser's shared statistics.
void unpack_policy(std::span<const float> payload, torch::nn::Module& net, Normalizer* normalizer);

}  // namespace distml::rl
