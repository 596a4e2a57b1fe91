// The compressors make_compressor() chooses from, one family per file.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "distml/train/compress/compressor.h"

namespace distml::train::compress {

// The bytes of an archive, as save_state() returns them; an archive read back from them.
std::string archive_bytes(torch::serialize::OutputArchive& archive);
void read_archive(torch::serialize::InputArchive& archive, const std::string& bytes);

// float16.cc: the gradient rounded to fp16 (scaled by a power of two into its range) or bf16
// (to nearest even), summable.
std::unique_ptr<Compressor> make_float16(torch::ScalarType type, torch::ScalarType dtype);

// `dtype` is the gradients' (float32, or float64 where takes_float64()).

// sparsify.cc: the ceil(ratio x n) elements of largest magnitude with their indices
// (gathered), or as many at indices drawn alike on every rank (summable). Random-k's values
// go unscaled where error feedback keeps what they leave out (Stich et al. 2018), else scaled
// by n / k, which makes them unbiased (`unbiased`).
std::unique_ptr<Compressor> make_top_k(std::uint64_t seed, double ratio, torch::ScalarType dtype);
std::unique_ptr<Compressor> make_random_k(std::uint64_t seed, double ratio, bool unbiased,
                                          torch::ScalarType dtype);

// quantize.cc: unbiased stochastic quantisers, one byte per element, gathered.
// QSGD (Alistarh et al. 2017): ||g_b|| sign(g_i) l_i / s per block b of 512, l_i rounded up or
// down at random.
std::unique_ptr<Compressor> make_qsgd(std::uint64_t seed, int levels);
// Natural compression (Horvath et al. 2019): |g_i| rounded at random to one of the two powers
// of two around it.
std::unique_ptr<Compressor> make_natural(std::uint64_t seed);

// sign.cc: one bit per element, gathered. Scaled sign (EF-signSGD, Karimireddy et al. 2019):
// (||g||_1 / n) sign(g), averaged. Majority vote (signSGD, Bernstein et al. 2018): the sign of
// the sum of the ranks' signs, magnitude 1.
std::unique_ptr<Compressor> make_scaled_sign(std::uint64_t seed);
std::unique_ptr<Compressor> make_majority_vote(std::uint64_t seed);

// powersgd.cc: PowerSGD (Vogels et al. 2019).
std::unique_ptr<Compressor> make_power_sgd(std::uint64_t seed, std::int64_t rank,
                                           const std::vector<BucketLayout>& buckets);

}  // namespace distml::train::compress
