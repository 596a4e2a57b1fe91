// Gradient compressors against what each one promises: unbiased quantisers, exact top-k,
// error feedback that loses nothing, fp16/bf16 within their rounding, PowerSGD exact on
// low-rank matrices, workers' packed pushes that a parameter server decodes to what they sent,
// and every compressor training a model under all-reduce, local SGD, post-local SGD and a
// parameter server.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <numeric>

#include "../data/temp_dir.h"
#include "distml/comm/local/local_world.h"
#include "distml/core/error.h"
#include "distml/train/bucket_planner.h"
#include "distml/train/compress/compressor.h"
#include "distml/train/strategy_factory.h"
#include "trainer_fixture.h"

namespace distml::train {
namespace {

using compress::BucketLayout;
using compress::CompressOptions;
using compress::make_compressor;
using compress::Reduced;

BucketLayout flat_layout(std::int64_t n) { return {{0}, {{n}}, n}; }

torch::Tensor seeded_randn(std::int64_t n, std::uint64_t seed) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randn({n}, gen);
}

CompressOptions options(const std::string& name, bool error_feedback = false) {
  CompressOptions o;
  o.name = name;
  o.error_feedback = error_feedback;
  o.seed = 5;
  return o;
}

// Each rank's result of reducing `grad_of(rank)` once at step 1, with a fresh compressor.
std::vector<Reduced> reduce_on(int world, const CompressOptions& o, const BucketLayout& layout,
                               const std::function<torch::Tensor(int)>& grad_of) {
  std::vector<Reduced> out(world);
  std::mutex mutex;
  comm::local::run_ranks(world, {}, [&](comm::Communicator& comm) {
    auto c = make_compressor(o, {layout});
    auto r = c->reduce(grad_of(comm.rank()), 0, 1, comm);
    std::lock_guard lock(mutex);
    out[comm.rank()] = r;
  });
  return out;
}

// The mean of `draws` reductions of one gradient (one rank, a new draw each step) stays within
// 6 standard deviations of it per element. For QSGD with s levels an element is its block's
// norm / s times a Bernoulli variable, so its standard deviation is at most norm / (2 s), with
// the whole vector's norm an upper bound of the block's; for natural
// compression |g| lies in [2^e, 2^(e+1)) and is rounded to one of the two, so at most
// 2^e / 2 <= |g| / 2. Over 1000 elements a normal deviation beyond 6 sigma has probability
// about 2e-6; a biased rounding (always down) misses by a quarter of the spacing on average.
void expect_unbiased(const std::string& name, const std::function<double(double, double)>& sd) {
  const std::int64_t n = 1000, draws = 2000;
  const auto g = seeded_randn(n, 3);
  const double norm = g.norm().item<double>();
  torch::Tensor sum = torch::zeros({n});
  comm::local::run_ranks(1, {}, [&](comm::Communicator& comm) {
    auto c = make_compressor(options(name), {flat_layout(n)});
    for (std::int64_t step = 1; step <= draws; ++step) sum += c->reduce(g, 0, step, comm).average;
  });
  const auto mean = sum / draws;
  for (std::int64_t i = 0; i < n; ++i) {
    const double gi = g[i].item<double>();
    ASSERT_LE(std::abs(mean[i].item<double>() - gi), 6 * sd(gi, norm) / std::sqrt(draws))
        << name << " element " << i << " = " << gi;
  }
}

TEST(Compress, QsgdIsUnbiased) {
  expect_unbiased("qsgd", [](double, double norm) { return norm / (2 * 16); });
}

// Each block of 512 has its own norm: a spike in the first block does not flatten the second
// to zeros. With the second block's norm (~sqrt(512) = 22.6) and s = 16, an element |g| rounds
// up to a non-zero level with probability 16 |g| / 22.6, ~0.56 on average: ~290 of 512 (sd
// ~11); scaled by one norm for the whole vector (~1e4) fewer than one would be non-zero.
TEST(Compress, QsgdScalesEachBlockByItsOwnNorm) {
  auto g = seeded_randn(1024, 4);
  g[0] = 1e4;
  comm::local::run_ranks(1, {}, [&](comm::Communicator& comm) {
    auto c = make_compressor(options("qsgd"), {flat_layout(1024)});
    const auto second = c->reduce(g, 0, 1, comm).average.slice(0, 512, 1024);
    EXPECT_GT(second.ne(0).sum().item<std::int64_t>(), 200);
  });
}

TEST(Compress, NaturalCompressionIsUnbiased) {
  expect_unbiased("natural", [](double g, double) { return std::abs(g) / 2; });
}

TEST(Compress, NaturalCompressionSendsPowersOfTwoAroundTheValue) {
  const auto g = seeded_randn(500, 4);
  const auto r = reduce_on(1, options("natural"), flat_layout(500), [&](int) { return g; })[0];
  for (std::int64_t i = 0; i < 500; ++i) {
    const double x = g[i].item<double>(), y = r.average[i].item<double>();
    int e = 0;
    EXPECT_EQ(std::frexp(std::abs(y), &e), 0.5) << y << " is not a power of two";
    EXPECT_TRUE(std::abs(y) >= std::abs(x) / 2 && std::abs(y) <= 2 * std::abs(x) && x * y > 0)
        << x << " sent as " << y;
  }
  EXPECT_EQ(r.bytes_sent, 500 + 4u);  // a byte per element and the largest exponent
}

// The mean of the ranks' top-k: each rank's k largest magnitudes, found here by sorting. Indices
// travel in 2 bytes up to 65536 elements (those above 32767 included), in 4 beyond.
TEST(Compress, TopKSendsExactlyTheKLargestOfEachRank) {
  struct Case {
    std::int64_t n, k;
    int world;
  };
  for (const Case& c :
       {Case{200, 20, 1}, Case{200, 20, 3}, Case{65536, 66, 1}, Case{70000, 70, 1}}) {
    auto o = options("topk");
    o.ratio = static_cast<double>(c.k) / static_cast<double>(c.n);
    auto grad_of = [&](int rank) { return seeded_randn(c.n, 10 + rank); };
    const auto results = reduce_on(c.world, o, flat_layout(c.n), grad_of);
    torch::Tensor want = torch::zeros({c.n});
    for (int rank = 0; rank < c.world; ++rank) {
      const auto g = grad_of(rank);
      const std::vector<float> v(g.data_ptr<float>(), g.data_ptr<float>() + c.n);
      std::vector<std::int64_t> order(c.n);
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(),
                [&](std::int64_t a, std::int64_t b) { return std::abs(v[a]) > std::abs(v[b]); });
      torch::Tensor mine = torch::zeros({c.n});
      for (std::int64_t j = 0; j < c.k; ++j) mine[order[j]] = v[order[j]];
      EXPECT_TRUE(torch::equal(results[rank].sent, mine)) << "n " << c.n << " rank " << rank;
      want += mine;
    }
    EXPECT_TRUE(torch::allclose(results[0].average, want / c.world, 0, 0)) << "n " << c.n;
    EXPECT_EQ(results[0].bytes_sent, static_cast<std::size_t>(c.k) * (c.n <= 65536 ? 6 : 8))
        << "n " << c.n;  // an index and an f32 value each
  }
}

