// CUDA kernels of softmax, log_softmax and their gradient ops (core/ops/nn/softmax.cc): x is
// seen as (outer, d, inner) around its dim: rows (inner == 1) take a warp each, or a block when
// longer than kWarpRowMax; columns (inner > 1) take a block of 32 columns by kColRows threads
// down the dim. Both follow the CPU's recipe: the max ignores NaN, an infinite max shifts by 0
// (a row of -inf stays -inf / 0 rather than nan), and the math is in the input's type.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "core/functional.h"
#include "core/kernels/cuda/cuda_util.h"
#include "core/kernels/cuda/reduce_util.cuh"
#include "core/op_registry.h"
#include "core/ops/nn/nn_util.h"

namespace oneflow {

namespace {

using cuda::CeilDiv;

constexpr int64_t kWarpRowMax = 1024;  // longer rows are worth a block each
constexpr int kColRows = 8;
__device__ __forceinline__ float Exp(float v) { return expf(v); }
__device__ __forceinline__ double Exp(double v) { return exp(v); }
__device__ __forceinline__ float Log(float v) { return logf(v); }
__device__ __forceinline__ double Log(double v) { return log(v); }

// std::max(a, b) as the CPU uses it: a NaN b leaves a.
template <typename T>
__device__ __forceinline__ T MaxOf(T a, T b) {
  return a < b ? b : a;
}
using cuda::SumOf;

// ---------------------------------------------------------------- softmax, log_softmax

// One row of d elements per group of threads (a warp, or the whole block).
template <typename T, bool kLog, bool kBlockPerRow>
__global__ void SoftmaxRowsKernel(const T* x, T* y, int64_t rows, int64_t d) {
  __shared__ T smem[cuda::kWarpSize];
  const int group = kBlockPerRow ? blockDim.x : cuda::kWarpSize;
  const int64_t groups_per_block = blockDim.x / group;
  const int t = threadIdx.x % group;
  auto reduce = [&](T v, auto combine, T identity) {
    if constexpr (kBlockPerRow) {
      return cuda::BlockReduce(v, combine, identity, smem);
    } else {
      return cuda::WarpReduce(v, combine);
    }
  };
  auto max_of = [](T a, T b) { return MaxOf(a, b); };
  auto sum_of = [](T a, T b) { return SumOf(a, b); };
  for (int64_t row = blockIdx.x * groups_per_block + threadIdx.x / group; row < rows;
       row += gridDim.x * groups_per_block) {
    const T* xr = x + row * d;
    T* yr = y + row * d;
    T mx = -std::numeric_limits<T>::infinity();
    for (int64_t k = t; k < d; k += group) mx = MaxOf(mx, xr[k]);
    mx = reduce(mx, max_of, -std::numeric_limits<T>::infinity());
    if (isinf(mx)) mx = T(0);
    T sum = 0;
    for (int64_t k = t; k < d; k += group) {
      const T e = Exp(xr[k] - mx);
      sum += e;
      if (!kLog) yr[k] = e;
    }
    sum = reduce(sum, sum_of, T(0));
    if (kLog) {
      const T log_sum = Log(sum);
      for (int64_t k = t; k < d; k += group) yr[k] = xr[k] - mx - log_sum;
    } else {
      for (int64_t k = t; k < d; k += group) yr[k] = yr[k] / sum;  // this thread's own writes
    }
  }
}

// v reduced over the kColRows threads of each column of the block; all of them get it.
template <typename T, typename F>
__device__ __forceinline__ T ColumnReduce(T v, F combine, T (*part)[cuda::kWarpSize]) {
  part[threadIdx.y][threadIdx.x] = v;
  __syncthreads();
  T r = part[0][threadIdx.x];
  for (int j = 1; j < kColRows; ++j) r = combine(r, part[j][threadIdx.x]);
  __syncthreads();  // part is rewritten by the next call
  return r;
}

// Columns i of x (outer, d, inner), 32 of them per block, kColRows threads down each.
template <typename T, bool kLog>
__global__ void SoftmaxColsKernel(const T* x, T* y, int64_t outer, int64_t d, int64_t inner) {
  __shared__ T part[kColRows][cuda::kWarpSize];
  const int64_t tiles = CeilDiv(inner, cuda::kWarpSize);
  const int ty = threadIdx.y;
  auto max_of = [](T a, T b) { return MaxOf(a, b); };
  auto sum_of = [](T a, T b) { return SumOf(a, b); };
  for (int64_t item = blockIdx.x; item < outer * tiles; item += gridDim.x) {
    const int64_t i = item % tiles * cuda::kWarpSize + threadIdx.x;
    const bool active = i < inner;
    const int64_t base = item / tiles * d * inner + i;
    const T* xc = x + base;
    T* yc = y + base;
    T mx = -std::numeric_limits<T>::infinity();
    if (active) {
      for (int64_t k = ty; k < d; k += kColRows) mx = MaxOf(mx, xc[k * inner]);
    }
    mx = ColumnReduce(mx, max_of, part);
    if (isinf(mx)) mx = T(0);
    T sum = 0;
    if (active) {
      for (int64_t k = ty; k < d; k += kColRows) {
        const T e = Exp(xc[k * inner] - mx);
        sum += e;
        if (!kLog) yc[k * inner] = e;
      }
    }
    sum = ColumnReduce(sum, sum_of, part);
    if (!active) continue;
    if (kLog) {
      const T log_sum = Log(sum);
      for (int64_t k = ty; k < d; k += kColRows) yc[k * inner] = xc[k * inner] - mx - log_sum;
    } else {
      for (int64_t k = ty; k < d; k += kColRows) yc[k * inner] = yc[k * inner] / sum;
    }
  }
}

// x seen as (outer, d, inner) around attrs' dim.
struct RowLayout {
  int64_t outer = 1, d = 1, inner = 1;
};

RowLayout LayoutAround(const Tensor& x, const Attrs& attrs, const char* op) {
  RowLayout l;
  if (x.ndim() == 0) return l;
  const int64_t dim = WrapDim(attrs.Get<int64_t>("dim"), x.ndim(), op);
  for (int64_t i = 0; i < dim; ++i) l.outer *= x.shape()[i];
  l.d = x.shape()[dim];
  for (int64_t i = dim + 1; i < x.ndim(); ++i) l.inner *= x.shape()[i];
  return l;
}

// One geometry for the forward and gradient kernels: columns (inner > 1) a block of 32 columns
// each, rows a warp each, or a block each when longer than kWarpRowMax. The kernels take `args`
// then (outer, d, inner) or (rows, d).
template <typename Cols, typename WarpRows, typename BlockRows, typename... Args>
void LaunchAround(const RowLayout& l, cudaStream_t stream, Cols cols, WarpRows warp_rows,
                  BlockRows block_rows, Args... args) {
  if (l.inner > 1) {
    const int64_t items = l.outer * CeilDiv(l.inner, cuda::kWarpSize);
    cols<<<cuda::Blocks(items, 1), dim3(cuda::kWarpSize, kColRows), 0, stream>>>(args..., l.outer,
                                                                                 l.d, l.inner);
  } else if (l.d <= kWarpRowMax) {
    warp_rows<<<cuda::Blocks(l.outer * cuda::kWarpSize), cuda::kThreads, 0, stream>>>(args...,
                                                                                      l.outer, l.d);
  } else {
    block_rows<<<cuda::Blocks(l.outer, 1), cuda::kThreads, 0, stream>>>(args..., l.outer, l.d);
  }
  ONEFLOW_CUDA_CHECK(cudaGetLastError());
}

template <bool kLog>
std::vector<Tensor> SoftmaxCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                const std::vector<TensorMeta>& out) {
  const char* op = kLog ? "log_softmax" : "softmax";
  Tensor y = Tensor::Empty(out[0]);
  // The CPU kernel's dtype error, for empty tensors too.
  DispatchFloating(in[0].dtype(), op, [](auto) {});
  if (y.numel() == 0) return {y};
  Tensor x = fn::contiguous(in[0]);
  const RowLayout l = LayoutAround(x, attrs, op);
  DispatchFloating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    LaunchAround(l, cuda::StreamFor(x.device()), SoftmaxColsKernel<T, kLog>,
                 SoftmaxRowsKernel<T, kLog, false>, SoftmaxRowsKernel<T, kLog, true>,
                 static_cast<const T*>(x.data<T>()), y.data<T>());
  });
  return {y};
}

