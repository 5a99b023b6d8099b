// layer_norm and rms_norm over rows of d elements (core/ops/nn/layer_norm.cc), forward and
// backward, in the accumulation type Acc<T> (float for float and the half types, double for
// double):
//   - rows up to row::kWarpRowMax: a warp per row, the row in registers (kIters packs of kPack
//     elements per lane, 16-byte accesses when the rows are aligned); the statistics in two
//     passes over the registers (mean, then the sum of squared deviations);
//   - longer rows: a block per row, reading the row from global memory in each pass (it stays
//     in L1/L2 between passes);
//   - dweight and dbias: blocks over tiles of rows write partial column sums [tiles, 2, d]; a
//     second kernel adds each column's partials in a fixed order (deterministic, no atomics).
// rms_norm is the same with the mean taken as 0 (y = x * rstd * w) and no bias.
//
//   norm::Forward<T>(x, w, b, y, mean, rstd, rows, d, eps, /*rms=*/false, stream);
//   norm::BackwardInput<T>(dy, x, mean, rstd, w, dx, rows, d, /*rms=*/false, stream);
//   norm::BackwardParams<T>(dy, x, mean, rstd, dw, db, rows, d, rms, partial, stream);
//     // partial: norm::ParamPartialElems(rows, d) elements of Acc<T> in device memory
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/kernels/row_util.cuh"
#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/cuda/reduce_util.cuh"

namespace oneflow {
namespace cuda {
namespace norm {

// ---------------------------------------------------------------- forward

// y = (x - mean) * rstd * w + b over each row (w, b may be null; mean is 0 and not written for
// rms). mean and rstd are stored per row in T.
template <typename T, int kPack, int kIters>
__global__ void __launch_bounds__(row::kWarpBlockThreads)
    NormWarpKernel(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t rows, int d,
                   Acc<T> eps, bool rms) {
  using A = Acc<T>;
  constexpr int kWarps = row::kWarpBlockThreads / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / kWarpSize; r < rows;
       r += static_cast<int64_t>(gridDim.x) * kWarps) {
    const T* xr = x + r * d;
    A v[kIters][kPack];
    A sum = 0;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int c = (i * kWarpSize + lane) * kPack;
      if (c < d) {
        const row::Pack<T, kPack> p = row::LoadPack<T, kPack>(xr + c);
#pragma unroll
        for (int k = 0; k < kPack; ++k) {
          v[i][k] = Load(p.v[k]);
          sum += v[i][k];
        }
      } else {
#pragma unroll
        for (int k = 0; k < kPack; ++k) v[i][k] = 0;
      }
    }
    const A mu = rms ? A(0) : WarpReduce(sum, SumOf<A>) / d;
    A sq = 0;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      if ((i * kWarpSize + lane) * kPack < d) {
#pragma unroll
        for (int k = 0; k < kPack; ++k) sq += (v[i][k] - mu) * (v[i][k] - mu);
      }
    }
    const A rs = row::Rsqrt(WarpReduce(sq, SumOf<A>) / d + eps);
    if (lane == 0) {
      if (!rms) mean[r] = Store<T>(mu);
      rstd[r] = Store<T>(rs);
    }
    T* yr = y + r * d;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int c = (i * kWarpSize + lane) * kPack;
      if (c >= d) continue;
      row::Pack<T, kPack> o, pw{}, pb{};
      if (w != nullptr) pw = row::LoadPack<T, kPack>(w + c);
      if (b != nullptr) pb = row::LoadPack<T, kPack>(b + c);
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        A e = (v[i][k] - mu) * rs;
        if (w != nullptr) e *= Load(pw.v[k]);
        if (b != nullptr) e += Load(pb.v[k]);
        o.v[k] = Store<T>(e);
      }
      row::StorePack<T, kPack>(yr + c, o);
    }
  }
}

