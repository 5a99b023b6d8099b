// The elementwise machinery of the CUDA kernels: out = f(in...) over out's shape, each input
// broadcast to it, in three kernels and the launcher that picks one from plain pointers, sizes
// and strides (no Tensor here, so the host stand-in runs all of it; cuda::Map in
// core/kernels/cuda/elementwise.cuh is the Tensor front end).
//
//   ElementwiseVecKernel      out and every input contiguous (or one element read by all) and
//                             aligned to 16 bytes: 16-byte loads and stores (4 floats, 8 halves,
//                             2 doubles; the widest operand type decides), kUnroll vectors per
//                             thread, the last n % kVec elements by the first threads of block 0;
//   ElementwiseStridedKernel  views, broadcasts and misaligned pointers: dims merged where every
//                             operand allows (CoalesceElementwise), 32-bit offsets with
//                             precomputed magic-number division (FastDivmod) where they fit,
//                             64-bit plain division otherwise;
//   TransposeTileKernel       same-type copies into a contiguous tensor from a source whose last
//                             two dims are swapped (x.transpose(-1, -2).contiguous()): 32 x 32
//                             tiles through shared memory, both sides coalesced.
//
//   // o = a + b, a a contiguous float vector and b a float scalar on the device:
//   ElementwiseOperand ops[3] = {{o_ptr, 1, sizes, o_strides}, {a_ptr, 1, sizes, a_strides},
//                                {b_ptr, 0, nullptr, nullptr}};
//   ElementwiseStatus s = LaunchElementwise<float, float, float>(AddF{}, ops, sms, stream);
//
// f is called with Acc<I> values (float for __half and __nv_bfloat16) and its result stored into
// O with Store, so every functor computes the half types in float.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/launch.cuh"

