// Warp and block reductions shared by the CUDA kernels that reduce along an axis (sum, max/min,
// softmax, losses). A reduction is a value type V and a combine function; combine must be
// commutative and associative up to rounding, since the lanes meet in butterfly order.
//
//   auto add = [](float a, float b) { return a + b; };
//   float s = cuda::WarpReduce(v, add);                 // over the warp
//   float t = cuda::BlockReduce(v, add, 0.f, smem);     // smem: __shared__ float smem[32]
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace oneflow {
namespace cuda {

constexpr int kWarpSize = 32;
constexpr unsigned kFullWarp = 0xffffffffu;

// The sum as a combine function (softmax's denominators, the losses' totals and counts).
template <typename T>
__device__ __forceinline__ T SumOf(T a, T b) {
  return a + b;
}

// __shfl_xor_sync for the arithmetic types; types narrower than 32 bits travel as int.
// Structs carried by a reduction give their own overload (found by argument-dependent lookup).
template <typename T>
__device__ __forceinline__ std::enable_if_t<std::is_arithmetic_v<T>, T> ShflXor(T v, int mask) {
  if constexpr (sizeof(T) < sizeof(int)) {
    return static_cast<T>(__shfl_xor_sync(kFullWarp, static_cast<int>(v), mask));
  } else {
    return __shfl_xor_sync(kFullWarp, v, mask);
  }
}

// Reduces v over each warp; every lane gets the result.
// REQUIRES: all 32 lanes of the warp call it.
template <typename V, typename F>
__device__ __forceinline__ V WarpReduce(V v, F combine) {
  for (int mask = kWarpSize / 2; mask > 0; mask /= 2) v = combine(v, ShflXor(v, mask));
  return v;
}

// Reduces v over the whole block (one-dimensional, a multiple of 32 threads); every thread gets
// the result. smem: 32 slots of shared memory, reusable right after the call returns.
// REQUIRES: all threads of the block call it.
template <typename V, typename F>
__device__ __forceinline__ V BlockReduce(V v, F combine, V identity, V* smem) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  v = WarpReduce(v, combine);
  __syncthreads();  // the slots may still be read by the previous call
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = lane < warps ? smem[lane] : identity;
  return WarpReduce(v, combine);  // every warp reduces the partials, so all threads hold it
}

__host__ __device__ constexpr int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace cuda
}  // namespace oneflow