// NormWarpKernel for rows longer than a warp holds: a block per row.
template <typename T>
__global__ void __launch_bounds__(row::kRowBlockThreads)
    NormBlockKernel(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t rows,
                    int64_t d, Acc<T> eps, bool rms) {
  using A = Acc<T>;
  __shared__ A smem[kWarpSize];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * d;
    A mu = 0;
    if (!rms) {
      A sum = 0;
      for (int64_t c = threadIdx.x; c < d; c += blockDim.x) sum += Load(xr[c]);
      mu = BlockReduce(sum, SumOf<A>, A(0), smem) / d;
    }
    A sq = 0;
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
      const A e = Load(xr[c]) - mu;
      sq += e * e;
    }
    const A rs = row::Rsqrt(BlockReduce(sq, SumOf<A>, A(0), smem) / d + eps);
    if (threadIdx.x == 0) {
      if (!rms) mean[r] = Store<T>(mu);
      rstd[r] = Store<T>(rs);
    }
    T* yr = y + r * d;
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
      A e = (Load(xr[c]) - mu) * rs;
      if (w != nullptr) e *= Load(w[c]);
      if (b != nullptr) e += Load(b[c]);
      yr[c] = Store<T>(e);
    }
  }
}

// ---------------------------------------------------------------- dx
// xhat = (x - mean) rstd, g = dy w: dx = rstd (g - mean(g) - xhat mean(g xhat)); for rms the
// mean is 0 and the mean(g) term drops.

template <typename T, int kPack, int kIters>
__global__ void __launch_bounds__(row::kWarpBlockThreads)
    NormGradWarpKernel(const T* dy, const T* x, const T* mean, const T* rstd, const T* w, T* dx,
                       int64_t rows, int d, bool rms) {
  using A = Acc<T>;
  constexpr int kWarps = row::kWarpBlockThreads / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / kWarpSize; r < rows;
       r += static_cast<int64_t>(gridDim.x) * kWarps) {
    const A m = rms ? A(0) : Load(mean[r]), rs = Load(rstd[r]);
    A xh[kIters][kPack], g[kIters][kPack];
    A sg = 0, sgx = 0;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int c = (i * kWarpSize + lane) * kPack;
      if (c < d) {
        const row::Pack<T, kPack> px = row::LoadPack<T, kPack>(x + r * d + c);
        const row::Pack<T, kPack> pdy = row::LoadPack<T, kPack>(dy + r * d + c);
        row::Pack<T, kPack> pw{};
        if (w != nullptr) pw = row::LoadPack<T, kPack>(w + c);
#pragma unroll
        for (int k = 0; k < kPack; ++k) {
          xh[i][k] = (Load(px.v[k]) - m) * rs;
          g[i][k] = w != nullptr ? Load(pdy.v[k]) * Load(pw.v[k]) : Load(pdy.v[k]);
          sg += g[i][k];
          sgx += g[i][k] * xh[i][k];
        }
      } else {
#pragma unroll
        for (int k = 0; k < kPack; ++k) xh[i][k] = g[i][k] = 0;
      }
    }
    const A mg = rms ? A(0) : WarpReduce(sg, SumOf<A>) / d;
    const A mgx = WarpReduce(sgx, SumOf<A>) / d;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int c = (i * kWarpSize + lane) * kPack;
      if (c >= d) continue;
      row::Pack<T, kPack> o;
