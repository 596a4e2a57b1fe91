#include "distml/nn/char_lstm.h"

#include "distml/nn/model_input.h"

namespace distml::nn {

CharLstmImpl::CharLstmImpl(int64_t vocab_size, int64_t embedding_dim, int64_t hidden_size,
                           int64_t lstm_layers) {
  detail::check_positive("char_lstm", "vocab_size", vocab_size);
  detail::check_positive("char_lstm", "embedding_dim", embedding_dim);
  detail::check_positive("char_lstm", "hidden_size", hidden_size);
  detail::check_positive("char_lstm", "lstm_layers", lstm_layers);
  embedding_ = register_module("embedding", torch::nn::Embedding(vocab_size, embedding_dim));
  lstm_ = register_module("lstm", torch::nn::LSTM(torch::nn::LSTMOptions(embedding_dim, hidden_size)
                                                      .num_layers(lstm_layers)
                                                      .batch_first(true)));
  decoder_ = register_module("decoder", torch::nn::Linear(hidden_size, vocab_size));
}

torch::Tensor CharLstmImpl::forward(torch::Tensor tokens) {
  torch::Tensor hidden = std::get<0>(lstm_->forward(embedding_->forward(tokens)));
  return decoder_->forward(hidden);
}

}  // namespace distml::nn
