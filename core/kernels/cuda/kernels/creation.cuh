// The creation kernels of core/kernels/cuda/creation.cu (arange, eye's diagonal), in the form the
// host stand-in runs (tests/cuda_host/creation_test.cc).
//
//   cuda::LaunchArange(n, p, start, step, stream);   // p[i] = T(start + i * step)
//   cuda::LaunchEyeDiagonal(k, p, m, stream);         // p[i * m + i] = 1 for i < k
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/cuda/reduce_util.cuh"

namespace oneflow {
namespace cuda {

constexpr int kCreationThreads = 256;
constexpr int64_t kCreationMaxBlocks = 65535 * 32;  // a grid-stride loop covers the rest

// start + i * step in double as on the CPU, without the contraction into one fma nvcc would
// make: an integer dtype truncates the result, so the last bit can change the value.
template <typename T>
__global__ void ArangeKernel(int64_t n, T* p, double start, double step) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    p[i] = static_cast<T>(__dadd_rn(start, __dmul_rn(static_cast<double>(i), step)));
  }
}

template <typename T>
__global__ void EyeDiagonalKernel(int64_t k, T* p, int64_t m) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < k;
       i += int64_t(gridDim.x) * blockDim.x) {
    p[i * m + i] = static_cast<T>(1);
  }
}

inline int64_t CreationBlocks(int64_t n) {
  return std::max<int64_t>(1, std::min(CeilDiv(n, kCreationThreads), kCreationMaxBlocks));
}

// REQUIRES: n > 0.
template <typename T>
void LaunchArange(int64_t n, T* p, double start, double step, cudaStream_t stream) {
  OF_CUDA_LAUNCH(ArangeKernel<T>, CreationBlocks(n), kCreationThreads, 0, stream, n, p, start,
                 step);
}

// p: k rows of m elements (already zero); REQUIRES: k > 0.
template <typename T>
void LaunchEyeDiagonal(int64_t k, T* p, int64_t m, cudaStream_t stream) {
  OF_CUDA_LAUNCH(EyeDiagonalKernel<T>, CreationBlocks(k), kCreationThreads, 0, stream, k, p, m);
}

}  // namespace cuda
}  // namespace oneflow