#pragma unroll
      for (int k = 0; k < kPack; ++k) o.v[k] = Store<T>(rs * (g[i][k] - mg - xh[i][k] * mgx));
      row::StorePack<T, kPack>(dx + r * d + c, o);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(row::kRowBlockThreads)
    NormGradBlockKernel(const T* dy, const T* x, const T* mean, const T* rstd, const T* w, T* dx,
                        int64_t rows, int64_t d, bool rms) {
  using A = Acc<T>;
  __shared__ A smem[kWarpSize];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * d;
    const T* dyr = dy + r * d;
    const A m = rms ? A(0) : Load(mean[r]), rs = Load(rstd[r]);
    A sg = 0, sgx = 0;
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
      const A g = w != nullptr ? Load(dyr[c]) * Load(w[c]) : Load(dyr[c]);
      sg += g;
      sgx += g * ((Load(xr[c]) - m) * rs);
    }
    const A mg = rms ? A(0) : BlockReduce(sg, SumOf<A>, A(0), smem) / d;
    const A mgx = BlockReduce(sgx, SumOf<A>, A(0), smem) / d;
    T* dxr = dx + r * d;
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
      const A g = w != nullptr ? Load(dyr[c]) * Load(w[c]) : Load(dyr[c]);
      dxr[c] = Store<T>(rs * (g - mg - (Load(xr[c]) - m) * rs * mgx));
    }
  }
}

// ---------------------------------------------------------------- dweight, dbias
// dweight = sum over rows of dy xhat, dbias = sum over rows of dy. Blocks of 32 columns by
// kParamLanes lanes of rows: stage 1 sums a tile of rows per block into partial[tile][0|1][col]
// (the lanes combined in lane order), stage 2 sums the tiles of each column (lane j taking
// tiles j, j + kParamLanes, ..., then the lanes in order). Both orders depend on the shape only.

constexpr int kParamLanes = 8;
constexpr int kParamThreads = kWarpSize * kParamLanes;
constexpr int64_t kMaxParamTiles = 128;

// Rows per tile: at least 64, a multiple of kParamLanes, at most kMaxParamTiles tiles.
inline int64_t ParamTileRows(int64_t rows) {
  int64_t t = std::max<int64_t>(64, (rows + kMaxParamTiles - 1) / kMaxParamTiles);
  return (t + kParamLanes - 1) / kParamLanes * kParamLanes;
}
inline int64_t ParamTiles(int64_t rows) {
  return std::max<int64_t>(1, (rows + ParamTileRows(rows) - 1) / ParamTileRows(rows));
}
// Elements of Acc<T> BackwardParams needs for its partial sums.
inline int64_t ParamPartialElems(int64_t rows, int64_t d) { return ParamTiles(rows) * 2 * d; }

template <typename T>
__global__ void __launch_bounds__(kParamThreads)
    NormParamPartialKernel(const T* dy, const T* x, const T* mean, const T* rstd, int64_t rows,
                           int64_t d, int64_t tile_rows, int64_t col_tiles, bool rms,
                           Acc<T>* partial) {
  using A = Acc<T>;
  __shared__ A sums[2][kParamLanes][kWarpSize + 1];
  const int tx = threadIdx.x % kWarpSize, ty = threadIdx.x / kWarpSize;
  const int64_t tile = blockIdx.x / col_tiles;
  const int64_t c = blockIdx.x % col_tiles * kWarpSize + tx;
  const int64_t r1 = (tile + 1) * tile_rows < rows ? (tile + 1) * tile_rows : rows;
  A sw = 0, sb = 0;
  if (c < d) {
    for (int64_t r = tile * tile_rows + ty; r < r1; r += kParamLanes) {
      const A g = Load(dy[r * d + c]);
      const A m = rms ? A(0) : Load(mean[r]);
      sw += g * ((Load(x[r * d + c]) - m) * Load(rstd[r]));
      sb += g;
    }
  }
  sums[0][ty][tx] = sw;
  sums[1][ty][tx] = sb;
  __syncthreads();
  if (ty < 2 && c < d) {
    A s = sums[ty][0][tx];
    for (int j = 1; j < kParamLanes; ++j) s += sums[ty][j][tx];
    partial[(tile * 2 + ty) * d + c] = s;
  }
}

