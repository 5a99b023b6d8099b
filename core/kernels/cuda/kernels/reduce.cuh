// The reduction kernels of core/kernels/cuda/reduce.cu (sum, prod, max_dim, min_dim), in the
// form the host stand-in runs (tests/cuda_host/reduce_test.cc).
//
// Every reduction runs on a contiguous input seen as (outer, r, inner), reducing r: the rows
// kernel takes inner == 1 (a warp per row, reading along it), the columns kernel inner > 1 (a
// block per 32 columns, reading across them). When outer * inner outputs are too few to fill
// the device, r is cut into chunks reduced to partials, which the next pass reduces again, so
// no result depends on atomics: sums are deterministic and equal the CPU's up to rounding.
//
//   std::vector<Tensor> keep;  // scratch that must outlive the launches
//   auto alloc = [&](size_t bytes) { keep.push_back(Tensor::Empty(...)); return ptr; };
//   cuda::ReduceSum<functors::SumR, float, double, float>(x, y, {outer, r, inner}, stream, alloc);
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/cuda/reduce_util.cuh"

namespace oneflow {
namespace cuda {

// A contiguous input seen as (outer, r, inner); r is reduced.
struct ReduceLayout {
  int64_t outer = 1, r = 1, inner = 1;
};

// How r is cut: `chunks` pieces of `chunk` elements (the last may be shorter, none is empty).
struct ReduceChunking {
  int64_t chunks = 1, chunk = 1;
};

constexpr int kReduceThreads = 256;  // the rows kernel's block: 8 warps, a row each
constexpr int kReduceColRows = 8;    // the columns kernel's block is 32 columns by 8 rows
// Enough independent work to fill an H100 (132 SMs, 64 warps each) several times over.
constexpr int64_t kReduceTargetWarps = 32768;
constexpr int64_t kReduceTargetBlocks = 4096;
// A chunk is worth a pass only when each thread of it still reads a few dozen elements.
constexpr int64_t kReduceMinRowChunk = 32 * kWarpSize;
constexpr int64_t kReduceMinColChunk = 32 * kReduceColRows;
// Grid-stride loops cover items past this many blocks.
constexpr int64_t kReduceMaxBlocks = 65535 * 32;

inline ReduceChunking ReduceChunkingFor(const ReduceLayout& l) {
  int64_t want, most;
  if (l.inner == 1) {
    want = CeilDiv(kReduceTargetWarps, l.outer);
    most = CeilDiv(l.r, kReduceMinRowChunk);
  } else {
    want = CeilDiv(kReduceTargetBlocks, l.outer * CeilDiv(l.inner, kWarpSize));
    most = CeilDiv(l.r, kReduceMinColChunk);
  }
  ReduceChunking c;
  c.chunks = std::max<int64_t>(1, std::min(want, most));
  c.chunk = std::max<int64_t>(1, CeilDiv(l.r, c.chunks));
  c.chunks = std::max<int64_t>(1, CeilDiv(l.r, c.chunk));
  return c;
}

// Op: V Identity(), V Combine(V, V), V Load(element index, index along r) and
// Store(output index, V). Output (row, chunk) is stored at row * chunks + chunk.
template <typename Op>
__global__ void ReduceRowsKernel(Op op, int64_t rows, int64_t r, ReduceChunking c) {
  const int64_t warps_per_block = blockDim.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t items = rows * c.chunks;
  auto combine = [&](auto a, auto b) { return op.Combine(a, b); };
  // Every lane of a warp takes the same items: the warp reduces together.
  for (int64_t item = blockIdx.x * warps_per_block + threadIdx.x / kWarpSize; item < items;
       item += gridDim.x * warps_per_block) {
    const int64_t row = item / c.chunks;
    const int64_t begin = item % c.chunks * c.chunk;
    const int64_t end = std::min(r, begin + c.chunk);
    auto v = op.Identity();
    for (int64_t k = begin + lane; k < end; k += kWarpSize) {
      v = op.Combine(v, op.Load(row * r + k, k));
    }
    v = WarpReduce(v, combine);
    if (lane == 0) op.Store(item, v);
  }
}

// Output (o, chunk, i) is stored at (o * chunks + chunk) * inner + i.
template <typename Op>
__global__ void ReduceColsKernel(Op op, int64_t outer, int64_t r, int64_t inner, ReduceChunking c) {
  using V = decltype(op.Identity());
  __shared__ V partial[kReduceColRows][kWarpSize];
  const int64_t tiles = CeilDiv(inner, kWarpSize);
  const int64_t items = outer * c.chunks * tiles;
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t oc = item / tiles;  // o * chunks + chunk
    const int64_t o = oc / c.chunks;
    const int64_t i = item % tiles * kWarpSize + tx;
    const int64_t begin = oc % c.chunks * c.chunk;
    const int64_t end = std::min(r, begin + c.chunk);
    V v = op.Identity();
    if (i < inner) {
      for (int64_t k = begin + ty; k < end; k += kReduceColRows) {
        v = op.Combine(v, op.Load((o * r + k) * inner + i, k));
      }
    }
    partial[ty][tx] = v;
    __syncthreads();
    if (ty == 0 && i < inner) {
      for (int j = 1; j < kReduceColRows; ++j) v = op.Combine(v, partial[j][tx]);
      op.Store(oc * inner + i, v);
    }
    __syncthreads();  // partial is rewritten by the next item
  }
}

// One pass: the outputs of (outer, chunks, inner).
template <typename Op>
void LaunchReduce(const Op& op, const ReduceLayout& l, const ReduceChunking& c,
                  cudaStream_t stream) {
  if (l.inner == 1) {
    const int64_t warps = kReduceThreads / kWarpSize;
    const int64_t blocks = std::min(CeilDiv(l.outer * c.chunks, warps), kReduceMaxBlocks);
    OF_CUDA_LAUNCH(ReduceRowsKernel<Op>, blocks, kReduceThreads, 0, stream, op, l.outer, l.r, c);
  } else {
    const int64_t items = l.outer * c.chunks * CeilDiv(l.inner, kWarpSize);
    OF_CUDA_LAUNCH(ReduceColsKernel<Op>, std::min(items, kReduceMaxBlocks),
                   dim3(kWarpSize, kReduceColRows), 0, stream, op, l.outer, l.r, l.inner, c);
  }
}

// ---------------------------------------------------------------- sum, prod

// R: a combine with Identity<A>() and operator()(A, A) (core/ops/reduce_functors.h).
template <typename In, typename A, typename Out, typename R>
struct SumOp {
  const In* x;
  Out* y;
  __device__ A Identity() const { return R::template Identity<A>(); }
  __device__ A Combine(A a, A b) const { return R()(a, b); }
  __device__ A Load(int64_t i, int64_t) const { return static_cast<A>(x[i]); }
  __device__ void Store(int64_t i, A v) const { y[i] = static_cast<Out>(v); }
};

// y = x reduced by R over r, accumulating in A; partial passes keep A in scratch from
// alloc(bytes) (void*, valid until the launches are done).
template <typename R, typename In, typename A, typename Out, typename Alloc>
void ReduceSum(const In* x, Out* y, const ReduceLayout& l, cudaStream_t stream, Alloc& alloc) {
  const ReduceChunking c = ReduceChunkingFor(l);
  if (c.chunks == 1) {
    LaunchReduce(SumOp<In, A, Out, R>{x, y}, l, c, stream);
    return;
  }
  A* partial = static_cast<A*>(alloc(sizeof(A) * l.outer * c.chunks * l.inner));
  LaunchReduce(SumOp<In, A, A, R>{x, partial}, l, c, stream);
  ReduceSum<R, A, A, Out>(partial, y, ReduceLayout{l.outer, c.chunks, l.inner}, stream, alloc);
}

// ---------------------------------------------------------------- max_dim, min_dim

// A candidate extreme and its index along the reduced dim; i < 0 marks "none yet".
template <typename W>
struct ArgVal {
  W v;
  int64_t i;
};

template <typename W>
__device__ __forceinline__ ArgVal<W> ShflXor(ArgVal<W> a, int mask) {
  return {ShflXor(a.v, mask), ShflXor(a.i, mask)};
}

template <typename W>
__device__ __forceinline__ bool IsNan(W v) {
  if constexpr (std::is_floating_point_v<W>) {
    return isnan(v);
  } else {
    return false;
  }
}

// The CPU scans in order and keeps the first NaN, else the first extreme; as a combine that
// is: NaN beats numbers, then the larger (smaller) value, then the lower index.
template <typename In, typename W, typename Out, bool kMax>
struct ArgOp {
  const In* x;
  const int64_t* x_index;  // indices of partials; null when x is the input itself
  Out* y;
  int64_t* y_index;

