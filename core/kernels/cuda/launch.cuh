// The one way our own CUDA kernels are written and launched, so that the same kernel source runs
// on a GPU (nvcc) and, in tests only, on the host stand-in for the GPU's threads
// (tests/cuda_host/: every CUDA thread a host thread, run under ThreadSanitizer, AddressSanitizer
// and UBSan against the CPU kernels).
//
// The contract a kernel keeps:
//   - its __global__ function and the __device__ helpers it calls live in a header
//     core/kernels/cuda/kernels/<concept>.cuh that includes only this file, cuda_types.cuh,
//     reduce_util.cuh and the standard library (no cuBLAS/cuDNN/CUB, no Tensor);
//   - it uses threadIdx/blockIdx/blockDim/gridDim (x only unless the stand-in says otherwise),
//     __syncthreads, the __shfl_*_sync family with a full mask, static __shared__ arrays and at
//     most one dynamic shared buffer through OF_DYNAMIC_SMEM;
//   - it is launched with OF_CUDA_LAUNCH, never with <<<>>> directly.
//
//   template <typename T>
//   __global__ void ScaleKernel(int64_t n, const T* x, T* y, float a) {
//     OF_DYNAMIC_SMEM(float, buf);  // float* buf: the launch's dynamic shared memory
//     ...
//   }
//   OF_CUDA_LAUNCH(ScaleKernel<float>, blocks, threads, smem_bytes, stream, n, x, y, 2.f);
#pragma once

#if defined(ONEFLOW_CUDA_HOST_STANDIN)
// The stand-in defines __global__, threadIdx, __syncthreads, the shuffles, OF_CUDA_LAUNCH and
// OF_DYNAMIC_SMEM for host C++.
#include "tests/cuda_host/standin.h"
#else
#include <cuda_runtime.h>

#include "core/kernels/cuda/cuda_util.h"

// Launches kernel<<<grid, block, smem_bytes, stream>>>(args...) and throws on a launch error
// (bad configuration, too many resources requested).
#define OF_CUDA_LAUNCH(kernel, grid, block, smem_bytes, stream, ...)  \
  do {                                                                \
    kernel<<<(grid), (block), (smem_bytes), (stream)>>>(__VA_ARGS__); \
    ONEFLOW_CUDA_CHECK(cudaGetLastError());                           \
  } while (0)

// Declares `T* name` pointing at the launch's dynamic shared memory (16-byte aligned).
#define OF_DYNAMIC_SMEM(T, name)                                    \
  extern __shared__ __align__(16) unsigned char of_dynamic_smem_[]; \
  T* name = reinterpret_cast<T*>(of_dynamic_smem_)
#endif
