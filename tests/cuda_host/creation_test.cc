// core/kernels/cuda/kernels/creation.cuh on the host stand-in: arange (integer dtypes truncate
// start + i * step computed without fma contraction, as the CPU does) and eye's diagonal.
#include "core/kernels/cuda/kernels/creation.cuh"

#include <cstdint>
#include <string>
#include <vector>

#include "tests/cuda_host/standin_test_util.h"

namespace oneflow {
namespace cuda {
namespace {

template <typename T>
void CheckArange(int64_t n, double start, double step) {
  std::vector<T> p(n);
  LaunchArange(n, p.data(), start, step, nullptr);
  for (int64_t i = 0; i < n; ++i) {
    volatile double prod = static_cast<double>(i) * step;  // rounded before the add
    const T want = static_cast<T>(start + prod);
    INFO("arange n " << n << " start " << start << " step " << step << " at " << i);
    REQUIRE(p[i] == want);
  }
}

TEST_CASE("arange matches the CPU's rounding and truncation", "[creation]") {
  for (int64_t n : cuda_host::kRowLengths) {
    CheckArange<float>(n, -1.5, 0.1);
    CheckArange<double>(n, 0.0, 1.0 / 3.0);
    CheckArange<int64_t>(n, -3.0, 0.7);
    CheckArange<int32_t>(n, 5.0, -0.3);
  }
  CheckArange<int64_t>(70000, 0.0, 1.0);  // more elements than threads of the grid's blocks
}

TEST_CASE("eye's diagonal", "[creation]") {
  for (auto [n, m] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {3, 5}, {5, 3}, {33, 33}, {1025, 2}, {2, 1025}}) {
    std::vector<float> p(n * m, 0.f);
    const int64_t k = std::min(n, m);
    LaunchEyeDiagonal(k, p.data(), m, nullptr);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) REQUIRE(p[i * m + j] == (i == j ? 1.f : 0.f));
  }
}

}  // namespace
}  // namespace cuda
}  // namespace oneflow