// ---------------------------------------------------------------- softmax_grad, log_softmax_grad
// s = sum over the row of dy * y (softmax) or dy (log_softmax); dx = y * (dy - s) or
// dy - exp(y) * s, in the same geometry as the forward kernels.

template <typename T, bool kLog>
__device__ __forceinline__ T GradTerm(T y, T dy) {
  return kLog ? dy : dy * y;
}
template <typename T, bool kLog>
__device__ __forceinline__ T GradOut(T y, T dy, T s) {
  return kLog ? dy - Exp(y) * s : y * (dy - s);
}

template <typename T, bool kLog, bool kBlockPerRow>
__global__ void SoftmaxGradRowsKernel(const T* y, const T* dy, T* dx, int64_t rows, int64_t d) {
  __shared__ T smem[cuda::kWarpSize];
  const int group = kBlockPerRow ? blockDim.x : cuda::kWarpSize;
  const int64_t groups_per_block = blockDim.x / group;
  const int t = threadIdx.x % group;
  auto sum_of = [](T a, T b) { return SumOf(a, b); };
  for (int64_t row = blockIdx.x * groups_per_block + threadIdx.x / group; row < rows;
       row += gridDim.x * groups_per_block) {
    const T* yr = y + row * d;
    const T* dyr = dy + row * d;
    T* dxr = dx + row * d;
    T s = 0;
    for (int64_t k = t; k < d; k += group) s += GradTerm<T, kLog>(yr[k], dyr[k]);
    if constexpr (kBlockPerRow) {
      s = cuda::BlockReduce(s, sum_of, T(0), smem);
    } else {
      s = cuda::WarpReduce(s, sum_of);
    }
    for (int64_t k = t; k < d; k += group) dxr[k] = GradOut<T, kLog>(yr[k], dyr[k], s);
  }
}

