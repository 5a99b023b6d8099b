// index_select along a dim (the embedding lookup: weight rows by token) and its gradient
// index_select_grad (core/ops/index.cc), x seen as (outer, n, inner), the index as `count`
// positions read with one stride:
//   - forward: a warp per output row of `inner` elements, copied as E (an unsigned type of the
//     element's size, or a 16-byte pack when the rows allow it); a thread per element for rows
//     shorter than a warp;
//   - backward, deterministic and without atomics: the positions sorted by index value (a
//     stable radix sort, CUB, in the caller), then a warp per (outer, run of equal values)
//     adds the gradient rows of its run in position order, the order the CPU adds them in.
//     Rows no index names stay as the caller zeroed them.
//
//   embedding::Forward<E, I>(x, y, index, stride, count, outer, n, inner, stream);
//   embedding::SortKeys<I>(index, stride, count, n, keys, positions, stream);
//   ... cub::DeviceRadixSort::SortPairs(keys -> sorted_keys, positions -> sorted_positions)
//   embedding::Backward<T>(g, sorted_keys, sorted_positions, count, outer, n, inner, dx, stream);
#pragma once

#include <cstdint>

#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/kernels/row_util.cuh"
#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/cuda/reduce_util.cuh"

namespace oneflow {
namespace cuda {
namespace embedding {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / kWarpSize;

// index[j * stride] wrapped into [0, n), or -1 when out of [-n, n) (reported elsewhere).
template <typename I>
__device__ __forceinline__ int64_t Wrapped(const I* index, int64_t stride, int64_t j, int64_t n) {
  int64_t t = static_cast<int64_t>(index[j * stride]);
  if (t < -n || t >= n) return -1;
  return t < 0 ? t + n : t;
}

// y[i][j][:] = x[i][index[j]][:] for rows (i, j) of `inner` E each; a warp per row.
template <typename E, typename I>
__global__ void __launch_bounds__(kThreads)
    IndexSelectRowsKernel(const E* x, E* y, const I* index, int64_t stride, int64_t count,
                          int64_t outer, int64_t n, int64_t inner) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t rows = outer * count;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
       r < rows; r += static_cast<int64_t>(gridDim.x) * kWarpsPerBlock) {
    const int64_t i = r / count, j = r % count;
    const int64_t t = Wrapped(index, stride, j, n);
    if (t < 0) continue;
    const E* src = x + (i * n + t) * inner;
    E* dst = y + r * inner;
    for (int64_t k = lane; k < inner; k += kWarpSize) dst[k] = src[k];
  }
}

// The same for short rows (inner < 32): a thread per element.
template <typename E, typename I>
__global__ void __launch_bounds__(kThreads)
    IndexSelectElemsKernel(const E* x, E* y, const I* index, int64_t stride, int64_t count,
                           int64_t outer, int64_t n, int64_t inner) {
  const int64_t total = outer * count * inner;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t k = e % inner, r = e / inner;
    const int64_t t = Wrapped(index, stride, r % count, n);
    if (t >= 0) y[e] = x[(r / count * n + t) * inner + k];
  }
}

// keys[j] = the wrapped index at position j (n for an out-of-range one: sorted last, dropped),
// positions[j] = j.
template <typename I>
__global__ void __launch_bounds__(kThreads)
    SortKeysKernel(const I* index, int64_t stride, int64_t count, int64_t n, int64_t* keys,
                   int64_t* positions) {
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < count;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = Wrapped(index, stride, j, n);
    keys[j] = t < 0 ? n : t;
    positions[j] = j;
  }
}

// A warp per (i, p) where p starts a run of equal keys (< n): dx[i][key][:] = the sum of
// g[i][positions[q]][:] over the run, q ascending.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    GradRunsKernel(const T* g, const int64_t* keys, const int64_t* positions, int64_t count,
                   int64_t outer, int64_t n, int64_t inner, T* dx) {
  using A = Acc<T>;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t items = outer * count;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
       w < items; w += static_cast<int64_t>(gridDim.x) * kWarpsPerBlock) {
    const int64_t i = w / count, p = w % count;
    const int64_t key = keys[p];
    if (key >= n || (p > 0 && keys[p - 1] == key)) continue;
    const T* gi = g + i * count * inner;
    T* out = dx + (i * n + key) * inner;
    for (int64_t k = lane; k < inner; k += kWarpSize) {
      A acc = 0;
      for (int64_t q = p; q < count && keys[q] == key; ++q)
        acc += Load(gi[positions[q] * inner + k]);
      out[k] = Store<T>(acc);
    }
  }
}

// ---------------------------------------------------------------- launching

inline unsigned WarpBlocks(int64_t warps) { return row::RowBlocks(warps, kWarpsPerBlock); }

// REQUIRES: outer * count >= 1, inner >= 1.
template <typename E, typename I>
void Forward(const E* x, E* y, const I* index, int64_t stride, int64_t count, int64_t outer,
             int64_t n, int64_t inner, cudaStream_t stream) {
  if (inner < kWarpSize) {
    OF_CUDA_LAUNCH((IndexSelectElemsKernel<E, I>), row::RowBlocks(outer * count * inner, kThreads),
                   kThreads, 0, stream, x, y, index, stride, count, outer, n, inner);
  } else {
    OF_CUDA_LAUNCH((IndexSelectRowsKernel<E, I>), WarpBlocks(outer * count), kThreads, 0, stream, x,
                   y, index, stride, count, outer, n, inner);
  }
}

template <typename I>
void SortKeys(const I* index, int64_t stride, int64_t count, int64_t n, int64_t* keys,
              int64_t* positions, cudaStream_t stream) {
  OF_CUDA_LAUNCH(SortKeysKernel<I>, row::RowBlocks(count, kThreads), kThreads, 0, stream, index,
                 stride, count, n, keys, positions);
}

// keys and positions sorted by key (stably); dx zeroed before.
template <typename T>
void Backward(const T* g, const int64_t* keys, const int64_t* positions, int64_t count,
              int64_t outer, int64_t n, int64_t inner, T* dx, cudaStream_t stream) {
  OF_CUDA_LAUNCH(GradRunsKernel<T>, WarpBlocks(outer * count), kThreads, 0, stream, g, keys,
                 positions, count, outer, n, inner, dx);
}

}  // namespace embedding
}  // namespace cuda
}  // namespace oneflow
