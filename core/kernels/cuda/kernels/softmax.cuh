// softmax and log_softmax over one dim of x seen as (outer, d, inner) (core/ops/nn/softmax.cc),
// and their gradients, in the accumulation type Acc<T> (float for float and the half types):
//   - rows (inner == 1) up to row::kWarpRowMax: a warp per row, the row in registers (one read
//     and one write of memory, 16-byte accesses when the rows are aligned);
//   - longer rows: a block per row, the row kept in shared memory when it fits in 46 KiB (one
//     read), else read again from global memory for each pass;
//   - columns (inner > 1): a block per 32 columns, kColLanes threads down each column.
// The CPU kernel's recipe throughout: the max ignores NaN, an infinite max shifts by 0, y is
// e / sum (softmax) or x - max - log(sum) (log_softmax).
// Gradients: s = sum over the row of dy * y (softmax) or dy (log_softmax);
// dx = y * (dy - s) or dy - exp(y) * s.
//
//   softmax::Forward<T>(x, y, outer, d, inner, /*log=*/false, stream);
//   softmax::Backward<T>(y, dy, dx, outer, d, inner, /*log=*/false, stream);
#pragma once

#include <cstdint>
#include <limits>

#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/kernels/row_util.cuh"
#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/cuda/reduce_util.cuh"

namespace oneflow {
namespace cuda {
namespace softmax {

constexpr int kColLanes = 8;
constexpr int kColThreads = kWarpSize * kColLanes;
// Shared memory a block-per-row kernel may keep its row in: within the 48 KiB a launch gets
// without opting in to more, with room for the static reduction slots.
constexpr int64_t kRowCacheBytes = 46 << 10;

template <typename A>
__device__ __forceinline__ A MaxOf2(A a, A b) {
  return row::MaxOf(a, b);
}

// ---------------------------------------------------------------- forward

template <typename T, int kPack, int kIters>
__global__ void __launch_bounds__(row::kWarpBlockThreads)
    SoftmaxWarpKernel(const T* x, T* y, int64_t rows, int d, bool log) {
  using A = Acc<T>;
  constexpr int kWarps = row::kWarpBlockThreads / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / kWarpSize; r < rows;
       r += static_cast<int64_t>(gridDim.x) * kWarps) {
    A v[kIters][kPack];
    A mx = -std::numeric_limits<A>::infinity();
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int c = (i * kWarpSize + lane) * kPack;
      if (c < d) {
        const row::Pack<T, kPack> p = row::LoadPack<T, kPack>(x + r * d + c);
#pragma unroll
        for (int k = 0; k < kPack; ++k) {
          v[i][k] = Load(p.v[k]);
          mx = row::MaxOf(mx, v[i][k]);
        }
      } else {
#pragma unroll
        for (int k = 0; k < kPack; ++k) v[i][k] = 0;
      }
    }
    mx = WarpReduce(mx, MaxOf2<A>);
    if (row::IsInf(mx)) mx = 0;  // a row of -inf: -inf - -inf would be nan
    A sum = 0;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      if ((i * kWarpSize + lane) * kPack >= d) continue;
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        const A e = row::Exp(v[i][k] - mx);
        sum += e;
        if (!log) v[i][k] = e;
      }
    }
    sum = WarpReduce(sum, SumOf<A>);
    const A shift = log ? mx + row::Log(sum) : A(0);
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int c = (i * kWarpSize + lane) * kPack;
      if (c >= d) continue;
      row::Pack<T, kPack> o;
#pragma unroll
      for (int k = 0; k < kPack; ++k) o.v[k] = Store<T>(log ? v[i][k] - shift : v[i][k] / sum);
      row::StorePack<T, kPack>(y + r * d + c, o);
    }
  }
}

// A block per row; `cached`: the launch gave d elements of Acc<T> of dynamic shared memory.
template <typename T>
__global__ void __launch_bounds__(row::kRowBlockThreads)
    SoftmaxBlockKernel(const T* x, T* y, int64_t rows, int64_t d, bool log, bool cached) {
  using A = Acc<T>;
  OF_DYNAMIC_SMEM(A, cache);
  __shared__ A smem[kWarpSize];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * d;
    T* yr = y + r * d;
    // Each thread reads back only the cache slots it wrote itself: no barrier needed.
    A mx = -std::numeric_limits<A>::infinity();
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
      const A v = Load(xr[c]);
      if (cached) cache[c] = v;
      mx = row::MaxOf(mx, v);
    }
    mx = BlockReduce(mx, MaxOf2<A>, -std::numeric_limits<A>::infinity(), smem);
    if (row::IsInf(mx)) mx = 0;
    A sum = 0;
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
      const A e = row::Exp((cached ? cache[c] : Load(xr[c])) - mx);
      sum += e;
      if (cached && !log) cache[c] = e;
    }
    sum = BlockReduce(sum, SumOf<A>, A(0), smem);
    const A shift = log ? mx + row::Log(sum) : A(0);
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
      const A v = cached ? cache[c] : Load(xr[c]);
      yr[c] = Store<T>(log ? v - shift : (cached ? v : row::Exp(v - mx)) / sum);
    }
    __syncthreads();  // the next row's threads rewrite the cache
  }
}

