// The per-channel steps around cuDNN's batch normalization (core/kernels/cuda/batch_norm.cu):
// cuDNN saves the batch mean and the inverse standard deviation 1 / sqrt(var + eps) in P (float,
// or double for double inputs), while the ops return the mean and the biased variance in the
// input's type T and take gradients for both.
//
//   OF_CUDA_LAUNCH((BatchNormStatsKernel<__half, float>), blocks, 256, 0, stream, c, mean_f,
//                  invstd_f, eps, mean_h, var_h);
#pragma once

#include <cstdint>

#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/launch.cuh"

namespace oneflow {
namespace cuda {

// For c < channels: var_out[c] = 1 / invstd[c]^2 - eps (0 where rounding makes it negative,
// NaN stays NaN) and, when mean_out is not null, mean_out[c] = mean[c]; both in T.
// ptxas_check: block 256
template <typename T, typename P>
__global__ void BatchNormStatsKernel(int64_t channels, const P* mean, const P* invstd, double eps,
                                     T* mean_out, T* var_out) {
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < channels;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const P s = invstd[c];
    const P v = P(1) / (s * s) - static_cast<P>(eps);
    var_out[c] = Store<T>(v < P(0) ? P(0) : v);
    if (mean_out) mean_out[c] = Store<T>(mean[c]);
  }
}

// For c < channels: invstd[c] = 1 / sqrt(var[c] + eps) and, when mean_out is not null,
// mean_out[c] = mean[c]; both in P (what cuDNN's backward takes as its saved statistics).
// ptxas_check: block 256
template <typename T, typename P>
__global__ void BatchNormInvStdKernel(int64_t channels, const T* mean, const T* var, double eps,
                                      P* mean_out, P* invstd) {
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < channels;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    invstd[c] = P(1) / sqrt(static_cast<P>(Load(var[c])) + static_cast<P>(eps));
    if (mean_out) mean_out[c] = static_cast<P>(Load(mean[c]));
  }
}

// The gradient reaching x through the batch mean and variance outputs, added to dx:
//   dx += dmean[c] / count + 2 dvar[c] (x - mean[c]) / count
// for x and dx of (outer, channels, inner), contiguous, count = outer * inner. In a training
// step these outputs feed only the running statistics, their gradients are zero, and every
// block returns after reading two numbers. Grid: channels * chunks blocks; block b adds to
// channel b / chunks, its chunk b % chunks of the channel's count elements.
// ptxas_check: block 256
template <typename T, typename P>
__global__ void BatchNormStatsGradKernel(int64_t outer, int64_t channels, int64_t inner,
                                         int64_t chunks, const T* dmean, const T* dvar, const T* x,
                                         const P* mean, T* dx) {
  using A = Acc<T>;
  const int64_t c = blockIdx.x / chunks, k = blockIdx.x % chunks;
  const A dm = Load(dmean[c]), dv = Load(dvar[c]);
  if (dm == A(0) && dv == A(0)) return;
  const int64_t count = outer * inner;
  const A a = dm / static_cast<A>(count), b = A(2) * dv / static_cast<A>(count);
  const A m = static_cast<A>(mean[c]);
  const int64_t chunk = (count + chunks - 1) / chunks;
  const int64_t end = (k + 1) * chunk < count ? (k + 1) * chunk : count;
  for (int64_t e = k * chunk + threadIdx.x; e < end; e += blockDim.x) {
    const int64_t n = e / inner, s = e - n * inner;
    const int64_t off = (n * channels + c) * inner + s;
    dx[off] = Store<T>(Load(dx[off]) + a + b * (Load(x[off]) - m));
  }
}

}  // namespace cuda
}  // namespace oneflow