// With error feedback the values go unscaled (the residual keeps the rest); without it they
// are scaled by n / k = 20, so that the decode is unbiased.
TEST(Compress, RandomKSendsTheSameIndicesFromEveryRankAndAveragesThem) {
  const std::int64_t n = 300;
  for (bool error_feedback : {true, false}) {
    auto o = options("randomk", error_feedback);
    o.ratio = 0.05;                                                            // k = 15
    auto grad_of = [&](int rank) { return seeded_randn(n, 20 + rank) + 10; };  // no zeros
    const auto results = reduce_on(3, o, flat_layout(n), grad_of);
    const auto chosen = results[0].sent != 0;
    EXPECT_EQ(chosen.sum().item<std::int64_t>(), 15);
    const double scale = error_feedback ? 1.0 : 20.0;
    torch::Tensor want = torch::zeros({n});
    for (int rank = 0; rank < 3; ++rank) {
      EXPECT_TRUE(torch::equal(results[rank].sent != 0, chosen)) << "rank " << rank;
      want += torch::where(chosen, grad_of(rank), torch::zeros({n})) * scale;
    }
    // The all-reduce sums the three float32 values in its own order, then divides; the
    // reference sums in rank order. Each of the two roundings per sum is at most u = 2^-24 ≈
    // 6e-8 of the values (all near 10, so no cancellation), and the scale by a power of ten
    // adds one more, so the two differ by a few u: 1e-6 relative leaves a margin, while a wrong
    // index, scale or a missing rank moves an element by a third or more.
    EXPECT_TRUE(torch::allclose(results[0].average, want / 3, 1e-6, 0)) << error_feedback;
    EXPECT_EQ(results[0].bytes_sent, 15 * 4u);
  }
}

