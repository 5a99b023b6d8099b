// core/kernels/cuda/kernels/pool.cuh on the host stand-in: max_pool2d (argmax, padding,
// dilation, ceil_mode, NaN wins), avg_pool2d (count_include_pad, ceil_mode overhang),
// adaptive_avg_pool2d and their gradients against plain host loops written from PyTorch's
// definitions; fp32, fp64, fp16, bf16.
#include "core/kernels/cuda/kernels/pool.cuh"

#include <cmath>
#include <string>
#include <vector>

#include "tests/cuda_host/standin_test_util.h"

namespace oneflow {
namespace cuda {
namespace {

using cuda_host::RandomVector;
using cuda_host::RequireClose;
using cuda_host::ToDouble;

// PyTorch's output size of one pooled axis.
int64_t OutSize(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t span = in + 2 * p - d * (k - 1) - 1;
  int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (o - 1) * s >= in + p) --o;  // the last window must start inside
  return o;
}

PoolGeom Geom(int64_t planes, int64_t h, int64_t w, int64_t k, int64_t s, int64_t p, int64_t d,
              bool ceil_mode, bool count_include_pad) {
  PoolGeom g;
  g.planes = planes, g.h = h, g.w = w;
  g.kh = k, g.kw = k + 1, g.sh = s, g.sw = s, g.ph = p, g.pw = p, g.dh = d, g.dw = d;
  g.oh = OutSize(h, g.kh, s, p, d, ceil_mode);
  g.ow = OutSize(w, g.kw, s, p, d, ceil_mode);
  g.ceil_mode = ceil_mode, g.count_include_pad = count_include_pad;
  return g;
}

std::string Name(const PoolGeom& g) {
  return "h " + std::to_string(g.h) + " w " + std::to_string(g.w) + " k " + std::to_string(g.kh) +
         "x" + std::to_string(g.kw) + " s " + std::to_string(g.sh) + " p " + std::to_string(g.ph) +
         " d " + std::to_string(g.dh) + (g.ceil_mode ? " ceil" : "") +
         (g.count_include_pad ? " incl_pad" : "");
}

std::vector<PoolGeom> Geoms(bool dilation) {
  std::vector<PoolGeom> out;
  for (int64_t hw : {1, 7}) {
    for (int64_t k : {1, 3}) {
      for (int64_t s : {1, 2}) {
        for (int64_t p = 0; p <= k / 2; ++p) {
          for (int64_t d : {int64_t(1), dilation ? int64_t(2) : int64_t(1)}) {
            for (bool ceil_mode : {false, true}) {
              for (bool incl : {true, false}) {
                if (d > 1 && !incl) continue;
                PoolGeom g = Geom(3, hw, hw + 2, k, s, p, d, ceil_mode, incl);
                if (g.oh > 0 && g.ow > 0) out.push_back(g);
              }
            }
          }
        }
      }
    }
  }
  return out;
}

template <typename T>
void CheckMax(const PoolGeom& g, uint64_t seed) {
  const int64_t n_in = g.planes * g.h * g.w, n_out = g.planes * g.oh * g.ow;
  std::vector<T> x = RandomVector<T>(n_in, seed, -3, 3);
  for (auto& v : x) v = cuda_host::FromDouble<T>(std::round(ToDouble(v)));  // ties
  if (n_in > 4) x[n_in / 3] = cuda_host::FromDouble<T>(NAN);
  std::vector<T> y(n_out);
  std::vector<int64_t> idx(n_out, -7);
  OF_CUDA_LAUNCH(MaxPoolKernel<T>, PoolBlocks(n_out), kPoolThreads, 0, nullptr, n_out, g, x.data(),
                 y.data(), idx.data());
  std::vector<double> want(n_out);
  std::vector<int64_t> want_idx(n_out);
  for (int64_t p = 0; p < g.planes; ++p)
    for (int64_t oh = 0; oh < g.oh; ++oh)
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        // PyTorch: the first maximum, a NaN replaces it (the last NaN of the window).
        double best = -INFINITY;
        int64_t bi = -1;
        for (int64_t i = 0; i < g.kh; ++i)
          for (int64_t j = 0; j < g.kw; ++j) {
            const int64_t ih = oh * g.sh - g.ph + i * g.dh, iw = ow * g.sw - g.pw + j * g.dw;
            if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
            const double v = ToDouble(x[(p * g.h + ih) * g.w + iw]);
            if (bi < 0 || v > best || std::isnan(v)) best = v, bi = ih * g.w + iw;
          }
        want[(p * g.oh + oh) * g.ow + ow] = best;
        want_idx[(p * g.oh + oh) * g.ow + ow] = bi;
      }
  RequireClose(y, want, "max_pool2d " + Name(g), 0, 0);
  REQUIRE(idx == want_idx);

