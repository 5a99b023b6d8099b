// The random ops' CUDA kernels: the counter-based generator of core/ops/counter_rng.h drawn on
// the device, so CPU and CUDA give the same numbers for one seed (bit for bit for uniform,
// randint, dropout and float32 normal; see counter_rng.h for float64 normal), and nothing is
// drawn on the host or copied. The seed and counter offset come as kernel arguments, or from
// device memory during a CUDA graph capture (rng::Source), so a replay draws fresh numbers.
//
//   OF_CUDA_LAUNCH(cuda::UniformKernel<float>, cuda::Blocks(n), cuda::kThreads, 0, stream,
//                  n, p, src, window, /*low=*/0.0, /*high=*/1.0);
#pragma once

#include <cstdint>

#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/launch.cuh"
#include "core/ops/counter_rng.h"

namespace oneflow {
namespace cuda {

// v (a double) stored as T the way the CPU stores it: the half types through float (the CPU
// kernels run in float32 and cast, core/dispatch.cc RunKernelInFloat32), the rest directly.
template <typename T>
__device__ __forceinline__ T StoreDraw(double v) {
  if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
    return Store<T>(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// A grid-stride loop over n draws, 32-bit indices where n fits.
#define OF_RNG_LOOP(i, n)                                                                \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <typename T>
__global__ void UniformKernel(int64_t n, T* p, rng::Source src, rng::Window w, double low,
                              double high) {
  const uint64_t seed = src.Seed(), off = src.Offset();
  OF_RNG_LOOP(i, n) { p[i] = StoreDraw<T>(rng::UniformValue(seed, off + w.Logical(i), low, high)); }
}

template <typename T>
__global__ void NormalKernel(int64_t n, T* p, rng::Source src, rng::Window w, double mean,
                             double std) {
  const uint64_t seed = src.Seed(), off = src.Offset();
  OF_RNG_LOOP(i, n) { p[i] = StoreDraw<T>(rng::NormalValue(seed, off + w.Logical(i), mean, std)); }
}

template <typename T>
__global__ void RandintKernel(int64_t n, T* p, rng::Source src, rng::Window w, int64_t low,
                              int64_t high) {
  const uint64_t seed = src.Seed(), off = src.Offset();
  OF_RNG_LOOP(i, n) {
    p[i] = static_cast<T>(rng::RandintValue(seed, off + w.Logical(i), low, high));
  }
}

// q[i] = 1 / (1 - p) where the draw keeps element i, else 0 (the mask dropout multiplies by).
template <typename T>
__global__ void DropoutMaskKernel(int64_t n, T* q, rng::Source src, rng::Window w, double p,
                                  double scale) {
  const uint64_t seed = src.Seed(), off = src.Offset();
  const T kept = StoreDraw<T>(scale), dropped = StoreDraw<T>(0.0);
  OF_RNG_LOOP(i, n) { q[i] = rng::DropoutKeep(seed, off + w.Logical(i), p) ? kept : dropped; }
}

// Fisher-Yates on one thread (the CPU's order of swaps, so the same permutation): randperm is
// rare in a training step and sequential by nature; the launch spares the host wait of a
// host draw and copy.
__global__ void RandpermKernel(int64_t n, int64_t* p, rng::Source src) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  const uint64_t seed = src.Seed(), off = src.Offset();
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = rng::PermutationPick(seed, off + i, i);
    const int64_t t = p[i];
    p[i] = p[j];
    p[j] = t;
  }
}

#undef OF_RNG_LOOP

}  // namespace cuda
}  // namespace oneflow