  __device__ ArgVal<W> Identity() const { return {W(0), -1}; }
  __device__ ArgVal<W> Combine(ArgVal<W> a, ArgVal<W> b) const {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    const bool a_nan = IsNan(a.v), b_nan = IsNan(b.v);
    if (a_nan != b_nan) return a_nan ? a : b;
    if (!a_nan) {
      if (kMax ? b.v > a.v : b.v < a.v) return b;
      if (kMax ? a.v > b.v : a.v < b.v) return a;
    }
    return a.i < b.i ? a : b;
  }
  __device__ ArgVal<W> Load(int64_t i, int64_t k) const {
    return {static_cast<W>(x[i]), x_index ? x_index[i] : k};
  }
  __device__ void Store(int64_t i, ArgVal<W> v) const {
    y[i] = static_cast<Out>(v.v);
    y_index[i] = v.i;
  }
};

// y, y_index = the extreme of x over r and its first index; values travel as W (T for floats,
// int64 for integers and bool: same order, shuffles well). Scratch as in ReduceSum.
template <typename In, typename W, typename T, bool kMax, typename Alloc>
void ReduceArg(const In* x, const int64_t* x_index, T* y, int64_t* y_index, const ReduceLayout& l,
               cudaStream_t stream, Alloc& alloc) {
  const ReduceChunking c = ReduceChunkingFor(l);
  if (c.chunks == 1) {
    LaunchReduce(ArgOp<In, W, T, kMax>{x, x_index, y, y_index}, l, c, stream);
    return;
  }
  const int64_t n = l.outer * c.chunks * l.inner;
  W* pv = static_cast<W*>(alloc(sizeof(W) * n));
  int64_t* pi = static_cast<int64_t*>(alloc(sizeof(int64_t) * n));
  LaunchReduce(ArgOp<In, W, W, kMax>{x, x_index, pv, pi}, l, c, stream);
  ReduceArg<W, W, T, kMax>(pv, pi, y, y_index, ReduceLayout{l.outer, c.chunks, l.inner}, stream,
                           alloc);
}

}  // namespace cuda
}  // namespace oneflow