  // Gradient: dx = the sum of dy over the windows whose argmax the pixel is.
  std::vector<T> dy = RandomVector<T>(n_out, seed + 1), dx(n_in);
  OF_CUDA_LAUNCH(MaxPoolGradKernel<T>, PoolBlocks(n_in), kPoolThreads, 0, nullptr, n_in, g,
                 dy.data(), idx.data(), dx.data());
  std::vector<double> want_dx(n_in, 0.0);
  for (int64_t p = 0; p < g.planes; ++p)
    for (int64_t o = 0; o < g.oh * g.ow; ++o)
      if (want_idx[p * g.oh * g.ow + o] >= 0)
        want_dx[p * g.h * g.w + want_idx[p * g.oh * g.ow + o]] += ToDouble(dy[p * g.oh * g.ow + o]);
  RequireClose(dx, want_dx, "max_pool2d_grad " + Name(g));
}

// (h0, h1, w0, w1, divisor) of PyTorch's avg_pool2d window.
void AvgWindowRef(const PoolGeom& g, int64_t oh, int64_t ow, int64_t* h0, int64_t* h1, int64_t* w0,
                  int64_t* w1, int64_t* div) {
  *h0 = oh * g.sh - g.ph, *w0 = ow * g.sw - g.pw;
  *h1 = std::min(*h0 + g.kh, g.h + g.ph), *w1 = std::min(*w0 + g.kw, g.w + g.pw);
  const int64_t pool_size = (*h1 - *h0) * (*w1 - *w0);
  *h0 = std::max<int64_t>(*h0, 0), *w0 = std::max<int64_t>(*w0, 0);
  *h1 = std::min(*h1, g.h), *w1 = std::min(*w1, g.w);
  *div = g.count_include_pad ? pool_size : (*h1 - *h0) * (*w1 - *w0);
}

template <typename T>
void CheckAvg(const PoolGeom& g, uint64_t seed) {
  const int64_t n_in = g.planes * g.h * g.w, n_out = g.planes * g.oh * g.ow;
  std::vector<T> x = RandomVector<T>(n_in, seed), y(n_out);
  OF_CUDA_LAUNCH(AvgPoolKernel<T>, PoolBlocks(n_out), kPoolThreads, 0, nullptr, n_out, g, x.data(),
                 y.data());
  std::vector<T> dy = RandomVector<T>(n_out, seed + 1), dx(n_in);
  OF_CUDA_LAUNCH(AvgPoolGradKernel<T>, PoolBlocks(n_in), kPoolThreads, 0, nullptr, n_in, g,
                 dy.data(), dx.data());
  std::vector<double> want(n_out, 0.0), want_dx(n_in, 0.0);
  for (int64_t p = 0; p < g.planes; ++p)
    for (int64_t oh = 0; oh < g.oh; ++oh)
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        int64_t h0, h1, w0, w1, div;
        AvgWindowRef(g, oh, ow, &h0, &h1, &w0, &w1, &div);
        const int64_t o = (p * g.oh + oh) * g.ow + ow;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) {
            want[o] += ToDouble(x[(p * g.h + ih) * g.w + iw]) / div;
            want_dx[(p * g.h + ih) * g.w + iw] += ToDouble(dy[o]) / div;
          }
      }
  RequireClose(y, want, "avg_pool2d " + Name(g));
  RequireClose(dx, want_dx, "avg_pool2d_grad " + Name(g));
}