template <typename T>
__global__ void __launch_bounds__(kParamThreads)
    NormParamFinalKernel(const Acc<T>* partial, int64_t tiles, int64_t d, T* dw, T* db) {
  using A = Acc<T>;
  __shared__ A sums[2][kParamLanes][kWarpSize + 1];
  const int tx = threadIdx.x % kWarpSize, ty = threadIdx.x / kWarpSize;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kWarpSize + tx;
  A sw = 0, sb = 0;
  if (c < d) {
    for (int64_t t = ty; t < tiles; t += kParamLanes) {
      sw += partial[(t * 2) * d + c];
      sb += partial[(t * 2 + 1) * d + c];
    }
  }
  sums[0][ty][tx] = sw;
  sums[1][ty][tx] = sb;
  __syncthreads();
  if (ty < 2 && c < d) {
    A s = sums[ty][0][tx];
    for (int j = 1; j < kParamLanes; ++j) s += sums[ty][j][tx];
    T* out = ty == 0 ? dw : db;
    if (out != nullptr) out[c] = Store<T>(s);
  }
}

// ---------------------------------------------------------------- launching

inline unsigned WarpRowBlocks(int64_t rows) {
  return row::RowBlocks(rows, row::kWarpBlockThreads / kWarpSize);
}

// REQUIRES: rows >= 1, d >= 1; x, y contiguous rows of d; w, b of d or null.
template <typename T>
void Forward(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t rows, int64_t d,
             double eps, bool rms, cudaStream_t stream) {
  const Acc<T> e = static_cast<Acc<T>>(eps);
  if (d <= row::kWarpRowMax) {
    const int pack = row::PackFor<T>(d, {x, y, w, b});
    row::WithWarpIters<T>(pack, d, [&](auto kPack, auto kIters) {
      OF_CUDA_LAUNCH((NormWarpKernel<T, decltype(kPack)::value, decltype(kIters)::value>),
                     WarpRowBlocks(rows), row::kWarpBlockThreads, 0, stream, x, w, b, y, mean, rstd,
                     rows, static_cast<int>(d), e, rms);
    });
  } else {
    OF_CUDA_LAUNCH(NormBlockKernel<T>, row::RowBlocks(rows, 1), row::kRowBlockThreads, 0, stream, x,
                   w, b, y, mean, rstd, rows, d, e, rms);
  }
}

template <typename T>
void BackwardInput(const T* dy, const T* x, const T* mean, const T* rstd, const T* w, T* dx,
                   int64_t rows, int64_t d, bool rms, cudaStream_t stream) {
  if (d <= row::kWarpRowMax) {
    const int pack = row::PackFor<T>(d, {dy, x, dx, w});
    row::WithWarpIters<T>(pack, d, [&](auto kPack, auto kIters) {
      OF_CUDA_LAUNCH((NormGradWarpKernel<T, decltype(kPack)::value, decltype(kIters)::value>),
                     WarpRowBlocks(rows), row::kWarpBlockThreads, 0, stream, dy, x, mean, rstd, w,
                     dx, rows, static_cast<int>(d), rms);
    });
  } else {
    OF_CUDA_LAUNCH(NormGradBlockKernel<T>, row::RowBlocks(rows, 1), row::kRowBlockThreads, 0,
                   stream, dy, x, mean, rstd, w, dx, rows, d, rms);
  }
}

// dw (and db unless null) over all rows; rows may be 0 (zeros).
template <typename T>
void BackwardParams(const T* dy, const T* x, const T* mean, const T* rstd, T* dw, T* db,
                    int64_t rows, int64_t d, bool rms, Acc<T>* partial, cudaStream_t stream) {
  const int64_t tiles = ParamTiles(rows), col_tiles = CeilDiv(d, kWarpSize);
  OF_CUDA_LAUNCH(NormParamPartialKernel<T>, static_cast<unsigned>(tiles * col_tiles), kParamThreads,
                 0, stream, dy, x, mean, rstd, rows, d, ParamTileRows(rows), col_tiles, rms,
                 partial);
  OF_CUDA_LAUNCH(NormParamFinalKernel<T>, static_cast<unsigned>(col_tiles), kParamThreads, 0,
                 stream, partial, tiles, d, dw, db);
}

}  // namespace norm
}  // namespace cuda
}  // namespace oneflow