namespace oneflow {
namespace cuda {

// ---------------------------------------------------------------- building blocks

constexpr int kElementwiseThreads = 256;
constexpr int kElementwiseMaxDims = 8;  // dims after merging
constexpr int kVecUnroll = 2;           // vectors per thread per iteration
constexpr int kStridedUnroll = 4;       // elements per thread per iteration
// Resident blocks per SM the grid is capped at (two waves of 8 blocks of 256 threads); the
// kernels' grid-stride loops cover the rest.
constexpr int kBlocksPerSm = 16;

// Blocks for `work` items of which each block takes `per_block`: ceil(work / per_block), at
// least 1, at most sms * kBlocksPerSm.
inline unsigned ElementwiseBlocks(int64_t work, int64_t per_block, int sms) {
  const int64_t cap = static_cast<int64_t>(sms > 0 ? sms : 1) * kBlocksPerSm;
  int64_t b = (work + per_block - 1) / per_block;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b < cap ? b : cap);
}

// n / d and n % d for 32-bit n < 2^31 and 1 <= d < 2^31 by a multiply-high and a shift
// (Granlund and Montgomery, "Division by invariant integers using multiplication", 1994):
// shift = ceil(log2 d), magic = floor(2^32 (2^shift - d) / d) + 1, q = (mulhi(n, magic) + n)
// >> shift. The sum stays below 2^32 because n and mulhi(n, magic) are both below 2^31.
struct FastDivmod {
  uint32_t divisor = 1, magic = 1, shift = 0;
  FastDivmod() = default;
  explicit FastDivmod(uint32_t d) : divisor(d) {
    while ((uint64_t{1} << shift) < d) ++shift;
    magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }
  __device__ __forceinline__ uint32_t Div(uint32_t n) const {
    return (__umulhi(n, magic) + n) >> shift;
  }
};

// The divider of an index type: FastDivmod for 32-bit indexing, plain division for 64-bit.
struct PlainDivmod {
  int64_t divisor = 1;
  PlainDivmod() = default;
  explicit PlainDivmod(int64_t d) : divisor(d) {}
  __device__ __forceinline__ int64_t Div(int64_t n) const { return n / divisor; }
};
template <typename Index>
using DivmodFor = std::conditional_t<std::is_same_v<Index, uint32_t>, FastDivmod, PlainDivmod>;

// kN elements of T loaded and stored as one access of kN * sizeof(T) bytes (16 for the widest
// operand type of a kernel).
template <typename T, int kN>
struct alignas(sizeof(T) * kN) Pack {
  T v[kN];
};

// The number of elements per 16-byte access for the widest of the operand types.
template <typename... T>
constexpr int VecWidth() {
  size_t widest = 1;
  ((widest = sizeof(T) > widest ? sizeof(T) : widest), ...);
  return widest >= 16 ? 1 : static_cast<int>(16 / widest);
}

// A tuple for device code: the kernels hold one value per operand in registers.
template <typename... T>
struct Tuple {};
template <typename H, typename... R>
struct Tuple<H, R...> {
  H head;
  Tuple<R...> tail;
};
template <size_t K>
struct TupleAt {
  template <typename Tup>
  __host__ __device__ __forceinline__ static auto& Get(Tup& t) {
    return TupleAt<K - 1>::Get(t.tail);
  }
};
template <>
struct TupleAt<0> {
  template <typename Tup>
  __host__ __device__ __forceinline__ static auto& Get(Tup& t) {
    return t.head;
  }
};
template <size_t K, typename Tup>
__host__ __device__ __forceinline__ auto& Get(Tup& t) {
  return TupleAt<K>::Get(t);
}

// ---------------------------------------------------------------- the vectorised kernel

// An input of the vectorised kernel: contiguous in out's shape, or one element every output
// reads (a broadcast scalar, read once per thread).
template <typename T>
struct LinearOperand {
  const T* ptr;
  bool broadcast;
};

template <typename O, typename F, typename Vals, size_t... K>
__device__ __forceinline__ O ApplyF(const F& f, const Vals& v, std::index_sequence<K...>) {
  return Store<O>(f(Load(Get<K>(v))...));
}

template <int kVec, typename... I, size_t... K>
__device__ __forceinline__ void LoadPacks(Tuple<Pack<I, kVec>...>& p,
                                          const Tuple<LinearOperand<I>...>& in, int64_t v,
                                          std::index_sequence<K...>) {
  ((Get<K>(in).broadcast
        ? void()
        : void(Get<K>(p) = reinterpret_cast<const Pack<I, kVec>*>(Get<K>(in).ptr)[v])),
   ...);
}

template <int kVec, typename... I, size_t... K>
__device__ __forceinline__ Tuple<I...> Lane(const Tuple<Pack<I, kVec>...>& p,
                                            const Tuple<I...>& scalar,
                                            const Tuple<LinearOperand<I>...>& in, int j,
                                            std::index_sequence<K...>) {
  return Tuple<I...>{(Get<K>(in).broadcast ? Get<K>(scalar) : Get<K>(p).v[j])...};
}

template <typename... I, size_t... K>
__device__ __forceinline__ Tuple<I...> LoadScalars(const Tuple<LinearOperand<I>...>& in, int64_t i,
                                                   std::index_sequence<K...>) {
  return Tuple<I...>{Get<K>(in).ptr[Get<K>(in).broadcast ? 0 : i]...};
}

// out[i] = f(in[i]...) for i < n. REQUIRES: out and every non-broadcast input aligned to
// kVec * sizeof(its type); blockDim.x == kElementwiseThreads.
template <int kVec, typename O, typename F, typename... I>
__global__ void __launch_bounds__(kElementwiseThreads)
    ElementwiseVecKernel(int64_t n, O* out, F f, Tuple<LinearOperand<I>...> in) {
  using Seq = std::index_sequence_for<I...>;
  const int64_t nvec = n / kVec;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  Tuple<I...> scalar{};
  if (nvec > 0) scalar = LoadScalars(in, 0, Seq{});  // the broadcast inputs' one element
  for (int64_t v0 = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v0 < nvec;
       v0 += step * kVecUnroll) {
    Tuple<Pack<I, kVec>...> x[kVecUnroll];
#pragma unroll
    for (int u = 0; u < kVecUnroll; ++u) {  // every load first: kVecUnroll accesses in flight
      if (v0 + u * step < nvec) LoadPacks<kVec>(x[u], in, v0 + u * step, Seq{});
    }
#pragma unroll
    for (int u = 0; u < kVecUnroll; ++u) {
      if (v0 + u * step < nvec) {
        Pack<O, kVec> y;
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          y.v[j] = ApplyF<O>(f, Lane<kVec>(x[u], scalar, in, j, Seq{}), Seq{});
        }
        reinterpret_cast<Pack<O, kVec>*>(out)[v0 + u * step] = y;
      }
    }
  }
  const int64_t tail = nvec * kVec;  // fewer than kVec elements left
  if (blockIdx.x == 0 && threadIdx.x < n - tail) {
    const int64_t i = tail + threadIdx.x;
    out[i] = ApplyF<O>(f, LoadScalars(in, i, Seq{}), Seq{});
  }
}