TEST_CASE("max_pool2d and its gradient match PyTorch's definition", "[pool]") {
  uint64_t seed = 1;
  int i = 0;
  for (const PoolGeom& g : Geoms(/*dilation=*/true)) {
    if (!g.count_include_pad) continue;  // max pooling has no divisor
    CheckMax<float>(g, ++seed);
    // The other types on a third of the shapes each (the stand-in's launches are slow under TSan).
    if (i % 3 == 0) CheckMax<double>(g, ++seed);
    if (i % 3 == 1) CheckMax<__half>(g, ++seed);
    if (i++ % 3 == 2) CheckMax<__nv_bfloat16>(g, ++seed);
  }
}

TEST_CASE("avg_pool2d and its gradient count the padding as PyTorch does", "[pool]") {
  uint64_t seed = 100;
  int i = 0;
  for (const PoolGeom& g : Geoms(/*dilation=*/false)) {
    CheckAvg<float>(g, ++seed);
    if (i % 2 == 0) CheckAvg<double>(g, ++seed);
    if (i++ % 2 == 1) CheckAvg<__half>(g, ++seed);
  }
}

TEST_CASE("adaptive_avg_pool2d and its gradient", "[pool]") {
  for (auto [in, out] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {5, 3}, {7, 7}, {3, 5}, {10, 4}}) {
    PoolGeom g;
    g.planes = 2, g.h = in, g.w = in + 1, g.oh = out, g.ow = out + 1;
    const int64_t n_in = g.planes * g.h * g.w, n_out = g.planes * g.oh * g.ow;
    std::vector<float> x = RandomVector<float>(n_in, in * 10 + out), y(n_out);
    std::vector<float> dy = RandomVector<float>(n_out, in), dx(n_in);
    OF_CUDA_LAUNCH(AdaptiveAvgPoolKernel<float>, PoolBlocks(n_out), kPoolThreads, 0, nullptr, n_out,
                   g, x.data(), y.data());
    OF_CUDA_LAUNCH(AdaptiveAvgPoolGradKernel<float>, PoolBlocks(n_in), kPoolThreads, 0, nullptr,
                   n_in, g, dy.data(), dx.data());
    std::vector<double> want(n_out, 0.0), want_dx(n_in, 0.0);
    auto start = [](int64_t o, int64_t i, int64_t n) { return o * i / n; };
    auto end = [](int64_t o, int64_t i, int64_t n) { return ((o + 1) * i + n - 1) / n; };
    for (int64_t p = 0; p < g.planes; ++p)
      for (int64_t oh = 0; oh < g.oh; ++oh)
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          const int64_t h0 = start(oh, g.h, g.oh), h1 = end(oh, g.h, g.oh);
          const int64_t w0 = start(ow, g.w, g.ow), w1 = end(ow, g.w, g.ow);
          const int64_t o = (p * g.oh + oh) * g.ow + ow;
          const double div = double((h1 - h0) * (w1 - w0));
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw) {
              want[o] += x[(p * g.h + ih) * g.w + iw] / div;
              want_dx[(p * g.h + ih) * g.w + iw] += dy[o] / div;
            }
        }
    RequireClose(y, want, "adaptive_avg_pool2d " + std::to_string(in) + "->" + std::to_string(out));
    RequireClose(dx, want_dx, "adaptive_avg_pool2d_grad");
  }
}

}  // namespace
}  // namespace cuda
}  // namespace oneflow
