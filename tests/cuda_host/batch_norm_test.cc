// The per-channel kernels around cuDNN's batch normalization
// (core/kernels/cuda/kernels/batch_norm.cuh) on the host stand-in against naive references:
// channel counts 1, 3, 4, 31, 32, 33, 127, 768, 1025 (several grid-stride rounds with few
// blocks), NaN and zero-variance channels, float32, float64, float16 and bfloat16.
#include "core/kernels/cuda/kernels/batch_norm.cuh"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "tests/cuda_host/standin_test_util.h"

namespace oneflow {
namespace cuda {
namespace {

using cuda_host::FromDouble;
using cuda_host::ToDouble;

template <typename T>
double Tol() {
  if constexpr (std::is_same_v<T, double>) return 1e-12;
  if constexpr (std::is_same_v<T, float>) return 1e-5;
  return 1e-2;
}

bool Close(double got, double want, double tol) {
  if (std::isnan(want)) return std::isnan(got);
  return std::abs(got - want) <= tol * std::max(1.0, std::abs(want));
}

const std::vector<int64_t> kChannels = {1, 3, 4, 31, 32, 33, 127, 768, 1025};

template <typename T, typename P>
void CheckStats(int64_t c) {
  const double eps = 1e-5;
  std::mt19937 gen(static_cast<uint32_t>(c));
  std::uniform_real_distribution<double> var(0, 3), u(-2, 2);
  std::vector<P> mean(c), invstd(c);
  for (int64_t i = 0; i < c; ++i) {
    mean[i] = static_cast<P>(u(gen));
    invstd[i] = static_cast<P>(1 / std::sqrt(var(gen) + eps));
  }
  if (c > 3) {
    invstd[1] = static_cast<P>(1 / std::sqrt(eps));  // zero variance: rounding may go below 0
    invstd[2] = std::numeric_limits<P>::quiet_NaN();
  }
  std::vector<T> mean_out(c), var_out(c), mean_back(c);
  std::vector<P> invstd_back(c), mean_p(c);
  // Few blocks: the grid-stride loop goes round several times.
  auto* stats = BatchNormStatsKernel<T, P>;
  OF_CUDA_LAUNCH(stats, 2, 128, 0, nullptr, c, mean.data(), invstd.data(), eps, mean_out.data(),
                 var_out.data());
  for (int64_t i = 0; i < c; ++i) {
    const double s = ToDouble(invstd[i]);
    const double want = std::max(0.0, 1 / (s * s) - eps);
    INFO("channel " << i << " of " << c);
    CHECK(Close(ToDouble(var_out[i]), std::isnan(s) ? s : want,
                Tol<T>() + (sizeof(P) == 4 ? 1e-6 : 0)));
    CHECK(Close(ToDouble(mean_out[i]), ToDouble(mean[i]), Tol<T>()));
    CHECK((ToDouble(var_out[i]) >= 0.0 || std::isnan(ToDouble(var_out[i]))));
  }
  // Back: the inverse standard deviation cuDNN's backward takes.
  auto* inv = BatchNormInvStdKernel<T, P>;
  OF_CUDA_LAUNCH(inv, 3, 64, 0, nullptr, c, mean_out.data(), var_out.data(), eps, mean_p.data(),
                 invstd_back.data());
  for (int64_t i = 0; i < c; ++i) {
    INFO("channel " << i << " of " << c);
    const double want = 1 / std::sqrt(ToDouble(var_out[i]) + eps);
    CHECK(Close(ToDouble(invstd_back[i]), want, sizeof(P) == 4 ? 1e-6 : 1e-12));
    CHECK(Close(ToDouble(mean_p[i]), ToDouble(mean_out[i]), 0));
  }
  // Null mean outputs are skipped.
  auto* stats_only = BatchNormStatsKernel<T, P>;
  OF_CUDA_LAUNCH(stats_only, 1, 32, 0, nullptr, c, mean.data(), invstd.data(), eps,
                 static_cast<T*>(nullptr), var_out.data());
}

TEST_CASE("BatchNormStatsKernel and BatchNormInvStdKernel match the reference", "[batch_norm]") {
  for (int64_t c : kChannels) {
    CheckStats<float, float>(c);
    CheckStats<double, double>(c);
    CheckStats<__half, float>(c);
    CheckStats<__nv_bfloat16, float>(c);
  }
}

template <typename T, typename P>
void CheckStatsGrad(int64_t n, int64_t c, int64_t s, int64_t chunks, bool zero_grads) {
  std::mt19937 gen(static_cast<uint32_t>(n * 1000 + c * 10 + s));
  std::uniform_real_distribution<double> u(-1, 1);
  const int64_t total = n * c * s;
  std::vector<T> x(total), dx(total), dmean(c), dvar(c);
  std::vector<P> mean(c);
  for (auto& v : x) v = FromDouble<T>(u(gen));
  for (auto& v : dx) v = FromDouble<T>(u(gen));
  for (int64_t i = 0; i < c; ++i) {
    mean[i] = static_cast<P>(u(gen));
    // Some channels without a gradient through the statistics (their blocks return at once).
    const bool zero = zero_grads || i % 3 == 1;
    dmean[i] = FromDouble<T>(zero ? 0.0 : u(gen));
    dvar[i] = FromDouble<T>(zero ? 0.0 : u(gen));
  }
  std::vector<T> want = dx;
  const double count = static_cast<double>(n * s);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t k = 0; k < s; ++k) {
        const int64_t off = (b * c + ch) * s + k;
        const double add = ToDouble(dmean[ch]) / count +
                           2 * ToDouble(dvar[ch]) * (ToDouble(x[off]) - mean[ch]) / count;
        want[off] = FromDouble<T>(ToDouble(dx[off]) + add);
      }
    }
  }
  auto* kernel = BatchNormStatsGradKernel<T, P>;
  OF_CUDA_LAUNCH(kernel, static_cast<unsigned>(c * chunks), 128, 0, nullptr, n, c, s, chunks,
                 dmean.data(), dvar.data(), x.data(), mean.data(), dx.data());
  int64_t bad = -1;
  for (int64_t i = 0; i < total && bad < 0; ++i) {
    if (!Close(ToDouble(dx[i]), ToDouble(want[i]), Tol<T>())) bad = i;
  }
  INFO("(" << n << ", " << c << ", " << s << ") chunks " << chunks << ": first differs at " << bad);
  CHECK(bad < 0);
}

TEST_CASE("BatchNormStatsGradKernel matches the reference", "[batch_norm]") {
  for (auto [n, c, s, chunks] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{2, 3, 1, 1},
                                 {5, 4, 33, 3},
                                 {3, 31, 127, 2},
                                 {1, 1, 4097, 5},
                                 {7, 33, 1, 4},
                                 {2, 2, 1025, 9}}) {
    for (bool zero : {false, true}) {
      CheckStatsGrad<float, float>(n, c, s, chunks, zero);
      CheckStatsGrad<double, double>(n, c, s, chunks, zero);
      CheckStatsGrad<__half, float>(n, c, s, chunks, zero);
      CheckStatsGrad<__nv_bfloat16, float>(n, c, s, chunks, zero);
    }
  }
}

}  // namespace
}  // namespace cuda
}  // namespace oneflow