// ---------------------------------------------------------------- the strided kernel

// Sizes of the merged dims and each operand's strides (operand 0 is out), in elements.
template <typename Index, int kOperands>
struct StridedGeometry {
  using Offset = std::make_signed_t<Index>;
  int ndim = 0;
  DivmodFor<Index> sizes[kElementwiseMaxDims];  // only dims 1.. are divided by
  Offset strides[kOperands][kElementwiseMaxDims];

  // Element offset of each operand for linear index i (row-major over sizes).
  __device__ __forceinline__ void Offsets(Index i, Offset (&off)[kOperands]) const {
#pragma unroll
    for (int k = 0; k < kOperands; ++k) off[k] = 0;
#pragma unroll
    for (int d = kElementwiseMaxDims - 1; d >= 1; --d) {
      if (d < ndim) {
        const Index q = static_cast<Index>(sizes[d].Div(i));
        const Offset r = static_cast<Offset>(i - q * static_cast<Index>(sizes[d].divisor));
#pragma unroll
        for (int k = 0; k < kOperands; ++k) off[k] += r * strides[k][d];
        i = q;
      }
    }
    if (ndim > 0) {
#pragma unroll
      for (int k = 0; k < kOperands; ++k) off[k] += static_cast<Offset>(i) * strides[k][0];
    }
  }
};

template <typename Off, typename... I, size_t... K>
__device__ __forceinline__ Tuple<I...> LoadAt(const Tuple<const I*...>& in, const Off* off,
                                              std::index_sequence<K...>) {
  return Tuple<I...>{Get<K>(in)[off[K + 1]]...};
}

// out[g.offset_0(i)] = f(in_k[g.offset_k(i)]...) for i < n, kStridedUnroll elements per thread
// (a block takes kStridedUnroll * blockDim.x consecutive indices, lanes side by side).
// Index is uint32_t (n and every offset below 2^31) or int64_t.
template <typename Index, typename O, typename F, typename... I>
__global__ void __launch_bounds__(kElementwiseThreads)
    ElementwiseStridedKernel(Index n, StridedGeometry<Index, sizeof...(I) + 1> g, O* out, F f,
                             Tuple<const I*...> in) {
  using Seq = std::index_sequence_for<I...>;
  using Offset = std::make_signed_t<Index>;
  constexpr int kOps = sizeof...(I) + 1;
  const Index per_block = static_cast<Index>(blockDim.x) * kStridedUnroll;
  const Index step = static_cast<Index>(gridDim.x) * per_block;
  for (Index base = static_cast<Index>(blockIdx.x) * per_block + threadIdx.x; base < n;
       base += step) {
    Tuple<I...> x[kStridedUnroll];
    Offset out_off[kStridedUnroll];
#pragma unroll
    for (int u = 0; u < kStridedUnroll; ++u) {
      const Index i = base + static_cast<Index>(u) * blockDim.x;
      if (i < n) {
        Offset off[kOps];
        g.Offsets(i, off);
        out_off[u] = off[0];
        x[u] = LoadAt(in, off, Seq{});
      }
    }
#pragma unroll
    for (int u = 0; u < kStridedUnroll; ++u) {
      if (base + static_cast<Index>(u) * blockDim.x < n) {
        out[out_off[u]] = ApplyF<O>(f, x[u], Seq{});
      }
    }
  }
}

// ---------------------------------------------------------------- the transpose kernel

constexpr int kTile = 32;
constexpr int kTransposeThreads = 256;  // 8 warps; each walks 4 of the tile's 32 lines