// Without error feedback random-k is unbiased: an element is n / k times itself with
// probability k / n, else 0, so its standard deviation is |g| sqrt(n / k - 1), |g| at k = n / 2.
TEST(Compress, RandomKWithoutErrorFeedbackIsUnbiased) {
  const std::int64_t n = 1000, draws = 2000;
  auto o = options("randomk");
  o.ratio = 0.5;
  const auto g = seeded_randn(n, 3);
  torch::Tensor sum = torch::zeros({n});
  comm::local::run_ranks(1, {}, [&](comm::Communicator& comm) {
    auto c = make_compressor(o, {flat_layout(n)});
    for (std::int64_t step = 1; step <= draws; ++step) sum += c->reduce(g, 0, step, comm).average;
  });
  // 6 standard deviations of the mean of `draws`; an unscaled decode misses by |g| / 2.
  EXPECT_TRUE(((sum / draws - g).abs() <= 6 * g.abs() / std::sqrt(draws)).all().item<bool>());
}

// Error feedback keeps what top-k did not send: after the gradients stop (zeros from then on),
// k of the residual's elements go out per step, so within n / k steps everything has gone, and
// what was sent adds up to what came in. Each element is sent once after it last changed, so
// the sums differ only by float32 rounding of the running sums: at most steps x u (u = 2^-24)
// of the largest partial sum; the bound uses 1e-5, an order above 200 x 6e-8.
TEST(Compress, ErrorFeedbackLosesNothing) {
  const std::int64_t n = 100, steps = 30;
  auto o = options("topk", /*error_feedback=*/true);
  o.ratio = 0.05;  // 5 of 100 per step: 20 steps flush the residual
  comm::local::run_ranks(1, {}, [&](comm::Communicator& comm) {
    auto c = make_compressor(o, {flat_layout(n)});
    auto pushes = make_compressor(o, {flat_layout(n)});  // to a parameter server
    torch::Tensor came_in = torch::zeros({n}), reduced = torch::zeros({n}),
                  pushed = torch::zeros({n});
    for (std::int64_t step = 1; step <= steps + n / 5; ++step) {
      const auto g = step <= steps ? seeded_randn(n, 100 + step) : torch::zeros({n});
      came_in += g;
      reduced += c->reduce(g, 0, step, comm).sent;
      pushed += pushes->pack(g, 0, step, 0).sent;
    }
    const double scale = came_in.abs().max().item<double>();
    EXPECT_LE((reduced - came_in).abs().max().item<double>(), 1e-5 * scale);
    EXPECT_LE((pushed - came_in).abs().max().item<double>(), 1e-5 * scale);
  });
}

// Round to nearest: relative error at most the unit roundoff, 2^-11 (fp16) and 2^-8 (bf16),
// for values in the normal range of both (here 1e-3 to 10).
TEST(Compress, HalfPrecisionRoundTripsWithinItsEpsilon) {
  for (auto [name, u] : {std::pair{"fp16", std::ldexp(1.0, -11)}, {"bf16", std::ldexp(1.0, -8)}}) {
    const auto g = seeded_randn(1000, 6).clamp(-10, 10);
    const auto safe = torch::where(g.abs() < 1e-3, torch::full_like(g, 1e-3), g);
    const auto r = reduce_on(1, options(name), flat_layout(1000), [&](int) { return safe; })[0];
    EXPECT_LE(((r.average - safe).abs() / safe.abs()).max().item<double>(), u) << name;
    // fp16 agrees on its scale first: one f32 more.
    EXPECT_EQ(r.bytes_sent, std::string(name) == "fp16" ? 2004u : 2000u) << name;
  }
}

