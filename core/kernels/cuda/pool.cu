// CUDA kernels of the 2-d pooling ops (core/ops/nn/pool.cc): max_pool2d returns the flat argmax
// of each window, which cuDNN's pooling cannot, and the average poolings must count the padding
// exactly as the CPU does, so all of them are own kernels. The backward kernels gather: one
// thread per input pixel sums over the output windows that hold it, in the CPU's order, so
// there are no atomics and the results are deterministic.

#include <array>
#include <climits>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "core/functional.h"
#include "core/kernels/cuda/cuda_dispatch.h"
#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/cuda_util.h"
#include "core/op_registry.h"
#include "core/ops/nn/geometry.h"
#include "core/ops/nn/nn_util.h"

namespace oneflow {

namespace {

using cuda::Acc;
using cuda::DevT;
using cuda::Load;
using cuda::Store;

using cuda::ZeroFill;

using nn_util::MakePoolGeom;
using nn_util::PoolGeom;

// Along one axis: the first and last output whose window (kernel taps at o * stride - pad +
// t * dilation, t < kernel) can reach input position i, clipped to [0, out).
struct OutRange {
  int64_t lo, hi;  // inclusive; empty when lo > hi
};
__device__ __forceinline__ OutRange WindowsAt(int64_t i, int64_t kernel, int64_t stride,
                                              int64_t pad, int64_t dilation, int64_t out) {
  const int64_t first = i + pad - (kernel - 1) * dilation;  // o * stride >= first
  OutRange r;
  r.lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  r.hi = min((i + pad) / stride, out - 1);
  return r;
}

// ---- max_pool2d(x) -> (y, indices): the flat argmax in the H * W plane ----

template <typename T>
__global__ void MaxPoolKernel(int64_t total, PoolGeom g, const T* x, T* y, int64_t* idx) {
  using A = Acc<T>;
  ONEFLOW_CUDA_GRID_LOOP(o, total) {
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

std::vector<Tensor> MaxPool2dCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                  const std::vector<TensorMeta>& out) {
  Tensor y = Tensor::Empty(out[0]), idx = Tensor::Empty(out[1]);
  cuda::DispatchFloatingWithHalf(in[0].dtype(), "max_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (y.numel() == 0) return;
    Tensor x = fn::contiguous(in[0]);
    PoolGeom g = MakePoolGeom(x.shape(), attrs, "max_pool2d");
    cudaStream_t stream = cuda::StreamFor(y.device());
    MaxPoolKernel<<<cuda::Blocks(y.numel()), cuda::kThreads, 0, stream>>>(
        y.numel(), g, cuda::Ptr<T>(x), cuda::Ptr<T>(y), idx.data<int64_t>());
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
  });
  return {y, idx};
}

// dx at each input pixel: the sum of dy over the windows whose argmax it is.
template <typename T>
__global__ void MaxPoolGradKernel(int64_t total, PoolGeom g, const T* dy, const int64_t* idx,
                                  T* dx) {
  ONEFLOW_CUDA_GRID_LOOP(i, total) {
    const int64_t iw = i % g.w, ih = (i / g.w) % g.h, p = i / (g.w * g.h);
    const int64_t flat = ih * g.w + iw;
    const OutRange rh = WindowsAt(ih, g.kh, g.sh, g.ph, g.dh, g.oh);
    const OutRange rw = WindowsAt(iw, g.kw, g.sw, g.pw, g.dw, g.ow);
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

// max_pool2d_grad(dy, indices), attrs input_shape and the forward's window attributes.
std::vector<Tensor> MaxPool2dGradCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                      const std::vector<TensorMeta>& out) {
  Tensor dx = Tensor::Empty(out[0]);
  cuda::DispatchFloatingWithHalf(in[0].dtype(), "max_pool2d_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (dx.numel() == 0) return;
    cudaStream_t stream = cuda::StreamFor(dx.device());
    Tensor dy = fn::contiguous(in[0]), idx = fn::contiguous(in[1]);
    if (dy.numel() == 0) {
      ZeroFill(dx, stream);
      return;
    }
    PoolGeom g = MakePoolGeom(dx.shape(), attrs, "max_pool2d_grad");
    MaxPoolGradKernel<<<cuda::Blocks(dx.numel()), cuda::kThreads, 0, stream>>>(
        dx.numel(), g, cuda::Ptr<T>(dy), idx.data<int64_t>(), cuda::Ptr<T>(dx));
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
  });
  return {dx};
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

template <typename T>
__global__ void AvgPoolKernel(int64_t total, PoolGeom g, const T* x, T* y) {
  using A = Acc<T>;
  ONEFLOW_CUDA_GRID_LOOP(o, total) {
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

template <typename T>
__global__ void AvgPoolGradKernel(int64_t total, PoolGeom g, const T* dy, T* dx) {
  using A = Acc<T>;
  ONEFLOW_CUDA_GRID_LOOP(i, total) {
    const int64_t iw = i % g.w, ih = (i / g.w) % g.h, p = i / (g.w * g.h);
    const OutRange rh = WindowsAt(ih, g.kh, g.sh, g.ph, 1, g.oh);
    const OutRange rw = WindowsAt(iw, g.kw, g.sw, g.pw, 1, g.ow);
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

std::vector<Tensor> AvgPool2dCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                  const std::vector<TensorMeta>& out) {
  Tensor y = Tensor::Empty(out[0]);
  cuda::DispatchFloatingWithHalf(in[0].dtype(), "avg_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (y.numel() == 0) return;
    Tensor x = fn::contiguous(in[0]);
    PoolGeom g = MakePoolGeom(x.shape(), attrs, "avg_pool2d");
    AvgPoolKernel<<<cuda::Blocks(y.numel()), cuda::kThreads, 0, cuda::StreamFor(y.device())>>>(
        y.numel(), g, cuda::Ptr<T>(x), cuda::Ptr<T>(y));
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
  });
  return {y};
}

// avg_pool2d_grad(dy), attrs input_shape and the forward's window attributes.
std::vector<Tensor> AvgPool2dGradCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                      const std::vector<TensorMeta>& out) {
  Tensor dx = Tensor::Empty(out[0]);
  cuda::DispatchFloatingWithHalf(in[0].dtype(), "avg_pool2d_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (dx.numel() == 0) return;
    Tensor dy = fn::contiguous(in[0]);
    PoolGeom g = MakePoolGeom(dx.shape(), attrs, "avg_pool2d_grad");
    AvgPoolGradKernel<<<cuda::Blocks(dx.numel()), cuda::kThreads, 0,
                        cuda::StreamFor(dx.device())>>>(dx.numel(), g, cuda::Ptr<T>(dy),
                                                        cuda::Ptr<T>(dx));
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
  });
  return {dx};
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

template <typename T>
__global__ void AdaptiveAvgPoolKernel(int64_t total, PoolGeom g, const T* x, T* y) {
  using A = Acc<T>;
  ONEFLOW_CUDA_GRID_LOOP(o, total) {
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

template <typename T>
__global__ void AdaptiveAvgPoolGradKernel(int64_t total, PoolGeom g, const T* dy, T* dx) {
  using A = Acc<T>;
  ONEFLOW_CUDA_GRID_LOOP(i, total) {
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

std::vector<Tensor> AdaptiveAvgPool2dCuda(const std::vector<Tensor>& in, const Attrs&,
                                          const std::vector<TensorMeta>& out) {
  Tensor y = Tensor::Empty(out[0]);
  cuda::DispatchFloatingWithHalf(in[0].dtype(), "adaptive_avg_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (y.numel() == 0) return;
    Tensor x = fn::contiguous(in[0]);
    PoolGeom g = nn_util::MakePlaneGeom(x.shape(), y.shape());
    AdaptiveAvgPoolKernel<<<cuda::Blocks(y.numel()), cuda::kThreads, 0,
                            cuda::StreamFor(y.device())>>>(y.numel(), g, cuda::Ptr<T>(x),
                                                           cuda::Ptr<T>(y));
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
  });
  return {y};
}

// adaptive_avg_pool2d_grad(dy), attrs input_shape and output_size.
std::vector<Tensor> AdaptiveAvgPool2dGradCuda(const std::vector<Tensor>& in, const Attrs&,
                                              const std::vector<TensorMeta>& out) {
  Tensor dx = Tensor::Empty(out[0]);
  cuda::DispatchFloatingWithHalf(in[0].dtype(), "adaptive_avg_pool2d_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (dx.numel() == 0) return;
    Tensor dy = fn::contiguous(in[0]);
    PoolGeom g = nn_util::MakePlaneGeom(dx.shape(), dy.shape());
    AdaptiveAvgPoolGradKernel<<<cuda::Blocks(dx.numel()), cuda::kThreads, 0,
                                cuda::StreamFor(dx.device())>>>(dx.numel(), g, cuda::Ptr<T>(dy),
                                                                cuda::Ptr<T>(dx));
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
  });
  return {dx};
}

}  // namespace

ONEFLOW_REGISTER_KERNEL(max_pool2d, kCUDA, MaxPool2dCuda);
ONEFLOW_REGISTER_KERNEL(max_pool2d_grad, kCUDA, MaxPool2dGradCuda);
ONEFLOW_REGISTER_KERNEL(avg_pool2d, kCUDA, AvgPool2dCuda);
ONEFLOW_REGISTER_KERNEL(avg_pool2d_grad, kCUDA, AvgPool2dGradCuda);
ONEFLOW_REGISTER_KERNEL(adaptive_avg_pool2d, kCUDA, AdaptiveAvgPool2dCuda);
ONEFLOW_REGISTER_KERNEL(adaptive_avg_pool2d_grad, kCUDA, AdaptiveAvgPool2dGradCuda);

}  // namespace oneflow
