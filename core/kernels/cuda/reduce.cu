// CUDA kernels of the reductions in core/ops/reduce.cc: sum and prod over dims, max_dim and
// min_dim.
//
// Every reduction runs on a contiguous input seen as (outer, r, inner), reducing r: the rows
// kernel takes inner == 1 (a warp per row, reading along it), the columns kernel inner > 1 (a
// block per 32 columns, reading across them). When outer * inner outputs are too few to fill
// the device, r is cut into chunks reduced to partials, which the next pass reduces again, so
// no result depends on atomics: sums are deterministic and equal the CPU's up to rounding
// (both accumulate floats in double and integers in int64).
#include <algorithm>
#include <type_traits>

#include "core/functional.h"
#include "core/kernels/cuda/cuda_util.h"
#include "core/kernels/cuda/reduce_util.cuh"
#include "core/op_registry.h"
#include "core/ops/reduce_functors.h"

namespace oneflow {

namespace {

using cuda::CeilDiv;

// A contiguous input seen as (outer, r, inner); r is reduced.
struct Layout {
  int64_t outer = 1, r = 1, inner = 1;
};

// How r is cut: `chunks` pieces of `chunk` elements (the last may be shorter, none is empty).
struct Chunking {
  int64_t chunks = 1, chunk = 1;
};

constexpr int kColRows = 8;  // the columns kernel's block is 32 columns by kColRows rows
// Enough independent work to fill an H100 (132 SMs, 64 warps each) several times over.
constexpr int64_t kTargetWarps = 32768;
constexpr int64_t kTargetBlocks = 4096;
// A chunk is worth a pass only when each thread of it still reads a few dozen elements.
constexpr int64_t kMinRowChunk = 32 * cuda::kWarpSize;
constexpr int64_t kMinColChunk = 32 * kColRows;

// The dtype of the partials' scratch tensors (the accumulation types).
template <typename A>
constexpr DType ScratchDType() {
  static_assert(std::is_same_v<A, double> || std::is_same_v<A, float> ||
                std::is_same_v<A, int64_t>);
  return std::is_same_v<A, double>  ? DType::kFloat64
         : std::is_same_v<A, float> ? DType::kFloat32
                                    : DType::kInt64;
}

Chunking ChunkingFor(const Layout& l) {
  int64_t want, most;
  if (l.inner == 1) {
    want = CeilDiv(kTargetWarps, l.outer);
    most = CeilDiv(l.r, kMinRowChunk);
  } else {
    want = CeilDiv(kTargetBlocks, l.outer * CeilDiv(l.inner, cuda::kWarpSize));
    most = CeilDiv(l.r, kMinColChunk);
  }
  Chunking c;
  c.chunks = std::max<int64_t>(1, std::min(want, most));
  c.chunk = std::max<int64_t>(1, CeilDiv(l.r, c.chunks));
  c.chunks = std::max<int64_t>(1, CeilDiv(l.r, c.chunk));
  return c;
}

// Op: V Identity(), V Combine(V, V), V Load(element index, index along r) and
// Store(output index, V). Output (row, chunk) is stored at row * chunks + chunk.
template <typename Op>
__global__ void ReduceRowsKernel(Op op, int64_t rows, int64_t r, Chunking c) {
  const int64_t warps_per_block = blockDim.x / cuda::kWarpSize;
  const int lane = threadIdx.x % cuda::kWarpSize;
  const int64_t items = rows * c.chunks;
  auto combine = [&](auto a, auto b) { return op.Combine(a, b); };
  for (int64_t item = blockIdx.x * warps_per_block + threadIdx.x / cuda::kWarpSize; item < items;
       item += gridDim.x * warps_per_block) {
    const int64_t row = item / c.chunks;
    const int64_t begin = item % c.chunks * c.chunk;
    const int64_t end = std::min(r, begin + c.chunk);
    auto v = op.Identity();
    for (int64_t k = begin + lane; k < end; k += cuda::kWarpSize) {
      v = op.Combine(v, op.Load(row * r + k, k));
    }
    v = cuda::WarpReduce(v, combine);
    if (lane == 0) op.Store(item, v);
  }
}

// Output (o, chunk, i) is stored at (o * chunks + chunk) * inner + i.
template <typename Op>
__global__ void ReduceColsKernel(Op op, int64_t outer, int64_t r, int64_t inner, Chunking c) {
  using V = decltype(op.Identity());
  __shared__ V partial[kColRows][cuda::kWarpSize];
  const int64_t tiles = CeilDiv(inner, cuda::kWarpSize);
  const int64_t items = outer * c.chunks * tiles;
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t oc = item / tiles;  // o * chunks + chunk
    const int64_t o = oc / c.chunks;
    const int64_t i = item % tiles * cuda::kWarpSize + tx;
    const int64_t begin = oc % c.chunks * c.chunk;
    const int64_t end = std::min(r, begin + c.chunk);
    V v = op.Identity();
    if (i < inner) {
      for (int64_t k = begin + ty; k < end; k += kColRows) {
        v = op.Combine(v, op.Load((o * r + k) * inner + i, k));
      }
    }
    partial[ty][tx] = v;
    __syncthreads();
    if (ty == 0 && i < inner) {
      for (int j = 1; j < kColRows; ++j) v = op.Combine(v, partial[j][tx]);
      op.Store(oc * inner + i, v);
    }
    __syncthreads();  // partial is rewritten by the next item
  }
}

template <typename Op>
void LaunchReduce(const Op& op, const Layout& l, const Chunking& c, cudaStream_t stream) {
  if (l.inner == 1) {
    const int64_t items = l.outer * c.chunks;
    ReduceRowsKernel<<<cuda::Blocks(items * cuda::kWarpSize), cuda::kThreads, 0, stream>>>(
        op, l.outer, l.r, c);
  } else {
    const int64_t items = l.outer * c.chunks * CeilDiv(l.inner, cuda::kWarpSize);
    ReduceColsKernel<<<cuda::Blocks(items, 1), dim3(cuda::kWarpSize, kColRows), 0, stream>>>(
        op, l.outer, l.r, l.inner, c);
  }
  ONEFLOW_CUDA_CHECK(cudaGetLastError());
}

// ---------------------------------------------------------------- sum

template <typename In, typename A, typename Out, typename R>
struct SumOp {
  const In* x;
  Out* y;
  __device__ A Identity() const { return R::template Identity<A>(); }
  __device__ A Combine(A a, A b) const { return R()(a, b); }
  __device__ A Load(int64_t i, int64_t) const { return static_cast<A>(x[i]); }
  __device__ void Store(int64_t i, A v) const { y[i] = static_cast<Out>(v); }
};

// y = x reduced by R (sum, prod) over r in A; partial passes keep A.
template <typename R, typename In, typename A, typename Out>
void SumLayout(const In* x, Out* y, const Layout& l, const Device& device, cudaStream_t stream) {
  const Chunking c = ChunkingFor(l);
  if (c.chunks == 1) {
    LaunchReduce(SumOp<In, A, Out, R>{x, y}, l, c, stream);
    return;
  }
  // Freed at return while the kernels may still be queued: the caching allocator only hands the
  // block to later work on the same stream.
  Tensor partial = Tensor::Empty(Shape({l.outer * c.chunks * l.inner}), ScratchDType<A>(), device);
  LaunchReduce(SumOp<In, A, A, R>{x, partial.data<A>()}, l, c, stream);
  SumLayout<R, A, A, Out>(partial.data<A>(), y, Layout{l.outer, c.chunks, l.inner}, device, stream);
}

std::vector<bool> ReducedMask(const Attrs& a, int64_t ndim) {
  const auto& dims = a.Get<std::vector<int64_t>>("dims");
  std::vector<bool> mask(ndim, dims.empty());
  if (ndim == 0) return mask;  // dim 0 or -1 of a 0-dim tensor: nothing to reduce
  for (int64_t d : dims) mask[WrapDim(d, ndim, "sum")] = true;  // checked by the inference
  return mask;
}

// x made contiguous with its reduced elements in one run: dims of size 1 are dropped, and when
// the reduced dims are not adjacent they are moved last (one copy).
Tensor Arrange(const Tensor& x, const std::vector<bool>& mask, Layout* l) {
  std::vector<int64_t> kept, reduced;
  int runs = 0;
  bool in_run = false;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    if (x.shape()[d] == 1) continue;
    if (mask[d] && !in_run) ++runs;
    in_run = mask[d];
    (mask[d] ? reduced : kept).push_back(d);
  }
  *l = Layout{1, 1, 1};
  if (runs <= 1) {
    const int64_t first = reduced.empty() ? x.ndim() : reduced.front();
    for (int64_t d : kept) (d < first ? l->outer : l->inner) *= x.shape()[d];
    for (int64_t d : reduced) l->r *= x.shape()[d];
    return fn::contiguous(x);
  }
  std::vector<int64_t> shape, strides;
  for (const auto* dims : {&kept, &reduced}) {
    for (int64_t d : *dims) {
      shape.push_back(x.shape()[d]);
      strides.push_back(x.strides()[d]);
    }
  }
  for (int64_t d : kept) l->outer *= x.shape()[d];
  for (int64_t d : reduced) l->r *= x.shape()[d];
  return fn::contiguous(Tensor::MakeView(x, Shape(shape), strides, x.offset()));
}