// dst (contiguous, [batch..., rows, cols]) = src, where src steps 1 along rows and
// col_stride along cols, and batch b starts at BatchOffset(b). U: an unsigned type of the
// element's size (a bit-exact copy).
struct TransposeGeometry {
  int64_t rows, cols, col_stride;
  int batch_ndim;
  int64_t batch_sizes[kElementwiseMaxDims];
  int64_t batch_strides[kElementwiseMaxDims];
  __host__ __device__ int64_t BatchOffset(int64_t b) const {
    int64_t off = 0;
    for (int d = batch_ndim - 1; d >= 0; --d) {
      off += (b % batch_sizes[d]) * batch_strides[d];
      b /= batch_sizes[d];
    }
    return off;
  }
};

template <typename U>
__global__ void __launch_bounds__(kTransposeThreads)
    TransposeTileKernel(int64_t batches, TransposeGeometry g, const U* src, U* dst) {
  __shared__ U tile[kTile][kTile + 1];  // +1: the column reads hit 32 banks
  const int lane = threadIdx.x % kTile, line = threadIdx.x / kTile;
  const int lines = kTransposeThreads / kTile;
  const int64_t tiles_r = (g.rows + kTile - 1) / kTile, tiles_c = (g.cols + kTile - 1) / kTile;
  const int64_t tiles = batches * tiles_r * tiles_c;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t c0 = (t % tiles_c) * kTile, r0 = (t / tiles_c % tiles_r) * kTile;
    const int64_t b = t / (tiles_c * tiles_r);
    const U* s = src + g.BatchOffset(b);
    U* d = dst + b * g.rows * g.cols;
    // Read along rows (src's contiguous direction): tile[c][r].
    for (int k = line; k < kTile; k += lines) {
      const int64_t r = r0 + lane, c = c0 + k;
      if (r < g.rows && c < g.cols) tile[k][lane] = s[r + c * g.col_stride];
    }
    __syncthreads();
    // Write along cols (dst's contiguous direction).
    for (int k = line; k < kTile; k += lines) {
      const int64_t r = r0 + k, c = c0 + lane;
      if (r < g.rows && c < g.cols) d[r * g.cols + c] = tile[lane][k];
    }
    __syncthreads();  // the tile is refilled by the next iteration
  }
}

// ---------------------------------------------------------------- the launcher

// One operand of a launch: element 0 and, over `ndim` dims aligned to out's last dims (numpy
// broadcasting), its sizes and strides in elements. ndim 0 (or one element) is a scalar read by
// every output.
struct ElementwiseOperand {
  const void* ptr;
  int ndim;
  const int64_t* sizes;
  const int64_t* strides;
};

// out's sizes merged where every operand steps through neighbouring dims as through one, size-1
// dims dropped; each operand's stride per merged dim (0 where it broadcasts).
template <int kOperands>
struct CoalescedLayout {
  int ndim = 0;
  int64_t sizes[kElementwiseMaxDims];
  int64_t strides[kOperands][kElementwiseMaxDims];
};

// Merges ops[0]'s (out's) dims; false when more than kElementwiseMaxDims dims remain.
template <int kOperands>
bool CoalesceElementwise(const ElementwiseOperand* ops, CoalescedLayout<kOperands>& c) {
  const ElementwiseOperand& out = ops[0];
  c.ndim = 0;
  for (int d = 0; d < out.ndim; ++d) {
    const int64_t size = out.sizes[d];
    if (size == 1) continue;
    int64_t st[kOperands];
    for (int k = 0; k < kOperands; ++k) {
      const int j = d - (out.ndim - ops[k].ndim);
      st[k] = (j < 0 || ops[k].sizes[j] == 1) ? 0 : ops[k].strides[j];
    }
    bool merge = c.ndim > 0;
    for (int k = 0; k < kOperands && merge; ++k) merge = c.strides[k][c.ndim - 1] == st[k] * size;
    if (merge) {
      c.sizes[c.ndim - 1] *= size;
      for (int k = 0; k < kOperands; ++k) c.strides[k][c.ndim - 1] = st[k];
      continue;
    }
    if (c.ndim == kElementwiseMaxDims) return false;
    c.sizes[c.ndim] = size;
    for (int k = 0; k < kOperands; ++k) c.strides[k][c.ndim] = st[k];
    ++c.ndim;
  }
  return true;
}

