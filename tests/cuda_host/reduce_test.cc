// core/kernels/cuda/kernels/reduce.cuh on the host stand-in: sum/prod (rows and columns kernels,
// one pass and chunked partial passes) and max/min with their first index (NaN first, ties to the
// lower index) against plain host loops.
#include "core/kernels/cuda/kernels/reduce.cuh"

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/ops/reduce_functors.h"
#include "tests/cuda_host/standin_test_util.h"

namespace oneflow {
namespace cuda {
namespace {

using cuda_host::kRowLengths;
using cuda_host::RandomVector;
using cuda_host::RequireClose;

// Exactly sized host scratch (AddressSanitizer sees any overrun of a partial buffer).
struct HostScratch {
  std::vector<std::unique_ptr<unsigned char[]>> keep;
  int calls = 0;
  void* operator()(size_t bytes) {
    ++calls;
    keep.emplace_back(new unsigned char[bytes]);
    return keep.back().get();
  }
};

std::string Name(const ReduceLayout& l) {
  return "outer " + std::to_string(l.outer) + " r " + std::to_string(l.r) + " inner " +
         std::to_string(l.inner);
}

// The layouts: rows (inner 1) over every row length, columns with tails of the 32-column tile,
// and both with r long enough to be cut into chunks (two passes).
std::vector<ReduceLayout> Layouts() {
  std::vector<ReduceLayout> out;
  for (int64_t r : kRowLengths) out.push_back({3, r, 1});
  for (int64_t r : {int64_t(1), int64_t(5), int64_t(300)})
    for (int64_t inner : {2, 33, 70}) out.push_back({2, r, inner});
  out.push_back({1, 40000, 1});  // rows, chunked
  out.push_back({1, 4097, 3});   // columns, chunked
  return out;
}

template <typename T, typename A, typename R>
void CheckSum(const ReduceLayout& l, uint64_t seed) {
  const int64_t n = l.outer * l.r * l.inner;
  std::vector<T> x = RandomVector<T>(n, seed, R::template Identity<double>() == 1 ? 0.9 : -2.0,
                                     R::template Identity<double>() == 1 ? 1.1 : 2.0);
  std::vector<T> y(l.outer * l.inner);
  HostScratch scratch;
  ReduceSum<R, T, A, T>(x.data(), y.data(), l, nullptr, scratch);
  CHECK(scratch.calls == (ReduceChunkingFor(l).chunks > 1 ? 1 : 0));
  std::vector<double> want(y.size());
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t i = 0; i < l.inner; ++i) {
      double acc = R::template Identity<double>();
      for (int64_t k = 0; k < l.r; ++k) acc = R()(acc, double(x[(o * l.r + k) * l.inner + i]));
      want[o * l.inner + i] = acc;
    }
  RequireClose(y, want, Name(l), std::is_same_v<T, double> ? 1e-12 : 1e-5);
}

TEST_CASE("sum and prod match the host over rows, columns and chunked passes", "[reduce]") {
  int chunked = 0;
  for (const ReduceLayout& l : Layouts()) {
    chunked += ReduceChunkingFor(l).chunks > 1;
    CheckSum<float, double, functors::SumR>(l, l.r + l.inner);
    CheckSum<double, double, functors::SumR>(l, l.r * 7 + l.inner);
    if (l.outer * l.r * l.inner < 5000) CheckSum<double, double, functors::ProdR>(l, l.r);
  }
  REQUIRE(chunked >= 2);  // both kernels' partial passes ran
}

TEST_CASE("integer sums accumulate in int64", "[reduce]") {
  const ReduceLayout l{2, 4097, 1};
  std::vector<int32_t> x(l.outer * l.r);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 2 ? 1 : -1) * int32_t(1 << 30) + int32_t(i);
  std::vector<int64_t> y(2);
  HostScratch scratch;
  ReduceSum<functors::SumR, int32_t, int64_t, int64_t>(x.data(), y.data(), l, nullptr, scratch);
  for (int64_t o = 0; o < 2; ++o) {
    int64_t want = 0;
    for (int64_t k = 0; k < l.r; ++k) want += x[o * l.r + k];
    REQUIRE(y[o] == want);
  }
}

template <bool kMax>
void CheckArg(const ReduceLayout& l, const std::vector<float>& x) {
  std::vector<float> y(l.outer * l.inner);
  std::vector<int64_t> idx(y.size(), -7);
  HostScratch scratch;
  ReduceArg<float, float, float, kMax>(x.data(), nullptr, y.data(), idx.data(), l, nullptr,
                                       scratch);
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t i = 0; i < l.inner; ++i) {
      // The CPU's scan: the first NaN, else the first extreme.
      int64_t best = 0;
      auto at = [&](int64_t k) { return x[(o * l.r + k) * l.inner + i]; };
      for (int64_t k = 1; k < l.r; ++k) {
        if (std::isnan(at(best))) break;
        if (std::isnan(at(k)) || (kMax ? at(k) > at(best) : at(k) < at(best))) best = k;
      }
      INFO(Name(l) << (kMax ? " max" : " min") << " at (" << o << ", " << i << ")");
      REQUIRE(idx[o * l.inner + i] == best);
      const float got = y[o * l.inner + i];
      REQUIRE((std::isnan(at(best)) ? std::isnan(got) : got == at(best)));
    }
}

TEST_CASE("max_dim and min_dim: first NaN, else first extreme", "[reduce]") {
  const float inf = std::numeric_limits<float>::infinity();
  for (const ReduceLayout& l : Layouts()) {
    const int64_t n = l.outer * l.r * l.inner;
    // Few distinct values: many ties, so the lowest index must win.
    std::vector<float> x = RandomVector<float>(n, n, -3, 3);
    for (float& v : x) v = std::round(v);
    CheckArg<true>(l, x);
    CheckArg<false>(l, x);
    // -inf everywhere with a NaN late in the last row: the NaN wins in its row.
    std::vector<float> y(n, -inf);
    y[n - 1] = NAN;
    if (n > 2) y[n / 2] = NAN;
    CheckArg<true>(l, y);
    CheckArg<false>(l, y);
  }
}

}  // namespace
}  // namespace cuda
}  // namespace oneflow