// The average of N ranks' gradients through fp16 or bf16, against their mean in float64, with
// gradients beyond fp16's range (1e5 and 3e4 on every rank: their sum is above 65504) and down
// to 1e-6. Bound per element, with u the unit roundoff (2^-11, 2^-8): each rank's value is
// rounded once (u of it), then any all-reduce forms the sum by N - 1 additions, each rounded
// to u of a partial sum (at most the sum of magnitudes), and divides by N (u of the result),
// so the error is at most (N + 1) u of the mean magnitude, plus second-order terms (the
// factor 1 + 2^-7). fp16's scale is a power of two that brings N times the largest magnitude
// to at most 2^15, so below fp16's normal range (2^-14) each of those N + 1 roundings is off
// by at most 2^-25 / scale absolutely, with scale >= 2^14 / (N max).
TEST(Compress, HalfPrecisionAveragesWithinItsRoundingAtEveryWorldSize) {
  const std::int64_t n = 500;
  for (auto [name, u] : {std::pair{"fp16", std::ldexp(1.0, -11)}, {"bf16", std::ldexp(1.0, -8)}})
    for (int world = 1; world <= 4; ++world) {
      auto grad_of = [&](int rank) {
        auto g = seeded_randn(n, 60 + rank) * torch::pow(10.0, torch::arange(n) % 7 - 6.0);
        g[0] = 1e5;
        g[1] = 3e4 * (rank + 1);
        return g;
      };
      const auto results = reduce_on(world, options(name), flat_layout(n), grad_of);
      auto mean = torch::zeros({n}, torch::kFloat64), magnitude = torch::zeros_like(mean);
      double largest = 0;
      for (int r = 0; r < world; ++r) {
        const auto g = grad_of(r).to(torch::kFloat64);
        mean += g / world;
        magnitude += g.abs() / world;
        largest = std::max(largest, g.abs().max().item<double>());
      }
      const double subnormal =
          std::string(name) == "fp16" ? (world + 1) * 0x1p-25 * world * largest / 0x1p14 : 0.0;
      const auto bound = (world + 1) * u * (1 + 0x1p-7) * magnitude + subnormal;
      for (int r = 0; r < world; ++r) {
        const auto got = results[r].average.to(torch::kFloat64);
        EXPECT_TRUE(torch::isfinite(got).all().item<bool>()) << name << " world " << world;
        EXPECT_TRUE(((got - mean).abs() <= bound).all().item<bool>())
            << name << " world " << world << " rank " << r << ": worst excess "
            << ((got - mean).abs() - bound).max().item<double>();
      }
    }
}

// Error feedback over fp16 with a gradient beyond its range: the residual stays finite, and
// what was sent adds up to what came in (within fp16's rounding of the last step).
TEST(Compress, HalfPrecisionErrorFeedbackSurvivesLargeGradients) {
  const std::int64_t n = 50;
  comm::local::run_ranks(2, {}, [&](comm::Communicator& comm) {
    auto c = make_compressor(options("fp16", /*error_feedback=*/true), {flat_layout(n)});
    torch::Tensor came_in = torch::zeros({n}), sent = torch::zeros({n});
    for (std::int64_t step = 1; step <= 5; ++step) {
      auto g = seeded_randn(n, 200 + step + comm.rank());
      g[3] = 1e5;
      came_in += g;
      const auto r = c->reduce(g, 0, step, comm);
      ASSERT_TRUE(torch::isfinite(r.average).all().item<bool>()) << "step " << step;
      sent += r.sent;
    }
    // The residual is the last step's rounding: at most u = 2^-11 of its input, which is at
    // most 1e5 plus the earlier residuals.
    EXPECT_LE((came_in - sent).abs().max().item<double>(), 0x1p-11 * 1.01e5);
  });
}

TEST(Compress, SignSendsScaledSignsOrTheMajorityVote) {
  const std::int64_t n = 64;
  auto grad_of = [&](int rank) { return seeded_randn(n, 30 + rank); };
  const auto scaled = reduce_on(1, options("sign", true), flat_layout(n), grad_of)[0];
  const auto g = grad_of(0);
  EXPECT_TRUE(torch::allclose(scaled.sent, g.abs().mean() * torch::where(g < 0, -1.0, 1.0)));
  EXPECT_EQ(scaled.bytes_sent, n / 8 + 4u);
  const auto voted = reduce_on(3, options("sign"), flat_layout(n), grad_of)[0];
  torch::Tensor tally = torch::zeros({n});
  for (int rank = 0; rank < 3; ++rank) tally += torch::where(grad_of(rank) < 0, -1.0, 1.0);
  EXPECT_TRUE(torch::equal(voted.average, tally.sign()));
}