template <typename T, bool kLog>
__global__ void SoftmaxGradColsKernel(const T* y, const T* dy, T* dx, int64_t outer, int64_t d,
                                      int64_t inner) {
  __shared__ T part[kColRows][cuda::kWarpSize];
  const int64_t tiles = CeilDiv(inner, cuda::kWarpSize);
  const int ty = threadIdx.y;
  auto sum_of = [](T a, T b) { return SumOf(a, b); };
  for (int64_t item = blockIdx.x; item < outer * tiles; item += gridDim.x) {
    const int64_t i = item % tiles * cuda::kWarpSize + threadIdx.x;
    const bool active = i < inner;
    const int64_t base = item / tiles * d * inner + i;
    T s = 0;
    if (active) {
      for (int64_t k = ty; k < d; k += kColRows) {
        s += GradTerm<T, kLog>(y[base + k * inner], dy[base + k * inner]);
      }
    }
    s = ColumnReduce(s, sum_of, part);
    if (!active) continue;
    for (int64_t k = ty; k < d; k += kColRows) {
      const int64_t j = base + k * inner;
      dx[j] = GradOut<T, kLog>(y[j], dy[j], s);
    }
  }
}

template <bool kLog>
std::vector<Tensor> SoftmaxGradCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                    const std::vector<TensorMeta>& out) {
  const char* op = kLog ? "log_softmax_grad" : "softmax_grad";
  Tensor dx = Tensor::Empty(out[0]);
  DispatchFloating(in[0].dtype(), op, [](auto) {});
  if (dx.numel() == 0) return {dx};
  Tensor y = fn::contiguous(in[0]);
  Tensor dy = fn::contiguous(in[1]);
  const RowLayout l = LayoutAround(y, attrs, op);
  DispatchFloating(y.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    LaunchAround(l, cuda::StreamFor(y.device()), SoftmaxGradColsKernel<T, kLog>,
                 SoftmaxGradRowsKernel<T, kLog, false>, SoftmaxGradRowsKernel<T, kLog, true>,
                 static_cast<const T*>(y.data<T>()), static_cast<const T*>(dy.data<T>()),
                 dx.data<T>());
  });
  return {dx};
}

}  // namespace

ONEFLOW_REGISTER_KERNEL(softmax, kCUDA, SoftmaxCuda</*kLog=*/false>);
ONEFLOW_REGISTER_KERNEL(log_softmax, kCUDA, SoftmaxCuda</*kLog=*/true>);
ONEFLOW_REGISTER_KERNEL(softmax_grad, kCUDA, SoftmaxGradCuda</*kLog=*/false>);
ONEFLOW_REGISTER_KERNEL(log_softmax_grad, kCUDA, SoftmaxGradCuda</*kLog=*/true>);

}  // namespace oneflow
