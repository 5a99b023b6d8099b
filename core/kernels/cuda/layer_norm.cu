// CUDA kernels of layer_norm and its backward (core/ops/nn/layer_norm.cc): a block per row for
// the statistics and dx (statistics in double), and a thread per column for
// dweight and dbias (summed over the rows in order: deterministic).
#include <cmath>

#include "core/kernels/cuda/cuda_util.h"
#include "core/kernels/cuda/reduce_util.cuh"
#include "core/op_registry.h"
#include "core/ops/op_util.h"

namespace oneflow {

namespace {

constexpr int kThreads = 256;

int64_t RowsOf(const Tensor& x, int64_t k, int64_t* d) {
  int64_t n = 1;
  *d = 1;
  for (int64_t i = 0; i < x.ndim(); ++i) (i < x.ndim() - k ? n : *d) *= x.shape()[i];
  return n;
}

template <typename T>
__global__ void LayerNormKernel(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd,
                                int64_t n, int64_t d, double eps) {
  __shared__ double smem[cuda::kWarpSize];
  auto add = [](double a, double c) { return a + c; };
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    const T* xr = x + row * d;
    double s = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) s += xr[j];
    const double m = cuda::BlockReduce(s, add, 0.0, smem) / d;
    double v = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) v += (xr[j] - m) * (xr[j] - m);
    const double rs = 1.0 / sqrt(cuda::BlockReduce(v, add, 0.0, smem) / d + eps);
    if (threadIdx.x == 0) {
      mean[row] = static_cast<T>(m);
      rstd[row] = static_cast<T>(rs);
    }
    const T tm = static_cast<T>(m), trs = static_cast<T>(rs);
    T* yr = y + row * d;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) yr[j] = (xr[j] - tm) * trs * w[j] + b[j];
  }
}

template <typename T>
__global__ void LayerNormGradInputKernel(const T* dy, const T* x, const T* mean, const T* rstd,
                                         const T* w, T* dx, int64_t n, int64_t d) {
  __shared__ double smem[cuda::kWarpSize];
  auto add = [](double a, double c) { return a + c; };
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    const T* dyr = dy + row * d;
    const T* xr = x + row * d;
    const T m = mean[row], rs = rstd[row];
    double sg = 0, sgx = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      const T g = dyr[j] * w[j];
      sg += g;
      sgx += g * ((xr[j] - m) * rs);
    }
    const T mg = static_cast<T>(cuda::BlockReduce(sg, add, 0.0, smem) / d);
    const T mgx = static_cast<T>(cuda::BlockReduce(sgx, add, 0.0, smem) / d);
    T* dxr = dx + row * d;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      dxr[j] = rs * (dyr[j] * w[j] - mg - (xr[j] - m) * rs * mgx);
    }
  }
}

template <typename T>
__global__ void LayerNormGradWeightKernel(const T* dy, const T* x, const T* mean, const T* rstd,
                                          T* dw, T* db, int64_t n, int64_t d) {
  for (int64_t j = blockIdx.x * blockDim.x + threadIdx.x; j < d; j += gridDim.x * blockDim.x) {
    double sw = 0, sb = 0;
    for (int64_t row = 0; row < n; ++row) {
      const T g = dy[row * d + j];
      sw += g * ((x[row * d + j] - mean[row]) * rstd[row]);
      sb += g;
    }
    dw[j] = static_cast<T>(sw);
    db[j] = static_cast<T>(sb);
  }
}

int Blocks(int64_t n) {
  return static_cast<int>(std::min<int64_t>(std::max<int64_t>(n, 1), 65535));
}

std::vector<Tensor> LayerNormCuda(const std::vector<Tensor>& in, const Attrs& a,
                                  const std::vector<TensorMeta>& out) {
  Tensor x = fn::contiguous(in[0]), w = fn::contiguous(in[1]), b = fn::contiguous(in[2]);
  Tensor y = Tensor::Empty(out[0]), mean = Tensor::Empty(out[1]), rstd = Tensor::Empty(out[2]);
  int64_t d;
  const int64_t n = RowsOf(x, a.Get<int64_t>("normalized_ndim"), &d);
  if (n == 0 || d == 0) return {y, mean, rstd};
  cudaStream_t stream = cuda::StreamFor(x.device());
  DispatchFloating(x.dtype(), "layer_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    LayerNormKernel<T><<<Blocks(n), kThreads, 0, stream>>>(
        x.data<T>(), w.data<T>(), b.data<T>(), y.data<T>(), mean.data<T>(), rstd.data<T>(), n, d,
        a.Get<double>("eps"));
  });
  ONEFLOW_CUDA_CHECK(cudaGetLastError());
  return {y, mean, rstd};
}

std::vector<Tensor> LayerNormGradCuda(const std::vector<Tensor>& in, const Attrs& a,
                                      const std::vector<TensorMeta>& out) {
  Tensor dy = fn::contiguous(in[0]), x = fn::contiguous(in[1]), mean = fn::contiguous(in[2]),
         rstd = fn::contiguous(in[3]), w = fn::contiguous(in[4]);
  Tensor dx = Tensor::Empty(out[0]), dw = Tensor::Empty(out[1]), db = Tensor::Empty(out[2]);
  int64_t d;
  const int64_t n = RowsOf(x, a.Get<int64_t>("normalized_ndim"), &d);
  if (d == 0) return {dx, dw, db};
  cudaStream_t stream = cuda::StreamFor(x.device());
  DispatchFloating(x.dtype(), "layer_norm backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (n > 0) {
      LayerNormGradInputKernel<T>
          <<<Blocks(n), kThreads, 0, stream>>>(dy.data<T>(), x.data<T>(), mean.data<T>(),
                                               rstd.data<T>(), w.data<T>(), dx.data<T>(), n, d);
    }
    LayerNormGradWeightKernel<T><<<Blocks(cuda::CeilDiv(d, kThreads)), kThreads, 0, stream>>>(
        dy.data<T>(), x.data<T>(), mean.data<T>(), rstd.data<T>(), dw.data<T>(), db.data<T>(), n,
        d);
  });
  ONEFLOW_CUDA_CHECK(cudaGetLastError());
  return {dx, dw, db};
}

}  // namespace

ONEFLOW_REGISTER_KERNEL(layer_norm, kCUDA, LayerNormCuda);
ONEFLOW_REGISTER_KERNEL(layer_norm_grad, kCUDA, LayerNormGradCuda);

}  // namespace oneflow