// Whether n and every operand's largest offset (negative strides included) fit in int32.
template <int kOperands>
bool FitsInt32(int64_t n, const CoalescedLayout<kOperands>& c) {
  constexpr int64_t kMax = INT32_MAX;
  if (n > kMax) return false;
  for (int k = 0; k < kOperands; ++k) {
    int64_t reach = 0;
    for (int d = 0; d < c.ndim; ++d) {
      const int64_t s = c.strides[k][d] < 0 ? -c.strides[k][d] : c.strides[k][d];
      reach += (c.sizes[d] - 1) * s;
      if (reach > kMax) return false;
    }
  }
  return true;
}

template <typename Index, int kOperands>
StridedGeometry<Index, kOperands> MakeStridedGeometry(const CoalescedLayout<kOperands>& c) {
  StridedGeometry<Index, kOperands> g;
  g.ndim = c.ndim;
  for (int d = 0; d < c.ndim; ++d) {
    g.sizes[d] = DivmodFor<Index>(static_cast<Index>(c.sizes[d]));
    for (int k = 0; k < kOperands; ++k) {
      g.strides[k][d] =
          static_cast<typename StridedGeometry<Index, kOperands>::Offset>(c.strides[k][d]);
    }
  }
  return g;
}

template <typename Index, typename O, typename F, typename... I, size_t... K>
void LaunchStrided(const F& f, int64_t n, const CoalescedLayout<sizeof...(I) + 1>& c,
                   const ElementwiseOperand* ops, int sms, cudaStream_t stream,
                   std::index_sequence<K...>) {
  const auto g = MakeStridedGeometry<Index>(c);
  const unsigned blocks = ElementwiseBlocks(n, int64_t{kElementwiseThreads} * kStridedUnroll, sms);
  OF_CUDA_LAUNCH((ElementwiseStridedKernel<Index, O, F, I...>), blocks, kElementwiseThreads, 0,
                 stream, static_cast<Index>(n), g, static_cast<O*>(const_cast<void*>(ops[0].ptr)),
                 f, Tuple<const I*...>{static_cast<const I*>(ops[K + 1].ptr)...});
}

template <int kVec, typename O, typename F, typename... I, size_t... K>
void LaunchVec(const F& f, int64_t n, const ElementwiseOperand* ops, const bool* broadcast,
               unsigned blocks, cudaStream_t stream, std::index_sequence<K...>) {
  OF_CUDA_LAUNCH((ElementwiseVecKernel<kVec, O, F, I...>), blocks, kElementwiseThreads, 0, stream,
                 n, static_cast<O*>(const_cast<void*>(ops[0].ptr)), f,
                 Tuple<LinearOperand<I>...>{
                     LinearOperand<I>{static_cast<const I*>(ops[K + 1].ptr), broadcast[K + 1]}...});
}

// What LaunchElementwise did.
enum class ElementwiseStatus {
  kDone,             // launched (or nothing to do)
  kTooManyDims,      // more than kElementwiseMaxDims dims after merging: nothing launched
  kNeedsContiguous,  // no strided kernel instantiated for this case: nothing launched (Map
                     // copies the operands contiguous first, see cuda/elementwise.cuh)
};

// The strided kernels a launch may use. Each is instantiated per op and dtype, so ops that
// rarely see views (the unary table, dtype conversions) take kNone; only the same-type copies
// take the 64-bit one.
enum class StridedKernels { kNone, k32, k32And64 };

// Which kernel LaunchElementwise picked, for the tests.
enum class ElementwiseKernel { kNone, kVec, kStrided32, kStrided64 };

