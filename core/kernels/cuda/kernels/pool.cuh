// The 2-d pooling kernels of core/kernels/cuda/pool.cu (max_pool2d, avg_pool2d,
// adaptive_avg_pool2d and their gradients), in the form the host stand-in runs
// (tests/cuda_host/pool_test.cc). One thread per output (forward) or per input pixel (backward,
// a gather over the windows that hold it, in the CPU's order: no atomics, deterministic).
//
//   OF_CUDA_LAUNCH(cuda::MaxPoolKernel<float>, cuda::PoolBlocks(n), cuda::kPoolThreads, 0, stream,
//                  n, geom, x, y, idx);   // n = planes * oh * ow
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/cuda/reduce_util.cuh"
#include "core/ops/nn/geometry.h"

namespace oneflow {
namespace cuda {

using nn_util::PoolGeom;

constexpr int kPoolThreads = 256;  // the block size the kernels' marks below name
// Blocks for n threads of work; a grid-stride loop covers what the cap leaves.
inline int64_t PoolBlocks(int64_t n) {
  return std::max<int64_t>(1, std::min<int64_t>(CeilDiv(n, kPoolThreads), 65535 * 32));
}

// Along one axis: the first and last output whose window (kernel taps at o * stride - pad +
// t * dilation, t < kernel) can reach input position i, clipped to [0, out).
struct PoolOutRange {
  int64_t lo, hi;  // inclusive; empty when lo > hi
};
__device__ __forceinline__ PoolOutRange WindowsAt(int64_t i, int64_t kernel, int64_t stride,
                                                  int64_t pad, int64_t dilation, int64_t out) {
  const int64_t first = i + pad - (kernel - 1) * dilation;  // o * stride >= first
  PoolOutRange r;
  r.lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  r.hi = min((i + pad) / stride, out - 1);
  return r;
}

// ---- max_pool2d(x) -> (y, indices): the flat argmax in the H * W plane ----

// ptxas_check: block 256
template <typename T>
__global__ void MaxPoolKernel(int64_t total, PoolGeom g, const T* x, T* y, int64_t* idx) {
  using A = Acc<T>;
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; o < total;
       o += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ow = o % g.ow, oh = (o / g.ow) % g.oh, p = o / (g.ow * g.oh);
    const T* xp = x + p * g.h * g.w;
    A best = -std::numeric_limits<A>::infinity();
    int64_t best_idx;
    nn_util::MaxOverWindow(
        g, xp, oh, ow, [](T v) { return Load(v); }, &best, &best_idx);
    y[o] = Store<T>(best);
    idx[o] = best_idx;
  }
}

// dx at each input pixel: the sum of dy over the windows whose argmax it is.
// ptxas_check: block 256
template <typename T>
__global__ void MaxPoolGradKernel(int64_t total, PoolGeom g, const T* dy, const int64_t* idx,
                                  T* dx) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t iw = i % g.w, ih = (i / g.w) % g.h, p = i / (g.w * g.h);
    const int64_t flat = ih * g.w + iw;
    const PoolOutRange rh = WindowsAt(ih, g.kh, g.sh, g.ph, g.dh, g.oh);
    const PoolOutRange rw = WindowsAt(iw, g.kw, g.sw, g.pw, g.dw, g.ow);
    const int64_t base = p * g.oh * g.ow;
    Acc<T> acc = 0;
    for (int64_t oh = rh.lo; oh <= rh.hi; ++oh) {
      for (int64_t ow = rw.lo; ow <= rw.hi; ++ow) {
        const int64_t o = base + oh * g.ow + ow;
        if (idx[o] == flat) acc += Load(dy[o]);
      }
    }
    dx[i] = Store<T>(acc);
  }
}

// ---- avg_pool2d ----

// The input rows [h0, h1) and columns [w0, w1) of output (oh, ow)'s window and the divisor.
// As on CPU (and in PyTorch), count_include_pad counts the padding but not the overhang of
// ceil_mode.
struct AvgWindow {
  int64_t h0, h1, w0, w1, count;
};
__device__ __forceinline__ AvgWindow AvgWindowOf(const PoolGeom& g, int64_t oh, int64_t ow) {
  AvgWindow r;
  r.h0 = oh * g.sh - g.ph, r.w0 = ow * g.sw - g.pw;
  r.h1 = min(r.h0 + g.kh, g.h + g.ph), r.w1 = min(r.w0 + g.kw, g.w + g.pw);
  const int64_t padded_count = (r.h1 - r.h0) * (r.w1 - r.w0);
  r.h0 = max(r.h0, int64_t(0)), r.w0 = max(r.w0, int64_t(0));
  r.h1 = min(r.h1, g.h), r.w1 = min(r.w1, g.w);
  r.count = g.count_include_pad ? padded_count : (r.h1 - r.h0) * (r.w1 - r.w0);
  return r;
}