// M_r = A_r B^T on every rank: their mean has rank 3, which PowerSGD at rank 3 recovers from one
// power iteration. Float32 products over at most 40 terms (40 u = 2.4e-6 each, a few chained)
// and Gram-Schmidt of 3 well-separated columns stay well under 1e-4 of ||M||; at rank 2 the
// error is the smallest singular value of the mean, about a quarter of ||M|| by construction.
TEST(Compress, PowerSgdIsExactOnMatricesOfItsRank) {
  const std::int64_t rows = 40, cols = 30;
  // A 40 x 30 weight, then a bias of 30 that is sent as it is.
  const BucketLayout layout{{0, rows * cols}, {{rows, cols}, {cols}}, rows * cols + cols};
  const auto b = std::get<0>(torch::linalg_qr(seeded_randn(cols * 3, 50).view({cols, 3}))) *
                 torch::tensor({4.0f, 2.0f, 1.0f});
  auto grad_of = [&](int rank) -> torch::Tensor {
    const auto a = std::get<0>(torch::linalg_qr(seeded_randn(rows * 3, 60 + rank).view({rows, 3})));
    return torch::cat({a.matmul(b.t()).flatten(), seeded_randn(cols, 70 + rank)});
  };
  for (std::int64_t rank : {3, 2}) {
    auto o = options("powersgd");
    o.rank = rank;
    const auto results = reduce_on(3, o, layout, grad_of);
    const auto want = (grad_of(0) + grad_of(1) + grad_of(2)) / 3;
    const auto matrix = [&](const torch::Tensor& t) { return t.narrow(0, 0, rows * cols); };
    const double error = (matrix(results[0].average) - matrix(want)).norm().item<double>() /
                         matrix(want).norm().item<double>();
    if (rank == 3) {
      EXPECT_LE(error, 1e-4);
    } else {
      EXPECT_GE(error, 0.1) << "rank 2 cannot hold a rank-3 matrix";
    }
    EXPECT_TRUE(torch::allclose(results[0].average.narrow(0, rows * cols, cols),
                                want.narrow(0, rows * cols, cols), 1e-6, 1e-6));
    // P (40 x r), Q (30 x r) and the bias, in f32.
    EXPECT_EQ(results[0].bytes_sent, (rows * rank + cols * rank + cols) * 4u);
  }
}

// A parameter server decodes each worker's push alone: unpack() of pack()'s bytes is what the
// worker counted as sent, bit for bit, in packed_bytes() bytes; error feedback keeps the rest.
// Every compressor, with and without error feedback, on a 24 x 10 matrix and its 10 biases
// (top-k and random-k keep 10%, PowerSGD has rank 2).
void for_each_compressor(
    const std::function<void(const CompressOptions&, const BucketLayout&)>& check) {
  const std::int64_t rows = 24, cols = 10;
  const BucketLayout layout{{0, rows * cols}, {{rows, cols}, {cols}}, rows * cols + cols};
  for (const char* name :
       {"fp16", "bf16", "topk", "randomk", "qsgd", "natural", "sign", "powersgd"})
    for (bool error_feedback : {false, true}) {
      auto o = options(name, error_feedback);
      o.ratio = 0.1;
      o.rank = 2;
      SCOPED_TRACE(cat(name, error_feedback ? " with error feedback" : ""));
      check(o, layout);
    }
}

TEST(Compress, APackedPushUnpacksToWhatTheWorkerSent) {
  for_each_compressor([](const CompressOptions& o, const BucketLayout& layout) {
    auto worker = make_compressor(o, {layout}), server = make_compressor(o, {layout});
    for (std::int64_t step = 1; step <= 3; ++step) {
      const auto g = seeded_randn(layout.elements, 10 + step);
      const auto packed = worker->pack(g, 0, step, 1);
      ASSERT_EQ(packed.bytes.numel(),
                static_cast<std::int64_t>(server->packed_bytes(0, layout.elements)));
      EXPECT_TRUE(torch::equal(server->unpack(packed.bytes, 0, layout.elements), packed.sent))
          << "step " << step;
    }
  });
}