// out = f(in...) where ops[0] is out and ops[1..] the inputs. sms: the device's multiprocessor
// count (the grid's cap).
template <StridedKernels kStrided, typename O, typename... I, typename F>
ElementwiseStatus LaunchElementwise(const F& f, const ElementwiseOperand* ops, int sms,
                                    cudaStream_t stream, ElementwiseKernel* picked = nullptr) {
  constexpr int kOps = sizeof...(I) + 1;
  constexpr int kVec = VecWidth<O, I...>();
  using Seq = std::index_sequence_for<I...>;
  if (picked) *picked = ElementwiseKernel::kNone;
  int64_t n = 1;
  for (int d = 0; d < ops[0].ndim; ++d) n *= ops[0].sizes[d];
  if (n == 0) return ElementwiseStatus::kDone;

  // The vectorised kernel: out contiguous, each input contiguous in out's shape or a scalar,
  // the others' pointers aligned to kVec elements.
  CoalescedLayout<kOps> c;
  if (!CoalesceElementwise(ops, c)) return ElementwiseStatus::kTooManyDims;
  const size_t bytes[kOps] = {sizeof(O), sizeof(I)...};
  bool linear = true;
  bool broadcast[kOps] = {};
  for (int k = 0; k < kOps && linear; ++k) {
    bool scalar = k > 0, contiguous = true;
    for (int d = 0; d < c.ndim; ++d) {
      scalar = scalar && c.strides[k][d] == 0;
      int64_t expected = 1;
      for (int e = d + 1; e < c.ndim; ++e) expected *= c.sizes[e];
      contiguous = contiguous && c.strides[k][d] == expected;
    }
    broadcast[k] = scalar;
    const bool aligned =
        reinterpret_cast<uintptr_t>(ops[k].ptr) % (static_cast<size_t>(kVec) * bytes[k]) == 0;
    linear = scalar || (contiguous && aligned);
  }
  if (linear) {
    if (picked) *picked = ElementwiseKernel::kVec;
    const unsigned blocks =
        ElementwiseBlocks((n + kVec - 1) / kVec, int64_t{kElementwiseThreads} * kVecUnroll, sms);
    LaunchVec<kVec, O, F, I...>(f, n, ops, broadcast, blocks, stream, Seq{});
    return ElementwiseStatus::kDone;
  }
  if constexpr (kStrided == StridedKernels::kNone) {
    return ElementwiseStatus::kNeedsContiguous;
  } else {
    if (FitsInt32(n, c)) {
      if (picked) *picked = ElementwiseKernel::kStrided32;
      LaunchStrided<uint32_t, O, F, I...>(f, n, c, ops, sms, stream, Seq{});
      return ElementwiseStatus::kDone;
    }
    if constexpr (kStrided == StridedKernels::k32) {
      return ElementwiseStatus::kNeedsContiguous;
    } else {
      if (picked) *picked = ElementwiseKernel::kStrided64;
      LaunchStrided<int64_t, O, F, I...>(f, n, c, ops, sms, stream, Seq{});
      return ElementwiseStatus::kDone;
    }
  }
}

// The transpose kernel's geometry when dst (ops[0], contiguous) takes src (ops[1]) with src's
// last two merged dims swapped (src steps 1 along dst's second-last dim, not along the last)
// and both of those dims at least kTile / 2 long; false otherwise.
inline bool TransposeLayout(const ElementwiseOperand* ops, TransposeGeometry& g, int64_t& batches) {
  CoalescedLayout<2> c;
  if (!CoalesceElementwise(ops, c) || c.ndim < 2) return false;
  int64_t expected = 1;
  for (int d = c.ndim - 1; d >= 0; --d) {  // dst contiguous
    if (c.strides[0][d] != expected) return false;
    expected *= c.sizes[d];
  }
  const int r = c.ndim - 2, col = c.ndim - 1;
  if (c.strides[1][r] != 1 || c.strides[1][col] == 1) return false;
  if (c.sizes[r] < kTile / 2 || c.sizes[col] < kTile / 2) return false;
  g.rows = c.sizes[r];
  g.cols = c.sizes[col];
  g.col_stride = c.strides[1][col];
  g.batch_ndim = c.ndim - 2;
  batches = 1;
  for (int d = 0; d < g.batch_ndim; ++d) {
    g.batch_sizes[d] = c.sizes[d];
    g.batch_strides[d] = c.strides[1][d];
    batches *= c.sizes[d];
  }
  return true;
}

// Launches the transpose kernel for a layout TransposeLayout accepted.
template <typename U>
void LaunchTranspose(const TransposeGeometry& g, int64_t batches, const void* src, void* dst,
                     int sms, cudaStream_t stream) {
  const int64_t tiles = batches * ((g.rows + kTile - 1) / kTile) * ((g.cols + kTile - 1) / kTile);
  const unsigned blocks = ElementwiseBlocks(tiles, 1, sms * 4);  // 4x: one tile per block
  OF_CUDA_LAUNCH(TransposeTileKernel<U>, blocks, kTransposeThreads, 0, stream, batches, g,
                 static_cast<const U*>(src), static_cast<U*>(dst));
}

}  // namespace cuda
}  // namespace oneflow
