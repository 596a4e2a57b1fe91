#include "distml/nn/fasttext.h"

#include <torch/nn/init.h>

#include "distml/nn/model_input.h"

namespace distml::nn {

FastTextImpl::FastTextImpl(int64_t buckets, int64_t dim, int64_t classes) {
  detail::check_positive("fasttext", "vocab_size (hash buckets)", buckets);
  detail::check_positive("fasttext", "embedding_dim", dim);
  detail::check_positive("fasttext", "num_classes", classes);
  embedding_ = register_module("embedding",
                               torch::nn::EmbeddingBag(torch::nn::EmbeddingBagOptions(buckets, dim)
                                                           .mode(torch::kMean)
                                                           .padding_idx(0)
                                                           .sparse(true)));
  classifier_ = register_module("classifier", torch::nn::Linear(dim, classes));
  // fastText's initialisation: embeddings uniform in +-1/dim, the output layer at zero.
  torch::NoGradGuard no_grad;
  torch::nn::init::uniform_(embedding_->weight, -1.0 / dim, 1.0 / dim);
  embedding_->weight[0].zero_();
  classifier_->weight.zero_();
  classifier_->bias.zero_();
}

torch::Tensor FastTextImpl::forward(torch::Tensor ids) {
  const auto buckets = embedding_->weight.size(0);
  auto index = ids.to(torch::kLong);
  if (index.numel() > 0) {
    const auto low = index.min().item<int64_t>(), high = index.max().item<int64_t>();
    if (low < 0 || high >= buckets)
      throw DataError(cat("fasttext: n-gram id ", low < 0 ? low : high, " is outside [0, ", buckets,
                          "): model.vocab_size must be the data's number of hash buckets"));
  }
  return classifier_->forward(embedding_->forward(index));
}

}  // namespace distml::nn