// What the simulator replays (wire()) is what reduce() sends: the same bytes, each compressor,
// with and without error feedback, on 3 ranks.
TEST(Compress, WireNamesTheBytesReduceSends) {
  for_each_compressor([](const CompressOptions& o, const BucketLayout& layout) {
    const auto reduced = reduce_on(3, o, layout, [&](int rank) {
      return seeded_randn(layout.elements, 20 + static_cast<std::uint64_t>(rank));
    });
    std::size_t wire_bytes = 0;
    for (const auto& w : make_compressor(o, {layout})->wire(0, layout.elements))
      wire_bytes += w.bytes;
    EXPECT_EQ(reduced[0].bytes_sent, wire_bytes);
  });
}

TEST(Compress, PowerSgdPushIsExactOnMatricesOfItsRank) {
  const std::int64_t rows = 30, cols = 20, rank = 3;
  const BucketLayout layout{{0}, {{rows, cols}}, rows * cols};
  auto o = options("powersgd");
  o.rank = rank;
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(7);
  const auto m = torch::randn({rows, rank}, gen).matmul(torch::randn({rank, cols}, gen)).flatten();
  auto worker = make_compressor(o, {layout});
  const auto packed = worker->pack(m, 0, 1, 0);
  EXPECT_EQ(packed.bytes.numel(), (rows + cols) * rank * 4);
  // One power iteration from a random start spans a rank-r matrix's column space exactly; the
  // error is float rounding of two products of length <= 30, relative to the largest entry.
  EXPECT_LE((packed.sent - m).abs().max().item<double>(), 1e-4 * m.abs().max().item<double>());
}

TEST(Compress, StrategiesWithoutCompressionRefuseIt) {
  TrainConfig config;
  config.strategy.name = "zero";
  config.compress.name = "fp16";
  comm::local::run_ranks(1, {}, [&](comm::Communicator& comm) {
    try {
      make_strategy(config, comm);
      ADD_FAILURE() << "zero took compress.name = fp16";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(
                    "needs strategy.name = allreduce, local_sgd, post_local_sgd or ps"),
                std::string::npos)
          << e.what();
    }
  });
}

// A server decodes each push alone, so it cannot take a majority vote, and it posts receives of
// the compressed size, so the pushes cannot start uncompressed.
TEST(Compress, ParameterServersRefuseWhatTheyCannotDecode) {
  comm::local::run_ranks(2, {}, [&](comm::Communicator& comm) {
    TrainConfig config;
    config.strategy.name = "ps";
    config.compress.name = "sign";
    config.compress.error_feedback = false;
    EXPECT_THROW(make_strategy(config, comm), ConfigError);
    config.compress.name = "topk";
    config.compress.error_feedback = true;
    config.compress.warmup_steps = 5;
    EXPECT_THROW(make_strategy(config, comm), ConfigError);
  });
}

TEST(Compress, OutOfRangeSettingsAreConfigErrors) {
  auto o = options("qsgd");
  o.levels = 200;
  EXPECT_THROW(make_compressor(o, {flat_layout(8)}), ConfigError);
  o = options("zip");
  EXPECT_THROW(make_compressor(o, {flat_layout(8)}), ConfigError);
  EXPECT_EQ(make_compressor(options("none"), {flat_layout(8)}), nullptr);
}

// Every compressor through the all-reduce strategy, local SGD (every other step), post-local
// SGD (2 synchronous steps, then local) and a parameter server (2 workers and 1 server): lenet5
// trains to its last step with finite, changed parameters that agree on both trainers, and
// under all-reduce each step sends what the payload table of docs/training.md says for each
// bucket (plus the missing-gradient flags, one float per bucket). (Their values are checked
// against single-process references in compressor unit tests above and, for fp16, top-k and
// PowerSGD under every strategy, in the conformance matrix.)
struct TrainingCase {
  std::string strategy, compressor;
};

