// Fused scaled dot product attention (flash-attention style) for the op in
// core/ops/nn/attention.cc: softmax(q k^T * scale + mask) v over [batch, L, E] / [batch, S, E] /
// [batch, S, Ev] contiguous operands, the softmax computed online in float and never stored.
//
//   Params p = ...;  // shapes, scale, causal, mask view, dropout
//   OF_CUDA_LAUNCH((AttentionForwardKernel<float, 64>), ForwardBlocks<64>(p),
//                  ForwardThreads<64>(), ForwardSmemBytes<64>(), stream, p, q, k, v, out, lse);
//
// Layout of the work (kD = 64 or 128: the largest of E and Ev rounded up; blocks of 256
// threads):
//   - a row (a query row forward and for dq, a key row for dk/dv) belongs to kG = kD / kPer
//     consecutive lanes (kPer = 16 dims per lane forward, 8 backward); lane g of a row owns the
//     dims d = dd * kG + g, dd < kPer, so its accumulators stay in registers; dot products over
//     the dims are a partial sum per lane and a butterfly over the row's kG lanes (every lane of
//     the row ends with the same float: the sums are commutative);
//   - a block holds 256 / kG rows (forward: 64 for kD 64, 32 for 128; backward 32 and 16), the
//     other operand passes through shared memory in tiles (forward 32 key rows, backward 8
//     rows) stored transposed ([dim][row], rows padded by 4 floats so that the lanes of a row
//     read different banks and 16-byte loads stay aligned), zero past the end of S (L) or of
//     the head dim;
//   - causal attention (key j seen by query i when j <= i, top-left aligned) stops the forward
//     and dq loops at the block's last query row and starts the dk/dv loop at its first key;
//     the mask tensor (bool: keep where true; float: added to the scaled scores) is read
//     per element through MaskView (any broadcast of its dims);
//   - dropout keeps element (b, i, j) of the attention weights when the counter-based draw at
//     offset + ((batch_offset + b) * L + i) * S + j is >= p (rng::DropoutKeep,
//     core/ops/counter_rng.h: dropout_mask's generator), so the backward redraws the forward's
//     mask and the CPU kernel draws the same one.
// Backward: AttentionBackwardDotKernel (D_i = dout_i . out_i), AttentionBackwardQueryKernel
// (dq, a block per query rows over the key tiles) and AttentionBackwardKeyValueKernel (dk and
// dv, a block per key rows over the query tiles): each output written by one thread, no
// atomics, deterministic. P is recomputed from the forward's log-sum-exp per row.
//
// Shared memory per block: forward 2 * kD * 36 floats (18 KiB for kD 64, 36 KiB for 128);
// backward 2 * kD * 12 + 16 floats (6.1 / 12.1 KiB). ptxas (sm_90): 128 registers, no spills
// (the cap of __launch_bounds__(256, 2)).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/launch.cuh"
#include "core/ops/counter_rng.h"

// OF_ATTENTION_FENCE: a point the compiler may not move shared-memory loads across (every lane
// of the warp reaches it): without it, ptxas hoists the loads of a whole unrolled tile loop and
// spills (255 registers and ~1 KiB of spills in the backward kernels). The kernels'
// __launch_bounds__(256, 2) (Geometry::kThreads) caps the registers at 128 so that two blocks
// fit an SM.
#define OF_ATTENTION_FENCE() __syncwarp(0xffffffffu)