// ptxas_check: block 256
template <typename T>
__global__ void AvgPoolKernel(int64_t total, PoolGeom g, const T* x, T* y) {
  using A = Acc<T>;
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; o < total;
       o += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ow = o % g.ow, oh = (o / g.ow) % g.oh, p = o / (g.ow * g.oh);
    const T* xp = x + p * g.h * g.w;
    const AvgWindow win = AvgWindowOf(g, oh, ow);
    A acc = 0;
    if (win.count > 0) {
      const A scale = A(1) / A(win.count);
      for (int64_t ih = win.h0; ih < win.h1; ++ih) {
        for (int64_t iw = win.w0; iw < win.w1; ++iw) acc += Load(xp[ih * g.w + iw]) * scale;
      }
    }
    y[o] = Store<T>(acc);
  }
}

// ptxas_check: block 256
template <typename T>
__global__ void AvgPoolGradKernel(int64_t total, PoolGeom g, const T* dy, T* dx) {
  using A = Acc<T>;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t iw = i % g.w, ih = (i / g.w) % g.h, p = i / (g.w * g.h);
    const PoolOutRange rh = WindowsAt(ih, g.kh, g.sh, g.ph, 1, g.oh);
    const PoolOutRange rw = WindowsAt(iw, g.kw, g.sw, g.pw, 1, g.ow);
    const T* dyp = dy + p * g.oh * g.ow;
    A acc = 0;
    for (int64_t oh = rh.lo; oh <= rh.hi; ++oh) {
      for (int64_t ow = rw.lo; ow <= rw.hi; ++ow) {
        const AvgWindow win = AvgWindowOf(g, oh, ow);
        if (ih < win.h0 || ih >= win.h1 || iw < win.w0 || iw >= win.w1) continue;
        acc += Load(dyp[oh * g.ow + ow]) * (A(1) / A(win.count));
      }
    }
    dx[i] = Store<T>(acc);
  }
}

// ---- adaptive_avg_pool2d ----
// Output cell o of `out` covers input [floor(o * in / out), ceil((o + 1) * in / out)); input i
// lies in the cells [floor(i * out / in), ceil((i + 1) * out / in)).

__device__ __forceinline__ int64_t AdaptiveStart(int64_t o, int64_t in, int64_t out) {
  return o * in / out;
}
__device__ __forceinline__ int64_t AdaptiveEnd(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

// ptxas_check: block 256
template <typename T>
__global__ void AdaptiveAvgPoolKernel(int64_t total, PoolGeom g, const T* x, T* y) {
  using A = Acc<T>;
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; o < total;
       o += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ow = o % g.ow, oh = (o / g.ow) % g.oh, p = o / (g.ow * g.oh);
    const T* xp = x + p * g.h * g.w;
    const int64_t h0 = AdaptiveStart(oh, g.h, g.oh), h1 = AdaptiveEnd(oh, g.h, g.oh);
    const int64_t w0 = AdaptiveStart(ow, g.w, g.ow), w1 = AdaptiveEnd(ow, g.w, g.ow);
    const A scale = A(1) / A((h1 - h0) * (w1 - w0));
    A acc = 0;
    for (int64_t ih = h0; ih < h1; ++ih) {
      for (int64_t iw = w0; iw < w1; ++iw) acc += Load(xp[ih * g.w + iw]) * scale;
    }
    y[o] = Store<T>(acc);
  }
}

// ptxas_check: block 256
template <typename T>
__global__ void AdaptiveAvgPoolGradKernel(int64_t total, PoolGeom g, const T* dy, T* dx) {
  using A = Acc<T>;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t iw = i % g.w, ih = (i / g.w) % g.h, p = i / (g.w * g.h);
    const int64_t oh0 = AdaptiveStart(ih, g.oh, g.h), oh1 = min(AdaptiveEnd(ih, g.oh, g.h), g.oh);
    const int64_t ow0 = AdaptiveStart(iw, g.ow, g.w), ow1 = min(AdaptiveEnd(iw, g.ow, g.w), g.ow);
    const T* dyp = dy + p * g.oh * g.ow;
    A acc = 0;
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const int64_t h0 = AdaptiveStart(oh, g.h, g.oh), h1 = AdaptiveEnd(oh, g.h, g.oh);
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const int64_t w0 = AdaptiveStart(ow, g.w, g.ow), w1 = AdaptiveEnd(ow, g.w, g.ow);
        acc += Load(dyp[oh * g.ow + ow]) * (A(1) / A((h1 - h0) * (w1 - w0)));
      }
    }
    dx[i] = Store<T>(acc);
  }
}

}  // namespace cuda
}  // namespace oneflow
