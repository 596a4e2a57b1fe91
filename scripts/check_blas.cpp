// Checks that LibTorch's matrix multiply is correct and runs at BLAS speed, not at the
// reference BLAS's ~8 GFLOP/s. Exits 1 with a message naming the fix when it does not.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <thread>

int main() {
  constexpr double kMinGflops = 20.0;  // OpenBLAS gives 50+ on one core here; reference ~8
  at::set_num_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  at::manual_seed(0);

  // Correctness first: a small product against a plain triple loop.
  auto a = at::randn({33, 17}, at::kDouble), b = at::randn({17, 29}, at::kDouble);
  auto c = at::mm(a, b);
  auto pa = a.accessor<double, 2>(), pb = b.accessor<double, 2>(), pc = c.accessor<double, 2>();
  for (int i = 0; i < 33; ++i)
    for (int j = 0; j < 29; ++j) {
      double s = 0;
      for (int k = 0; k < 17; ++k) s += pa[i][k] * pb[k][j];
      if (std::abs(s - pc[i][j]) > 1e-9) {
        std::fprintf(stderr, "setup: LibTorch matrix multiply is wrong at (%d,%d)\n", i, j);
        return 1;
      }
    }

  constexpr int64_t n = 1024;
  auto x = at::randn({n, n}), y = at::randn({n, n});
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    auto z = at::mm(x, y);
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  double gflops = 2.0 * n * n * n / best / 1e9;
  if (gflops < kMinGflops) {
    std::fprintf(stderr,
                 "setup: LibTorch GEMM runs at %.1f GFLOP/s (expected >= %.0f): it is using the "
                 "reference BLAS. Install libopenblas0-openmp (apt-get install "
                 "libopenblas0-openmp) and check `update-alternatives --display "
                 "libblas.so.3-x86_64-linux-gnu` points at openblas.\n",
                 gflops, kMinGflops);
    return 1;
  }
  std::printf("setup: LibTorch GEMM %.0f GFLOP/s (OpenBLAS) - ok\n", gflops);
  return 0;
}