// Bytes of one bucket of n elements: the docs' payload table, with lenet5's buckets' matrices
// for PowerSGD (rank 4, sent whole where the factors would not halve them).
std::size_t payload_bytes(const std::string& compressor, const std::vector<torch::Tensor>& params,
                          double ratio) {
  std::int64_t n = 0;
  for (const auto& p : params) n += p.numel();
  const auto k = static_cast<std::size_t>(std::ceil(ratio * static_cast<double>(n)));
  if (compressor == "fp16") return 2 * n + 4;  // and the common scale, one f32
  if (compressor == "bf16") return 2 * n;
  if (compressor == "topk") return k * (n <= 65536 ? 2 + 4 : 4 + 4);
  if (compressor == "randomk") return 4 * k;
  if (compressor == "qsgd") return n + 4 * ((n + 511) / 512);  // a code each, a norm a block
  if (compressor == "natural") return n + 4;                   // and the largest exponent
  if (compressor == "sign") return (n + 7) / 8 + 4;
  std::size_t floats = 0;  // powersgd: P with the plain elements, then Q
  for (const auto& p : params) {
    const std::int64_t rows = p.dim() >= 2 ? p.size(0) : 1, cols = p.numel() / rows;
    const std::int64_t r = std::min<std::int64_t>({4, rows, cols});
    floats += p.dim() >= 2 && 2 * (rows + cols) * r <= rows * cols ? (rows + cols) * r : p.numel();
  }
  return 4 * floats;
}

class CompressedTraining : public ::testing::TestWithParam<TrainingCase> {};

TEST_P(CompressedTraining, Lenet5TrainsOnTwoRanks) {
  torch::set_num_threads(1);
  auto data = testing::synthetic_images(64);
  auto config = testing::config_for("lenet5", "sgd", 8, 4);
  config.train.dtype = "float32";
  config.strategy.name = GetParam().strategy;
  config.strategy.period = 2;
  config.strategy.warmup_steps = 2;
  config.compress.name = GetParam().compressor;
  config.compress.ratio = 0.05;
  const int world = config.strategy.name == "ps" ? 3 : 2;
  const auto out = testing::on_ranks(
      world, [&](comm::Communicator& comm) { return testing::train_once(config, comm, data); });
  EXPECT_EQ(out[0].result.steps, 4);
  // The model moved (a sparsifier may leave a small tensor as it was), stayed finite, and the
  // replicas agree.
  bool moved = false;
  for (std::size_t i = 0; i < out[0].params.size(); ++i) {
    EXPECT_TRUE(torch::isfinite(out[0].params[i]).all().item<bool>()) << "parameter " << i;
    moved = moved || !torch::equal(out[0].params[i], out[0].initial[i]);
    EXPECT_TRUE(torch::equal(out[0].params[i], out[1].params[i])) << "parameter " << i;
  }
  EXPECT_TRUE(moved);
  if (config.strategy.name != "allreduce") return;
  // The buckets as the strategy plans them: last parameter first, capped in bytes.
  std::vector<std::size_t> bytes;
  for (const auto& p : out[0].params) bytes.push_back(p.numel() * p.element_size());
  const auto plan = plan_buckets(bytes, config.strategy.first_bucket_mb * (1 << 20),
                                 config.strategy.bucket_mb * (1 << 20));
  std::size_t per_step = 0;
  for (const auto& bucket : plan.buckets) {
    std::vector<torch::Tensor> params;
    for (std::size_t p : bucket) params.push_back(out[0].params[p]);
    per_step += payload_bytes(config.compress.name, params, config.compress.ratio) + 4;
  }
  EXPECT_EQ(out[0].result.bytes_sent, 4 * per_step) << plan.buckets.size() << " buckets";
}

std::vector<TrainingCase> training_cases() {
  std::vector<TrainingCase> cases;
  for (const char* strategy : {"allreduce", "local_sgd", "post_local_sgd", "ps"})
    for (const char* c : {"fp16", "bf16", "topk", "randomk", "qsgd", "natural", "sign", "powersgd"})
      cases.push_back({strategy, c});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Compressors, CompressedTraining, ::testing::ValuesIn(training_cases()),
                         [](const auto& info) {
                           return info.param.strategy + "_" + info.param.compressor;
                         });

