// cross_entropy fused (core/ops/nn/loss.cc): logits (rows, c) with int64 class targets, in the
// accumulation type Acc<T> (float for float and the half types).
//   - forward: one pass over each row (a warp per row up to row::kWarpRowMax classes, else a
//     block) keeping an online max and sum of exp, giving lse = log(sum(exp(x))) per row and
//     the row's loss lse - (1 - e) x[t] - e / c sum(x) (e: label smoothing; 0 for an ignored
//     target); then one block adds the losses in a fixed order (sum, mean over the kept
//     targets) or copies them (none), and records the first out-of-range target;
//   - backward: dx = scale * (exp(x - lse) - (1 - e) [j == t] - e / c), one read of x and one
//     write of dx (no memset), scale being 0 for an ignored target, else dy[row] (none),
//     dy (sum) or dy / count (mean).
// The CPU's special cases: the max ignores NaN (a NaN anywhere makes lse NaN), an infinite max
// gives lse = max (a row of -inf: -inf; one holding +inf: +inf).
//
//   cross_entropy::Forward<T>(x, target, rows, c, ignore_index, smoothing, reduction, y, lse,
//                             loss_rows, bad, stream);
//   cross_entropy::Backward<T>(dy, x, target, lse, rows, c, ignore_index, smoothing, reduction,
//                              count, dx, stream);
#pragma once

#include <cstdint>
#include <limits>

#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/kernels/row_util.cuh"
#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/cuda/reduce_util.cuh"

namespace oneflow {
namespace cuda {
namespace cross_entropy {

enum Reduction : int { kNone = 0, kSum = 1, kMean = 2 };

constexpr int kFinishThreads = 1024;

// The running log-sum-exp of a part of a row: max m (NaN ignored), s = sum of exp(x - m), the
// plain sum sx (for label smoothing) and whether a NaN was seen.
template <typename A>
struct Online {
  A m = -std::numeric_limits<A>::infinity();
  A s = 0, sx = 0;
  bool nan = false;

