// fastText's text classifier (Joulin et al. 2017, "Bag of Tricks for Efficient Text
// Classification"): the mean of a text's hashed n-gram embeddings, then one linear layer to the
// classes. The embedding holds nearly every parameter and one batch touches few of its rows, so
// its gradient is sparse: the model the hybrid strategy (sparse rows to servers) is for.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

namespace distml::nn {

class FastTextImpl : public torch::nn::Module {
 public:
  /// `buckets` rows of `dim` (row 0 is padding and stays zero), `classes` outputs.
  FastTextImpl(int64_t buckets, int64_t dim, int64_t classes);
  /// [B, L] n-gram ids in [0, buckets), 0 for padding, as floats (a dataset's features) or
  /// integers -> [B, classes] logits. A row of padding only has all-zero features.
  torch::Tensor forward(torch::Tensor ids);

 private:
  torch::nn::EmbeddingBag embedding_{nullptr};  // sparse gradients
  torch::nn::Linear classifier_{nullptr};
};
TORCH_MODULE(FastText);

}  // namespace distml::nn