template <typename R>
std::vector<Tensor> SumCuda(const std::vector<Tensor>& in, const Attrs& a,
                            const std::vector<TensorMeta>& out) {
  const Tensor& x = in[0];
  if (IsHalf(x.dtype())) {
    // float16 and bfloat16 through float32 (summed in double like float32), rounded once.
    TensorMeta wide = out[0];
    wide.dtype = DType::kFloat32;
    Tensor y = Tensor::Empty(out[0]);
    fn::copy_(y, SumCuda<R>({fn::to_dtype(x, DType::kFloat32)}, a, {wide})[0]);
    return {y};
  }
  Tensor y = Tensor::Empty(out[0]);
  if (y.numel() == 0) return {y};
  Layout l;
  Tensor xc = Arrange(x, ReducedMask(a, x.ndim()), &l);
  cudaStream_t stream = cuda::StreamFor(x.device());
  DispatchAll(x.dtype(), "sum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Accumulate in double (floats) or int64 (integers and bool), as the CPU kernel does.
    constexpr bool kFloat = std::is_floating_point_v<T>;
    using A = std::conditional_t<kFloat, double, int64_t>;
    using O = std::conditional_t<kFloat, T, int64_t>;
    SumLayout<R, T, A, O>(xc.data<T>(), y.data<O>(), l, x.device(), stream);
  });
  return {y};
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
  return {cuda::ShflXor(a.v, mask), cuda::ShflXor(a.i, mask)};
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