  __device__ __forceinline__ void Add(A v) {
    sx += v;
    if (row::IsNan(v)) {
      nan = true;
    } else if (v > m) {
      s = s * row::Exp(m - v) + A(1);
      m = v;
    } else if (v != -std::numeric_limits<A>::infinity()) {
      s += row::Exp(v - m);
    }
  }
  // Commutative bit for bit (a.Merge(b) equals b.Merge(a)), so butterfly lanes agree. A part
  // with m = -inf has s = 0.
  __device__ __forceinline__ void Merge(A om, A os, A osx, bool onan) {
    if (om > m) {
      s = s * row::Exp(m - om) + os;
      m = om;
    } else if (om != -std::numeric_limits<A>::infinity()) {
      s = s + os * row::Exp(om - m);
    }
    sx += osx;
    nan = nan || onan;
  }
  __device__ __forceinline__ void WarpMerge() {
    for (int mask = kWarpSize / 2; mask > 0; mask /= 2) {
      const A om = ShflXor(m, mask), os = ShflXor(s, mask), osx = ShflXor(sx, mask);
      const bool onan = ShflXor(static_cast<int>(nan), mask) != 0;
      Merge(om, os, osx, onan);
    }
  }
  __device__ __forceinline__ A Lse() const {
    if (nan) return std::numeric_limits<A>::quiet_NaN();
    return row::IsInf(m) ? m : m + row::Log(s);
  }
};

// Per row: lse[r] and loss_rows[r]. kBlock: a block per row, else a warp per row.
template <typename T, int kPack, bool kBlock>
__global__ void __launch_bounds__(kBlock ? row::kRowBlockThreads : row::kWarpBlockThreads)
    CrossEntropyRowsKernel(const T* x, const int64_t* target, int64_t rows, int64_t c,
                           int64_t ignore_index, Acc<T> smoothing, Acc<T>* lse, Acc<T>* loss_rows) {
  using A = Acc<T>;
  __shared__ A sm_m[kWarpSize], sm_s[kWarpSize], sm_sx[kWarpSize];
  __shared__ int sm_nan[kWarpSize];
  const int group = kBlock ? static_cast<int>(blockDim.x) : kWarpSize;
  const int64_t per_block = blockDim.x / group;
  const int t = threadIdx.x % group;
  for (int64_t r = blockIdx.x * per_block + threadIdx.x / group; r < rows;
       r += static_cast<int64_t>(gridDim.x) * per_block) {
    const T* xr = x + r * c;
    Online<A> o;
    for (int64_t j = static_cast<int64_t>(t) * kPack; j < c;
         j += static_cast<int64_t>(group) * kPack) {
      const row::Pack<T, kPack> p = row::LoadPack<T, kPack>(xr + j);
#pragma unroll
      for (int k = 0; k < kPack; ++k) o.Add(Load(p.v[k]));
    }
    o.WarpMerge();
    if constexpr (kBlock) {
      const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
      __syncthreads();  // the previous row's reads of the slots are done
      if (lane == 0) {
        sm_m[warp] = o.m;
        sm_s[warp] = o.s;
        sm_sx[warp] = o.sx;
        sm_nan[warp] = o.nan;
      }
      __syncthreads();
      o = Online<A>();
      for (int w = 0; w < static_cast<int>(blockDim.x) / kWarpSize; ++w) {
        o.Merge(sm_m[w], sm_s[w], sm_sx[w], sm_nan[w] != 0);
      }
    }
    if (t == 0) {
      const A l = o.Lse();
      lse[r] = l;
      const int64_t tg = target[r];
      A loss = 0;
      if (tg != ignore_index && tg >= 0 && tg < c) {
        loss = l - (A(1) - smoothing) * Load(xr[tg]);
        if (smoothing != A(0)) loss -= smoothing / static_cast<A>(c) * o.sx;
      }
      loss_rows[r] = loss;
    }
  }
}

// One block: y (none: per row; sum, mean: y[0]) and *bad = the first row whose target is out
// of [0, c) and not ignore_index (left alone when there is none). rows may be 0.
template <typename T>
__global__ void __launch_bounds__(kFinishThreads)
    CrossEntropyFinishKernel(const Acc<T>* loss_rows, const int64_t* target, int64_t rows,
                             int64_t c, int64_t ignore_index, int reduction, T* y,
                             unsigned long long* bad) {
  __shared__ double sm_total[kWarpSize];
  __shared__ int64_t sm_count[kWarpSize];
  __shared__ unsigned long long sm_bad[kWarpSize];
  double total = 0;
  int64_t count = 0;
  unsigned long long first_bad = ~0ull;
  for (int64_t j = threadIdx.x; j < rows; j += blockDim.x) {
    const int64_t tg = target[j];
    if (reduction == kNone) y[j] = Store<T>(loss_rows[j]);
    if (tg == ignore_index) continue;
    if (tg < 0 || tg >= c) {
      if (static_cast<unsigned long long>(j) < first_bad) first_bad = j;
      continue;
    }
    total += static_cast<double>(loss_rows[j]);
    ++count;
  }
  total = BlockReduce(total, SumOf<double>, 0.0, sm_total);
  count = BlockReduce(count, SumOf<int64_t>, int64_t{0}, sm_count);
  auto min_of = [](unsigned long long a, unsigned long long b) { return a < b ? a : b; };
  first_bad = BlockReduce(first_bad, min_of, ~0ull, sm_bad);
  if (threadIdx.x == 0) {
    // No kept targets: 0 for sum and 0 / 0 = nan for mean, as nll_loss.
    if (reduction != kNone) {
      y[0] = Store<T>(reduction == kMean ? total / static_cast<double>(count) : total);
    }
    if (first_bad != ~0ull) *bad = first_bad;
  }
}

// One block: *count = the number of targets that are not ignore_index.
__global__ void __launch_bounds__(kFinishThreads)
    CountKeptKernel(const int64_t* target, int64_t rows, int64_t ignore_index, int64_t* count) {
  __shared__ int64_t smem[kWarpSize];
  int64_t n = 0;
  for (int64_t j = threadIdx.x; j < rows; j += blockDim.x) n += target[j] != ignore_index;
  n = BlockReduce(n, SumOf<int64_t>, int64_t{0}, smem);
  if (threadIdx.x == 0) *count = n;
}

template <typename T, int kPack, bool kBlock>
__global__ void __launch_bounds__(kBlock ? row::kRowBlockThreads : row::kWarpBlockThreads)
    CrossEntropyGradKernel(const T* dy, const T* x, const int64_t* target, const Acc<T>* lse,
                           int64_t rows, int64_t c, int64_t ignore_index, Acc<T> smoothing,
                           int reduction, const int64_t* count, T* dx) {
  using A = Acc<T>;
  const int group = kBlock ? static_cast<int>(blockDim.x) : kWarpSize;
  const int64_t per_block = blockDim.x / group;
  const int t = threadIdx.x % group;
  const A off = smoothing / static_cast<A>(c), on = A(1) - smoothing;
  for (int64_t r = blockIdx.x * per_block + threadIdx.x / group; r < rows;
       r += static_cast<int64_t>(gridDim.x) * per_block) {
    const int64_t tg = target[r];
    A scale = 0;
    if (tg != ignore_index) {
      scale = Load(dy[reduction == kNone ? r : 0]);
      if (reduction == kMean) scale /= static_cast<A>(*count);
    }
    const A l = lse[r];
    const T* xr = x + r * c;
    T* dxr = dx + r * c;
    for (int64_t j = static_cast<int64_t>(t) * kPack; j < c;
         j += static_cast<int64_t>(group) * kPack) {
      const row::Pack<T, kPack> p = row::LoadPack<T, kPack>(xr + j);
      row::Pack<T, kPack> o;
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        const A hot = j + k == tg ? on : A(0);
        o.v[k] = Store<T>(scale * (row::Exp(Load(p.v[k]) - l) - hot - off));
      }
      row::StorePack<T, kPack>(dxr + j, o);
    }
  }
}

// ---------------------------------------------------------------- launching

// Calls f(kPack, kBlock) for a row length c and the pointers the kernel moves packs of.
template <typename T, typename F>
void WithRowKernel(int64_t c, std::initializer_list<const void*> ptrs, F&& f) {
  const bool block = c > row::kWarpRowMax;
  const bool wide = row::PackFor<T>(c, ptrs) > 1;
  auto go = [&](auto kPack) {
    if (block) {
      f(kPack, std::true_type{});
    } else {
      f(kPack, std::false_type{});
    }
  };
  if (wide) {
    go(std::integral_constant<int, row::kMaxPack<T>>{});
  } else {
    go(std::integral_constant<int, 1>{});
  }
}

inline unsigned RowKernelBlocks(int64_t rows, bool block) {
  return block ? row::RowBlocks(rows, 1) : row::RowBlocks(rows, row::kWarpBlockThreads / kWarpSize);
}

// y: rows elements (none) or 1; lse, loss_rows: rows elements of Acc<T>; bad: a device word
// holding ~0 (set to the first bad row, if any). REQUIRES: rows >= 0, c >= 1.
template <typename T>
void Forward(const T* x, const int64_t* target, int64_t rows, int64_t c, int64_t ignore_index,
             double smoothing, int reduction, T* y, Acc<T>* lse, Acc<T>* loss_rows,
             unsigned long long* bad, cudaStream_t stream) {
  WithRowKernel<T>(c, {x}, [&](auto kPack, auto kBlock) {
    constexpr bool b = decltype(kBlock)::value;
    OF_CUDA_LAUNCH((CrossEntropyRowsKernel<T, decltype(kPack)::value, b>), RowKernelBlocks(rows, b),
                   b ? row::kRowBlockThreads : row::kWarpBlockThreads, 0, stream, x, target, rows,
                   c, ignore_index, static_cast<Acc<T>>(smoothing), lse, loss_rows);
  });
  OF_CUDA_LAUNCH(CrossEntropyFinishKernel<T>, 1, kFinishThreads, 0, stream, loss_rows, target, rows,
                 c, ignore_index, reduction, y, bad);
}

// count: a device int64 for mean (unused otherwise). REQUIRES: rows >= 1, c >= 1.
template <typename T>
void Backward(const T* dy, const T* x, const int64_t* target, const Acc<T>* lse, int64_t rows,
              int64_t c, int64_t ignore_index, double smoothing, int reduction, int64_t* count,
              T* dx, cudaStream_t stream) {
  if (reduction == kMean) {
    OF_CUDA_LAUNCH(CountKeptKernel, 1, kFinishThreads, 0, stream, target, rows, ignore_index,
                   count);
  }
  WithRowKernel<T>(c, {x, dx}, [&](auto kPack, auto kBlock) {
    constexpr bool b = decltype(kBlock)::value;
    OF_CUDA_LAUNCH((CrossEntropyGradKernel<T, decltype(kPack)::value, b>), RowKernelBlocks(rows, b),
                   b ? row::kRowBlockThreads : row::kWarpBlockThreads, 0, stream, dy, x, target,
                   lse, rows, c, ignore_index, static_cast<Acc<T>>(smoothing), reduction, count,
                   dx);
  });
}

}  // namespace cross_entropy
}  // namespace cuda
}  // namespace oneflow
