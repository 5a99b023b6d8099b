// Helpers for the stand-in's kernel tests (tests/cuda_host/*_test.cc): the row lengths that reach
// every branch, element types as float, inputs with -inf/NaN, and closeness per element type.
//
//   for (int64_t cols : kRowLengths) {
//     std::vector<__half> x = RandomVector<__half>(rows * cols, /*seed=*/cols);
//     ... OF_CUDA_LAUNCH(...) ...
//     RequireClose(got, want, "softmax rows=3 cols=" + std::to_string(cols));
//   }
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/kernels/cuda/launch.cuh"

namespace oneflow {
namespace cuda_host {

// Row lengths around the warp (32), vector widths (4, 8), block sizes (1024) and their tails.
inline const std::vector<int64_t> kRowLengths = {1, 3, 4, 31, 32, 33, 127, 768, 1024, 1025, 4097};

template <typename T>
float ToFloat(T v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else {
    return static_cast<float>(v);
  }
}
template <typename T>
T FromDouble(double v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}
// Exact for every type but the half types, which go through float.
template <typename T>
double ToDouble(T v) {
  if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
    return ToFloat(v);
  } else {
    return static_cast<double>(v);
  }
}

// Uniform values in [lo, hi), rounded to T, reproducible by seed.
template <typename T>
std::vector<T> RandomVector(size_t n, uint64_t seed, double lo = -2.0, double hi = 2.0) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<T> v(n);
  for (auto& e : v) e = FromDouble<T>(d(gen));
  return v;
}

// Relative and absolute tolerance of a kernel computing in float (double for double) against a
// double reference: the storage type's rounding dominates.
template <typename T>
constexpr double kRtol = std::is_same_v<T, double>          ? 1e-12
                         : std::is_same_v<T, float>         ? 1e-5
                         : std::is_same_v<T, __half>        ? 2e-3
                         : std::is_same_v<T, __nv_bfloat16> ? 1.6e-2
                                                            : 0.0;

// Every element of got within rtol (and atol) of want; NaN matches NaN, inf matches the same inf.
// Reports the first mismatch with its index and `what`.
template <typename T>
void RequireClose(const std::vector<T>& got, const std::vector<double>& want,
                  const std::string& what, double rtol = kRtol<T>, double atol = kRtol<T>) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = ToDouble(got[i]), w = want[i];
    const bool ok = std::isnan(w)   ? std::isnan(g)
                    : std::isinf(w) ? g == w
                                    : std::abs(g - w) <= atol + rtol * std::abs(w);
    if (!ok) {
      INFO(what << ": element " << i << " is " << g << ", want " << w << " (rtol " << rtol
                << ", atol " << atol << ")");
      REQUIRE(ok);
    }
  }
}

}  // namespace cuda_host
}  // namespace oneflow
