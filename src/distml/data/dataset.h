// An in-memory labelled dataset as the readers produce it: plain arrays, no torch, so that
// readers and samplers can be tested alone; the trainer wraps these buffers in tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace distml::data {

/// N samples of `feature_dim` floats each, stored row-major, and one class id per sample.
struct Dataset {
  std::size_t num_samples = 0;
  std::size_t feature_dim = 0;
  /// Shape of one sample before flattening, e.g. {28, 28} for MNIST; {feature_dim} for CSV.
  std::vector<std::size_t> sample_shape;
  std::vector<float> features;       // num_samples * feature_dim
  std::vector<std::int64_t> labels;  // num_samples
  /// For string labels: class id i stands for class_names[i]. Empty for numeric labels.
  std::vector<std::string> class_names;

  /// The features of sample i: feature_dim floats.
  const float* row(std::size_t i) const { return features.data() + i * feature_dim; }
};

}  // namespace distml::data
