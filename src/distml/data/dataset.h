// An in-memory labelled dataset as the readers produce it: plain arrays, no torch, so that
// readers and samplers can be tested alone; the trainer wraps these buffers in tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace distml::data {

/// N samples of `feature_dim` floats each, stored row-major, and per sample either one class
/// id (`labels`) or `target_dim` float targets (`targets`, for regression).
struct Dataset {
  std::size_t num_samples = 0;
  std::size_t feature_dim = 0;
  /// Shape of one sample before flattening, e.g. {28, 28} for MNIST; {feature_dim} for CSV.
  std::vector<std::size_t> sample_shape;
  std::vector<float> features;       // num_samples * feature_dim
  std::vector<std::int64_t> labels;  // num_samples class ids; empty when `targets` are set
  std::vector<float> targets;        // num_samples * target_dim float targets, or empty
  std::size_t target_dim = 0;        // floats per sample in `targets`
  /// Shape of one sample's target before flattening: {} for a scalar, {k} for k outputs.
  std::vector<std::size_t> target_shape;
  /// For string labels: class id i stands for class_names[i]. Empty for numeric labels.
  std::vector<std::string> class_names;

  /// The features of sample i: feature_dim floats.
  const float* row(std::size_t i) const { return features.data() + i * feature_dim; }
  bool has_float_targets() const { return !targets.empty() || target_dim > 0; }
};

}  // namespace distml::data