// Columns of (outer, d, inner), 32 per block: lane ty of column tx walks k = ty, ty + 8, ...
template <typename A>
__device__ __forceinline__ A ColumnReduce(A v, bool is_max, A (*part)[kWarpSize]) {
  const int tx = threadIdx.x % kWarpSize, ty = threadIdx.x / kWarpSize;
  part[ty][tx] = v;
  __syncthreads();
  A r = part[0][tx];
  for (int j = 1; j < kColLanes; ++j) r = is_max ? row::MaxOf(r, part[j][tx]) : r + part[j][tx];
  __syncthreads();  // part is rewritten by the next call
  return r;
}

template <typename T>
__global__ void __launch_bounds__(kColThreads)
    SoftmaxColsKernel(const T* x, T* y, int64_t outer, int64_t d, int64_t inner, bool log) {
  using A = Acc<T>;
  __shared__ A part[kColLanes][kWarpSize];
  const int tx = threadIdx.x % kWarpSize, ty = threadIdx.x / kWarpSize;
  const int64_t tiles = CeilDiv(inner, kWarpSize);
  for (int64_t item = blockIdx.x; item < outer * tiles; item += gridDim.x) {
    const int64_t i = item % tiles * kWarpSize + tx;
    const bool active = i < inner;
    const int64_t base = item / tiles * d * inner + i;
    A mx = -std::numeric_limits<A>::infinity();
    if (active) {
      for (int64_t k = ty; k < d; k += kColLanes) mx = row::MaxOf(mx, Load(x[base + k * inner]));
    }
    mx = ColumnReduce(mx, true, part);
    if (row::IsInf(mx)) mx = 0;
    A sum = 0;
    if (active) {
      for (int64_t k = ty; k < d; k += kColLanes) sum += row::Exp(Load(x[base + k * inner]) - mx);
    }
    sum = ColumnReduce(sum, false, part);
    if (!active) continue;
    const A shift = log ? mx + row::Log(sum) : A(0);
    for (int64_t k = ty; k < d; k += kColLanes) {
      const A v = Load(x[base + k * inner]);
      y[base + k * inner] = Store<T>(log ? v - shift : row::Exp(v - mx) / sum);
    }
  }
}

// ---------------------------------------------------------------- gradients

template <typename A>
__device__ __forceinline__ A GradTerm(A y, A dy, bool log) {
  return log ? dy : dy * y;
}
template <typename A>
__device__ __forceinline__ A GradOut(A y, A dy, A s, bool log) {
  return log ? dy - row::Exp(y) * s : y * (dy - s);
}

template <typename T, int kPack, int kIters>
__global__ void __launch_bounds__(row::kWarpBlockThreads)
    SoftmaxGradWarpKernel(const T* y, const T* dy, T* dx, int64_t rows, int d, bool log) {
  using A = Acc<T>;
  constexpr int kWarps = row::kWarpBlockThreads / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / kWarpSize; r < rows;
       r += static_cast<int64_t>(gridDim.x) * kWarps) {
    A vy[kIters][kPack], vdy[kIters][kPack];
    A s = 0;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int c = (i * kWarpSize + lane) * kPack;
      if (c < d) {
        const row::Pack<T, kPack> py = row::LoadPack<T, kPack>(y + r * d + c);
        const row::Pack<T, kPack> pdy = row::LoadPack<T, kPack>(dy + r * d + c);
#pragma unroll
        for (int k = 0; k < kPack; ++k) {
          vy[i][k] = Load(py.v[k]);
          vdy[i][k] = Load(pdy.v[k]);
          s += GradTerm(vy[i][k], vdy[i][k], log);
        }
      } else {
#pragma unroll
        for (int k = 0; k < kPack; ++k) vy[i][k] = vdy[i][k] = 0;
      }
    }
    s = WarpReduce(s, SumOf<A>);
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int c = (i * kWarpSize + lane) * kPack;
      if (c >= d) continue;
      row::Pack<T, kPack> o;