// Error feedback's residuals and PowerSGD's warm start are in the checkpoint: k steps, a
// restart, k more equal 2k straight, bit for bit, under every strategy that compresses.
TEST(Compress, ACompressedRunResumesExactly) {
  torch::set_num_threads(1);
  const int k = 3;
  auto data = testing::synthetic_images(96);
  for (auto [strategy, name] : {std::pair{"allreduce", "powersgd"},
                                {"allreduce", "topk"},
                                {"local_sgd", "topk"},
                                {"post_local_sgd", "powersgd"},
                                {"ps", "topk"},
                                {"ps", "powersgd"}}) {
    data::testing::TempDir dir;
    auto config = testing::config_for("lenet5", "sgd", 8, 2 * k);
    config.train.dtype = "float32";
    config.strategy.name = strategy;
    // The checkpoint at step k falls on an average, so that there is nothing to reconcile:
    // local SGD averages every k steps; post-local SGD runs step 1 synchronously, then
    // averages every 2 local steps (steps 3 and 5), so it compresses in both phases.
    config.strategy.period = k;
    if (config.strategy.name == "post_local_sgd") {
      config.strategy.warmup_steps = 1;
      config.strategy.period = 2;
    }
    // Each replica's momentum is its own; averaged with the parameters, the one checkpointed
    // is every rank's.
    config.strategy.average_optimizer_state = true;
    config.compress.name = name;
    auto straight = testing::on_ranks(
        2, [&](comm::Communicator& comm) { return testing::train_once(config, comm, data); });
    auto first = config;
    first.train.max_steps = k;
    first.train.checkpoint_dir = dir.file("ckpt");
    testing::on_ranks(
        2, [&](comm::Communicator& comm) { return testing::train_once(first, comm, data); });
    auto resumed = testing::on_ranks(2, [&](comm::Communicator& comm) {
      return testing::train_once(config, comm, data, dir.file("ckpt"));
    });
    for (std::size_t i = 0; i < straight[0].params.size(); ++i)
      EXPECT_TRUE(torch::equal(resumed[0].params[i], straight[0].params[i]))
          << strategy << " " << name << " parameter " << i;
  }
}

// Under pipedream every micro-batch is an update of its own, so the all-reduce strategy of a
// stage's replicas sees micro_batches updates per step. A resume must continue its count where
// the checkpoint left it (random-k draws by update) and compress.warmup_steps counts steps, as
// everywhere else. 2 stages x 2 replicas, 2 micro-batches.
TrainConfig pipedream_compressed(int steps) {
  auto config = testing::config_for("lenet5", "sgd", 8, steps);
  config.train.dtype = "float32";
  config.parallel.pipeline_stages = 2;
  config.parallel.schedule = "pipedream";
  config.parallel.micro_batches = 2;
  config.compress.name = "randomk";
  config.compress.ratio = 0.1;
  return config;
}

TEST(Compress, APipedreamRunResumesExactly) {
  torch::set_num_threads(1);
  const int k = 3;
  auto data = testing::synthetic_images(96);
  data::testing::TempDir dir;
  auto config = pipedream_compressed(2 * k);
  auto straight = testing::on_ranks(
      4, [&](comm::Communicator& comm) { return testing::train_once(config, comm, data); });
  auto first = config;
  first.train.max_steps = k;
  first.train.checkpoint_dir = dir.file("ckpt");
  testing::on_ranks(
      4, [&](comm::Communicator& comm) { return testing::train_once(first, comm, data); });
  auto resumed = testing::on_ranks(4, [&](comm::Communicator& comm) {
    return testing::train_once(config, comm, data, dir.file("ckpt"));
  });
  for (std::size_t i = 0; i < straight[0].params.size(); ++i)
    EXPECT_TRUE(torch::equal(resumed[0].params[i], straight[0].params[i])) << "parameter " << i;
}

TEST(Compress, PipedreamWarmupCountsSteps) {
  torch::set_num_threads(1);
  auto data = testing::synthetic_images(96);
  auto plain = pipedream_compressed(2);
  plain.compress.name = "none";
  auto warming = pipedream_compressed(2);
  warming.compress.warmup_steps = 2;  // both steps uncompressed
  const auto want = testing::on_ranks(
      4, [&](comm::Communicator& comm) { return testing::train_once(plain, comm, data); });
  const auto got = testing::on_ranks(
      4, [&](comm::Communicator& comm) { return testing::train_once(warming, comm, data); });
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(got[r].result.bytes_sent, want[r].result.bytes_sent) << "rank " << r;
}

}  // namespace
}  // namespace distml::train