namespace oneflow {
namespace cuda {
namespace attention {

constexpr int kMaxMaskBatchDims = 6;

// Where element (b, i, j) of the mask lives: b the flat batch index over the batch dims `size`
// (innermost last), each with its stride in the mask (0 where the mask broadcasts).
struct MaskView {
  int kind = 0;  // 0: no mask, 1: bool (keep where true), 2: float added to the scores
  const bool* keep = nullptr;
  const float* add = nullptr;
  int nd = 0;
  int64_t size[kMaxMaskBatchDims] = {};
  int64_t stride[kMaxMaskBatchDims] = {};
  int64_t row_stride = 0, col_stride = 0;
};

struct Params {
  int64_t batch = 0, L = 0, S = 0, E = 0, Ev = 0;
  float scale = 1.f;
  bool causal = false;
  MaskView mask;
  bool dropout = false;
  uint64_t seed = 0, offset = 0;
  double drop_p = 0;
  float drop_scale = 1.f;    // 1 / (1 - p), 0 for p = 1
  int64_t batch_offset = 0;  // flat batch index of b = 0 in the logical tensor (dropout draws)
};

__host__ __device__ inline int64_t MaskBatchOffset(const MaskView& m, int64_t b) {
  int64_t off = 0;
  for (int d = m.nd - 1; d >= 0; --d) {
    off += (b % m.size[d]) * m.stride[d];
    b /= m.size[d];
  }
  return off;
}

// Whether dropout keeps element (b, i, j): the generator's draw at its counter is >= p
// (rng::DropoutKeep, as dropout_mask on the CPU and on CUDA).
__host__ __device__ inline bool DropoutKeeps(const Params& p, int64_t b, int64_t i, int64_t j) {
  const uint64_t c = p.offset + static_cast<uint64_t>(((p.batch_offset + b) * p.L + i) * p.S + j);
  return rng::DropoutKeep(p.seed, c, p.drop_p);
}

template <int kD, int kPer>
struct Geometry {
  static_assert(kD == 64 || kD == 128, "attention kernels are built for head dims 64 and 128");
  static constexpr int kG = kD / kPer;       // lanes per row
  static constexpr int kThreads = 256;       // the kernels' __launch_bounds__
  static constexpr int kBr = kThreads / kG;  // rows per block
};
constexpr int kPerFwd = 16, kPerBwd = 8;  // dims per lane, forward and backward
// Rows per tile of the operand in shared memory, and the padded row of a transposed tile. The
// backward's tile is 16 rows.
constexpr int kBcFwd = 32, kStFwd = kBcFwd + 4;
template <int kD>
constexpr int BackwardTile() {
  return 8;
}

template <int kD>
constexpr int ForwardThreads() {
  return Geometry<kD, kPerFwd>::kThreads;
}
template <int kD>
constexpr int BackwardThreads() {
  return Geometry<kD, kPerBwd>::kThreads;
}
template <int kD>
constexpr int ForwardSmemBytes() {
  return 2 * kD * kStFwd * static_cast<int>(sizeof(float));
}
template <int kD>
constexpr int BackwardSmemBytes() {
  return (2 * kD * (BackwardTile<kD>() + 4) + 2 * BackwardTile<kD>()) *
         static_cast<int>(sizeof(float));
}
// Blocks of the forward and dq kernels (a block per kBr query rows) and of the dk/dv kernel (a
// block per kBr keys); kBr is the same forward and backward.
template <int kD>
int64_t ForwardBlocks(const Params& p) {
  constexpr int br = Geometry<kD, kPerFwd>::kBr;
  return p.batch * ((p.L + br - 1) / br);
}
template <int kD>
int64_t BackwardQueryBlocks(const Params& p) {
  constexpr int br = Geometry<kD, kPerBwd>::kBr;
  return p.batch * ((p.L + br - 1) / br);
}
template <int kD>
int64_t BackwardKeyBlocks(const Params& p) {
  constexpr int br = Geometry<kD, kPerBwd>::kBr;
  return p.batch * ((p.S + br - 1) / br);
}

// Sums v over the kG lanes of a row (a butterfly: every lane gets the same float).
template <int kG>
__device__ __forceinline__ float RowSum(float v) {
#pragma unroll
  for (int off = 1; off < kG; off <<= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// tile[d * st + r] = x[(row0 + r) * width + d] in float for r < rows, d < kD; zero past `limit`
// rows or `width` dims.
template <typename T, int kD>
__device__ __forceinline__ void LoadTransposed(float* tile, int st, int rows, const T* x,
                                               int64_t row0, int64_t limit, int64_t width) {
  for (int idx = threadIdx.x; idx < rows * kD; idx += blockDim.x) {
    const int r = idx / kD, d = idx % kD;
    const bool in = row0 + r < limit && d < width;
    tile[d * st + r] = in ? static_cast<float>(Load(x[(row0 + r) * width + d])) : 0.f;
  }
}

// s[r] = the lane's part of the dot product of its row x (its P dims) with row r < Bc of the
// transposed tile xt ([dim][St]); RowSum completes it.
template <int P, int G, int Bc, int St>
__device__ __forceinline__ void PartialDots(const float* x, const float* xt, int g, float* s) {
#pragma unroll
  for (int r = 0; r < Bc; ++r) s[r] = 0.f;
#pragma unroll
  for (int dd = 0; dd < P; ++dd) {
    OF_ATTENTION_FENCE();
    const float xd = x[dd];
    const float4* row = reinterpret_cast<const float4*>(xt + (dd * G + g) * St);
#pragma unroll
    for (int c = 0; c < Bc / 4; ++c) {
      const float4 t = row[c];
      s[4 * c] += xd * t.x;
      s[4 * c + 1] += xd * t.y;
      s[4 * c + 2] += xd * t.z;
      s[4 * c + 3] += xd * t.w;
    }
  }
}

// acc[dd] += sum_r w[r] * (row r of the transposed tile xt)[the lane's dim dd], r < Bc.
template <int P, int G, int Bc, int St>
__device__ __forceinline__ void Accumulate(const float* w, const float* xt, int g, float* acc) {
#pragma unroll
  for (int dd = 0; dd < P; ++dd) {
    OF_ATTENTION_FENCE();
    const float4* row = reinterpret_cast<const float4*>(xt + (dd * G + g) * St);
    float a = acc[dd];
#pragma unroll
    for (int c = 0; c < Bc / 4; ++c) {
      const float4 t = row[c];
      a += w[4 * c] * t.x + w[4 * c + 1] * t.y + w[4 * c + 2] * t.z + w[4 * c + 3] * t.w;
    }
    acc[dd] = a;
  }
}

// The scaled, masked score of (i, j) or -inf where the element is masked; `ok` already says
// whether (i, j) is inside the matrix and the causal triangle.
__device__ __forceinline__ float MaskedScore(const Params& p, float dot, bool ok, int64_t mbase,
                                             int64_t i, int64_t j) {
  if (!ok) return -INFINITY;
  float x = dot * p.scale;
  if (p.mask.kind == 1) {
    if (!p.mask.keep[mbase + i * p.mask.row_stride + j * p.mask.col_stride]) return -INFINITY;
  } else if (p.mask.kind == 2) {
    x += p.mask.add[mbase + i * p.mask.row_stride + j * p.mask.col_stride];
  }
  return x;
}

// out[b, i] = softmax(s_i) V and lse[b, i] = log(sum_j exp(s_ij)) (-inf for a row whose every
// element is masked, whose output is then 0 / 0 = NaN as the softmax of such a row).
template <typename T, int kD>
__global__ void __launch_bounds__(256, 2)
    AttentionForwardKernel(Params p, const T* q, const T* k, const T* v, T* out, float* lse) {
  using Geo = Geometry<kD, kPerFwd>;
  constexpr int G = Geo::kG, P = kPerFwd, Bc = kBcFwd, St = kStFwd;
  OF_DYNAMIC_SMEM(float, smem);
  float* kt = smem;            // [kD][St]: the key tile, transposed
  float* vt = smem + kD * St;  // [kD][St]: the value tile, transposed
  const int64_t tiles = (p.L + Geo::kBr - 1) / Geo::kBr;
  const int64_t b = blockIdx.x / tiles, r0 = (blockIdx.x % tiles) * Geo::kBr;
  const int g = threadIdx.x % G;
  const int64_t i = r0 + threadIdx.x / G;
  const bool row_ok = i < p.L;
  const int64_t mbase = p.mask.kind ? MaskBatchOffset(p.mask, b) : 0;

  float qr[P], o[P], s[Bc];
#pragma unroll
  for (int dd = 0; dd < P; ++dd) {
    const int d = dd * G + g;
    qr[dd] = row_ok && d < p.E ? static_cast<float>(Load(q[(b * p.L + i) * p.E + d])) : 0.f;
    o[dd] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  const int64_t j_end = p.causal ? (p.S < r0 + Geo::kBr ? p.S : r0 + Geo::kBr) : p.S;
  for (int64_t j0 = 0; j0 < j_end; j0 += Bc) {
    __syncthreads();  // the previous tile is consumed
    LoadTransposed<T, kD>(kt, St, Bc, k + b * p.S * p.E, j0, p.S, p.E);
    LoadTransposed<T, kD>(vt, St, Bc, v + b * p.S * p.Ev, j0, p.S, p.Ev);
    __syncthreads();
    PartialDots<P, G, Bc, St>(qr, kt, g, s);
    float tile_max = -INFINITY;
#pragma unroll
    for (int jj = 0; jj < Bc; ++jj) {
      const int64_t j = j0 + jj;
      const float dot = RowSum<G>(s[jj]);
      s[jj] = MaskedScore(p, dot, row_ok && j < p.S && (!p.causal || j <= i), mbase, i, j);
      tile_max = fmaxf(tile_max, s[jj]);
    }
    // A row that has seen no unmasked element yet keeps m = -inf and adds nothing (every lane
    // still runs the loops below: they hold the warp's fences).
    const float m_new = fmaxf(m, tile_max);
    const bool any = m_new != -INFINITY;
    const float alpha = any ? expf(m - m_new) : 1.f;
    l *= alpha;
#pragma unroll
    for (int dd = 0; dd < P; ++dd) o[dd] *= alpha;
#pragma unroll
    for (int jj = 0; jj < Bc; ++jj) {
      float pj = any ? expf(s[jj] - m_new) : 0.f;
      l += pj;
      if (p.dropout && pj != 0.f) pj = DropoutKeeps(p, b, i, j0 + jj) ? pj * p.drop_scale : 0.f;
      s[jj] = pj;
    }
    if (any) m = m_new;
    Accumulate<P, G, Bc, St>(s, vt, g, o);
  }
  if (!row_ok) return;
#pragma unroll
  for (int dd = 0; dd < P; ++dd) {
    const int d = dd * G + g;
    if (d < p.Ev) out[(b * p.L + i) * p.Ev + d] = Store<T>(o[dd] / l);
  }
  if (g == 0) lse[b * p.L + i] = m + logf(l);
}

// dsum[r] = sum_d dout[r, d] * out[r, d] over rows r < rows of width ev: a warp per row.
template <typename T>
__global__ void AttentionBackwardDotKernel(int64_t rows, int64_t ev, const T* dout, const T* out,
                                           float* dsum) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32; r < rows;
       r += warps) {
    float acc = 0.f;
    for (int64_t d = lane; d < ev; d += 32) {
      acc += static_cast<float>(Load(dout[r * ev + d])) * static_cast<float>(Load(out[r * ev + d]));
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (lane == 0) dsum[r] = acc;
  }
}

// The gradient of the scores' dot product q_i . k_j at (i, j) given the recomputed p_ij and
// dp_ij = dout_i . v_j: ds = p (dp' - D_i) scale, dp' the dropout-masked dp; *pv the weight
// dv_j takes dout_i with (p_ij after dropout). 0 for a masked element.
__device__ __forceinline__ float ScoreGrad(const Params& p, float score, float lse_i, float dp,
                                           float d_i, int64_t b, int64_t i, int64_t j, float* pv) {
  if (score == -INFINITY || lse_i == -INFINITY) {
    *pv = 0.f;
    return 0.f;
  }
  const float pij = expf(score - lse_i);
  float dpm = dp, pm = pij;
  if (p.dropout) {
    const bool kept = DropoutKeeps(p, b, i, j);
    dpm = kept ? dp * p.drop_scale : 0.f;
    pm = kept ? pij * p.drop_scale : 0.f;
  }
  *pv = pm;
  return pij * (dpm - d_i) * p.scale;
}

// dq for a block of 64 query rows: dq_i = sum_j ds_ij k_j over the key tiles.
template <typename T, int kD>
__global__ void __launch_bounds__(256, 2)
    AttentionBackwardQueryKernel(Params p, const T* q, const T* k, const T* v, const T* dout,
                                 const float* lse, const float* dsum, T* dq) {
  using Geo = Geometry<kD, kPerBwd>;
  constexpr int G = Geo::kG, P = kPerBwd, Bc = BackwardTile<kD>(), St = Bc + 4;
  OF_DYNAMIC_SMEM(float, smem);
  float* kt = smem;            // [kD][St]
  float* vt = smem + kD * St;  // [kD][St]
  const int64_t tiles = (p.L + Geo::kBr - 1) / Geo::kBr;
  const int64_t b = blockIdx.x / tiles, r0 = (blockIdx.x % tiles) * Geo::kBr;
  const int g = threadIdx.x % G;
  const int64_t i = r0 + threadIdx.x / G;
  const bool row_ok = i < p.L;
  const int64_t mbase = p.mask.kind ? MaskBatchOffset(p.mask, b) : 0;
  const float lse_i = row_ok ? lse[b * p.L + i] : -INFINITY;
  const float d_i = row_ok ? dsum[b * p.L + i] : 0.f;

  float qr[P], dor[P], acc[P], s[Bc], dp[Bc];
#pragma unroll
  for (int dd = 0; dd < P; ++dd) {
    const int d = dd * G + g;
    qr[dd] = row_ok && d < p.E ? static_cast<float>(Load(q[(b * p.L + i) * p.E + d])) : 0.f;
    dor[dd] = row_ok && d < p.Ev ? static_cast<float>(Load(dout[(b * p.L + i) * p.Ev + d])) : 0.f;
    acc[dd] = 0.f;
  }
  const int64_t j_end = p.causal ? (p.S < r0 + Geo::kBr ? p.S : r0 + Geo::kBr) : p.S;
  for (int64_t j0 = 0; j0 < j_end; j0 += Bc) {
    __syncthreads();
    LoadTransposed<T, kD>(kt, St, Bc, k + b * p.S * p.E, j0, p.S, p.E);
    LoadTransposed<T, kD>(vt, St, Bc, v + b * p.S * p.Ev, j0, p.S, p.Ev);
    __syncthreads();
    PartialDots<P, G, Bc, St>(qr, kt, g, s);
    PartialDots<P, G, Bc, St>(dor, vt, g, dp);
#pragma unroll
    for (int jj = 0; jj < Bc; ++jj) {
      const int64_t j = j0 + jj;
      const float dot = RowSum<G>(s[jj]), dpj = RowSum<G>(dp[jj]);
      const float score =
          MaskedScore(p, dot, row_ok && j < p.S && (!p.causal || j <= i), mbase, i, j);
      float unused;
      s[jj] = ScoreGrad(p, score, lse_i, dpj, d_i, b, i, j, &unused);
    }
    Accumulate<P, G, Bc, St>(s, kt, g, acc);
  }
  if (!row_ok) return;
#pragma unroll
  for (int dd = 0; dd < P; ++dd) {
    const int d = dd * G + g;
    if (d < p.E) dq[(b * p.L + i) * p.E + d] = Store<T>(acc[dd]);
  }
}

// dk and dv for a block of 64 key rows: dk_j = sum_i ds_ij q_i, dv_j = sum_i p'_ij dout_i over
// the query tiles (from the block's first key on when causal).
template <typename T, int kD>
__global__ void __launch_bounds__(256, 2)
    AttentionBackwardKeyValueKernel(Params p, const T* q, const T* k, const T* v, const T* dout,
                                    const float* lse, const float* dsum, T* dk, T* dv) {
  using Geo = Geometry<kD, kPerBwd>;
  constexpr int G = Geo::kG, P = kPerBwd, Bq = BackwardTile<kD>(), St = Bq + 4;
  OF_DYNAMIC_SMEM(float, smem);
  float* qt = smem;                   // [kD][St]: the query tile, transposed
  float* ot = smem + kD * St;         // [kD][St]: the output-gradient tile, transposed
  float* lse_t = smem + 2 * kD * St;  // [Bq]
  float* dsum_t = lse_t + Bq;         // [Bq]
  const int64_t tiles = (p.S + Geo::kBr - 1) / Geo::kBr;
  const int64_t b = blockIdx.x / tiles, c0 = (blockIdx.x % tiles) * Geo::kBr;
  const int g = threadIdx.x % G;
  const int64_t j = c0 + threadIdx.x / G;
  const bool key_ok = j < p.S;
  const int64_t mbase = p.mask.kind ? MaskBatchOffset(p.mask, b) : 0;

  float kr[P], vr[P], dka[P], dva[P], s[Bq], dp[Bq];
#pragma unroll
  for (int dd = 0; dd < P; ++dd) {
    const int d = dd * G + g;
    kr[dd] = key_ok && d < p.E ? static_cast<float>(Load(k[(b * p.S + j) * p.E + d])) : 0.f;
    vr[dd] = key_ok && d < p.Ev ? static_cast<float>(Load(v[(b * p.S + j) * p.Ev + d])) : 0.f;
    dka[dd] = dva[dd] = 0.f;
  }
  const int64_t i_begin = p.causal ? c0 : 0;
  for (int64_t i0 = i_begin; i0 < p.L; i0 += Bq) {
    __syncthreads();
    LoadTransposed<T, kD>(qt, St, Bq, q + b * p.L * p.E, i0, p.L, p.E);
    LoadTransposed<T, kD>(ot, St, Bq, dout + b * p.L * p.Ev, i0, p.L, p.Ev);
    for (int ii = threadIdx.x; ii < Bq; ii += blockDim.x) {
      const bool in = i0 + ii < p.L;
      lse_t[ii] = in ? lse[b * p.L + i0 + ii] : -INFINITY;
      dsum_t[ii] = in ? dsum[b * p.L + i0 + ii] : 0.f;
    }
    __syncthreads();
    PartialDots<P, G, Bq, St>(kr, qt, g, s);
    PartialDots<P, G, Bq, St>(vr, ot, g, dp);
#pragma unroll
    for (int ii = 0; ii < Bq; ++ii) {
      const int64_t i = i0 + ii;
      const float dot = RowSum<G>(s[ii]), dpi = RowSum<G>(dp[ii]);
      const float score =
          MaskedScore(p, dot, key_ok && i < p.L && (!p.causal || j <= i), mbase, i, j);
      float pv;
      dp[ii] = ScoreGrad(p, score, lse_t[ii], dpi, dsum_t[ii], b, i, j, &pv);
      s[ii] = pv;
    }
    Accumulate<P, G, Bq, St>(dp, qt, g, dka);
    Accumulate<P, G, Bq, St>(s, ot, g, dva);
  }
  if (!key_ok) return;
#pragma unroll
  for (int dd = 0; dd < P; ++dd) {
    const int d = dd * G + g;
    if (d < p.E) dk[(b * p.S + j) * p.E + d] = Store<T>(dka[dd]);
    if (d < p.Ev) dv[(b * p.S + j) * p.Ev + d] = Store<T>(dva[dd]);
  }
}

}  // namespace attention
}  // namespace cuda
}  // namespace oneflow