#pragma unroll
      for (int k = 0; k < kPack; ++k) o.v[k] = Store<T>(GradOut(vy[i][k], vdy[i][k], s, log));
      row::StorePack<T, kPack>(dx + r * d + c, o);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(row::kRowBlockThreads)
    SoftmaxGradBlockKernel(const T* y, const T* dy, T* dx, int64_t rows, int64_t d, bool log) {
  using A = Acc<T>;
  __shared__ A smem[kWarpSize];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t o = r * d;
    A s = 0;
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
      s += GradTerm(Load(y[o + c]), Load(dy[o + c]), log);
    }
    s = BlockReduce(s, SumOf<A>, A(0), smem);
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
      dx[o + c] = Store<T>(GradOut(Load(y[o + c]), Load(dy[o + c]), s, log));
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kColThreads)
    SoftmaxGradColsKernel(const T* y, const T* dy, T* dx, int64_t outer, int64_t d, int64_t inner,
                          bool log) {
  using A = Acc<T>;
  __shared__ A part[kColLanes][kWarpSize];
  const int tx = threadIdx.x % kWarpSize, ty = threadIdx.x / kWarpSize;
  const int64_t tiles = CeilDiv(inner, kWarpSize);
  for (int64_t item = blockIdx.x; item < outer * tiles; item += gridDim.x) {
    const int64_t i = item % tiles * kWarpSize + tx;
    const bool active = i < inner;
    const int64_t base = item / tiles * d * inner + i;
    A s = 0;
    if (active) {
      for (int64_t k = ty; k < d; k += kColLanes) {
        s += GradTerm(Load(y[base + k * inner]), Load(dy[base + k * inner]), log);
      }
    }
    s = ColumnReduce(s, false, part);
    if (!active) continue;
    for (int64_t k = ty; k < d; k += kColLanes) {
      const int64_t j = base + k * inner;
      dx[j] = Store<T>(GradOut(Load(y[j]), Load(dy[j]), s, log));
    }
  }
}

// ---------------------------------------------------------------- launching

inline unsigned WarpRowBlocks(int64_t rows) {
  return row::RowBlocks(rows, row::kWarpBlockThreads / kWarpSize);
}

// REQUIRES: outer, d, inner >= 1; x and y contiguous (outer, d, inner).
template <typename T>
void Forward(const T* x, T* y, int64_t outer, int64_t d, int64_t inner, bool log,
             cudaStream_t stream) {
  if (inner > 1) {
    OF_CUDA_LAUNCH(SoftmaxColsKernel<T>, row::RowBlocks(outer * CeilDiv(inner, kWarpSize), 1),
                   kColThreads, 0, stream, x, y, outer, d, inner, log);
  } else if (d <= row::kWarpRowMax) {
    const int pack = row::PackFor<T>(d, {x, y});
    row::WithWarpIters<T>(pack, d, [&](auto kPack, auto kIters) {
      OF_CUDA_LAUNCH((SoftmaxWarpKernel<T, decltype(kPack)::value, decltype(kIters)::value>),
                     WarpRowBlocks(outer), row::kWarpBlockThreads, 0, stream, x, y, outer,
                     static_cast<int>(d), log);
    });
  } else {
    const bool cached = d * static_cast<int64_t>(sizeof(Acc<T>)) <= kRowCacheBytes;
    OF_CUDA_LAUNCH(SoftmaxBlockKernel<T>, row::RowBlocks(outer, 1), row::kRowBlockThreads,
                   cached ? d * sizeof(Acc<T>) : 0, stream, x, y, outer, d, log, cached);
  }
}

template <typename T>
void Backward(const T* y, const T* dy, T* dx, int64_t outer, int64_t d, int64_t inner, bool log,
              cudaStream_t stream) {
  if (inner > 1) {
    OF_CUDA_LAUNCH(SoftmaxGradColsKernel<T>, row::RowBlocks(outer * CeilDiv(inner, kWarpSize), 1),
                   kColThreads, 0, stream, y, dy, dx, outer, d, inner, log);
  } else if (d <= row::kWarpRowMax) {
    const int pack = row::PackFor<T>(d, {y, dy, dx});
    row::WithWarpIters<T>(pack, d, [&](auto kPack, auto kIters) {
      OF_CUDA_LAUNCH((SoftmaxGradWarpKernel<T, decltype(kPack)::value, decltype(kIters)::value>),
                     WarpRowBlocks(outer), row::kWarpBlockThreads, 0, stream, y, dy, dx, outer,
                     static_cast<int>(d), log);
    });
  } else {
    OF_CUDA_LAUNCH(SoftmaxGradBlockKernel<T>, row::RowBlocks(outer, 1), row::kRowBlockThreads, 0,
                   stream, y, dy, dx, outer, d, log);
  }
}

}  // namespace softmax
}  // namespace cuda
}  // namespace oneflow
