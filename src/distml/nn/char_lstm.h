// Character-level language model: Embedding -> LSTM (batch first) -> Linear to the vocabulary.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

namespace distml::nn {

class CharLstmImpl : public torch::nn::Module {
 public:
  CharLstmImpl(int64_t vocab_size, int64_t embedding_dim, int64_t hidden_size, int64_t lstm_layers);
  /// [B, T] int64 token ids -> [B, T, vocab_size] logits. Each call starts from a zero state.
  torch::Tensor forward(torch::Tensor tokens);

 private:
  torch::nn::Embedding embedding_{nullptr};
  torch::nn::LSTM lstm_{nullptr};
  torch::nn::Linear decoder_{nullptr};
};
TORCH_MODULE(CharLstm);

}  // namespace distml::nn
