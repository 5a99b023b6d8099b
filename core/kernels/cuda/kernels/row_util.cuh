// What the row kernels (norm.cuh, softmax.cuh, cross_entropy.cuh) share: packs of elements
// moved with one 16-byte access, the host's choice of pack and registers per lane for a row,
// and the float math they call on both the GPU and the host stand-in.
//
//   const int pack = row::PackFor<T>(d, {x, y});   // 16 / sizeof(T), or 1 when d or a pointer
//   row::WithWarpIters<T>(pack, d, [&](auto kPack, auto kIters) {   // 32 * kPack * kIters >= d
//     OF_CUDA_LAUNCH((MyRowKernel<T, kPack, kIters>), blocks, 128, 0, stream, ...);
//   });
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <type_traits>

#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/cuda/reduce_util.cuh"

namespace oneflow {
namespace cuda {
namespace row {

// Rows up to this many elements sit in a warp's registers; longer ones take a block each.
constexpr int kWarpRowMax = 1024;
// Threads of the warp-per-row kernels' blocks (a row per warp) and of the block-per-row ones.
constexpr int kWarpBlockThreads = 128;
constexpr int kRowBlockThreads = 512;

// kPack elements of T moved as one access (16 bytes at most, aligned to their size).
template <typename T, int kPack>
struct alignas(sizeof(T) * kPack) Pack {
  T v[kPack];
};

template <typename T, int kPack>
__device__ __forceinline__ Pack<T, kPack> LoadPack(const T* p) {
  return *reinterpret_cast<const Pack<T, kPack>*>(p);
}
template <typename T, int kPack>
__device__ __forceinline__ void StorePack(T* p, const Pack<T, kPack>& v) {
  *reinterpret_cast<Pack<T, kPack>*>(p) = v;
}

// The widest pack for T (16 bytes).
template <typename T>
constexpr int kMaxPack = 16 / static_cast<int>(sizeof(T)) > 0 ? 16 / static_cast<int>(sizeof(T))
                                                              : 1;

// kMaxPack<T> when every row of d elements starts at a multiple of 16 bytes in each of ptrs
// (null pointers are skipped), else 1.
template <typename T>
int PackFor(int64_t d, std::initializer_list<const void*> ptrs) {
  constexpr int p = kMaxPack<T>;
  if (d % p != 0) return 1;
  for (const void* q : ptrs) {
    if (q != nullptr && reinterpret_cast<uintptr_t>(q) % (sizeof(T) * p) != 0) return 1;
  }
  return p;
}

// Calls f(integral_constant kPack, integral_constant kIters) for the smallest power of two
// kIters with 32 * kPack * kIters >= d, kPack being `pack` (kMaxPack<T> or 1).
// REQUIRES: 1 <= d <= kWarpRowMax.
template <typename T, int kPack, int kIters, typename F>
void WithItersFrom(int64_t d, F&& f) {
  if constexpr (kWarpSize * kPack * kIters >= kWarpRowMax) {
    f(std::integral_constant<int, kPack>{}, std::integral_constant<int, kIters>{});
  } else {
    if (kWarpSize * kPack * kIters >= d) {
      f(std::integral_constant<int, kPack>{}, std::integral_constant<int, kIters>{});
    } else {
      WithItersFrom<T, kPack, kIters * 2>(d, f);
    }
  }
}
template <typename T, typename F>
void WithWarpIters(int pack, int64_t d, F&& f) {
  if (pack == kMaxPack<T> && kMaxPack < T >> 1) {
    WithItersFrom<T, kMaxPack<T>, 1>(d, f);
  } else {
    WithItersFrom<T, 1, 1>(d, f);
  }
}

// Blocks for `rows` rows at `per_block` rows a block (grid-stride loops cover the rest).
inline unsigned RowBlocks(int64_t rows, int64_t per_block) {
  const int64_t b = (rows + per_block - 1) / per_block;
  return static_cast<unsigned>(b < 1 ? 1 : b > (int64_t{1} << 20) ? (int64_t{1} << 20) : b);
}

// ---- math in the accumulation type (float or double)

__device__ __forceinline__ float Exp(float v) { return expf(v); }
__device__ __forceinline__ double Exp(double v) { return exp(v); }
__device__ __forceinline__ float Log(float v) { return logf(v); }
__device__ __forceinline__ double Log(double v) { return log(v); }
__device__ __forceinline__ float Rsqrt(float v) { return rsqrtf(v); }
__device__ __forceinline__ double Rsqrt(double v) { return 1.0 / sqrt(v); }

template <typename A>
__device__ __forceinline__ bool IsInf(A v) {
  return v == std::numeric_limits<A>::infinity() || v == -std::numeric_limits<A>::infinity();
}
template <typename A>
__device__ __forceinline__ bool IsNan(A v) {
  return v != v;
}

// std::max(a, b) as the CPU kernels use it: a NaN b leaves a (so a max ignores NaN).
template <typename A>
__device__ __forceinline__ A MaxOf(A a, A b) {
  return a < b ? b : a;
}

}  // namespace row
}  // namespace cuda
}  // namespace oneflow