// Values travel as W: T for floats, int64 for integers and bool (same order, shuffles well).
template <typename In, typename W, typename T, bool kMax>
void ArgReduceLayout(const In* x, const int64_t* x_index, T* y, int64_t* y_index, const Layout& l,
                     const Device& device, cudaStream_t stream) {
  const Chunking c = ChunkingFor(l);
  if (c.chunks == 1) {
    LaunchReduce(ArgOp<In, W, T, kMax>{x, x_index, y, y_index}, l, c, stream);
    return;
  }
  const Shape partial_shape({l.outer * c.chunks * l.inner});
  Tensor pv = Tensor::Empty(partial_shape, ScratchDType<W>(), device);
  Tensor pi = Tensor::Empty(partial_shape, DType::kInt64, device);
  LaunchReduce(ArgOp<In, W, W, kMax>{x, x_index, pv.data<W>(), pi.data<int64_t>()}, l, c, stream);
  ArgReduceLayout<W, W, T, kMax>(pv.data<W>(), pi.data<int64_t>(), y, y_index,
                                 Layout{l.outer, c.chunks, l.inner}, device, stream);
}

template <bool kMax>
std::vector<Tensor> ArgReduceCuda(const std::vector<Tensor>& in, const Attrs& a,
                                  const std::vector<TensorMeta>& out) {
  const char* op = kMax ? "max" : "min";
  if (IsHalf(in[0].dtype())) {
    // float16 and bfloat16 through float32: exact (the values widen and narrow back unchanged).
    std::vector<TensorMeta> wide = out;
    wide[0].dtype = DType::kFloat32;
    std::vector<Tensor> r = ArgReduceCuda<kMax>({fn::to_dtype(in[0], DType::kFloat32)}, a, wide);
    Tensor v = Tensor::Empty(out[0]);
    fn::copy_(v, r[0]);
    return {v, r[1]};
  }
  Tensor v = Tensor::Empty(out[0]);
  Tensor idx = Tensor::Empty(out[1]);
  if (v.numel() == 0) return {v, idx};
  Tensor x = fn::contiguous(in[0]);
  Layout l;
  const int64_t dim = x.ndim() ? WrapDim(a.Get<int64_t>("dim"), x.ndim(), op) : 0;
  l.r = x.ndim() ? x.shape()[dim] : 1;  // > 0: checked by the inference
  for (int64_t i = dim + 1; i < x.ndim(); ++i) l.inner *= x.shape()[i];
  l.outer = x.numel() / (l.r * l.inner);
  cudaStream_t stream = cuda::StreamFor(x.device());
  DispatchAll(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using W = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;
    ArgReduceLayout<T, W, T, kMax>(x.data<T>(), nullptr, v.data<T>(), idx.data<int64_t>(), l,
                                   x.device(), stream);
  });
  return {v, idx};
}

}  // namespace

ONEFLOW_REGISTER_KERNEL(sum, kCUDA, SumCuda<functors::SumR>);
ONEFLOW_REGISTER_KERNEL(prod, kCUDA, SumCuda<functors::ProdR>);
ONEFLOW_REGISTER_KERNEL(max_dim, kCUDA, ArgReduceCuda</*kMax=*/true>);
ONEFLOW_REGISTER_KERNEL(min_dim, kCUDA, ArgReduceCuda</*kMax=*/false>);

}  // namespace oneflow
