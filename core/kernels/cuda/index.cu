// CUDA kernels of the index ops (core/ops/index.cc: gather, scatter_add, index_select,
// index_select_grad) and of the copying shape ops (core/ops/shape.cc: slice_grad, cat).
// index_select (the embedding lookup) and index_select_grad (its deterministic gradient: a CUB
// radix sort of the positions by index, then a sum per run) are in kernels/embedding.cuh.
//
// Index tensors are read in place through their strides (the gradients of index_select and
// max pass expanded ones), and an out-of-range index raises the CPU kernel's IndexError at the
// next synchronisation point (see index_check.cuh). scatter_add accumulates with atomics, so float
// sums may differ from the CPU's in the last bits and from run to run.
#include <cstdint>
#include <cub/cub.cuh>
#include <string>
#include <type_traits>

#include "core/functional.h"
#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/cuda_util.h"
#include "core/kernels/cuda/index_check.cuh"
#include "core/kernels/cuda/kernels/bad_index.cuh"
#include "core/kernels/cuda/kernels/embedding.cuh"
#include "core/op_registry.h"
#include "core/ops/op_util.h"

namespace oneflow {

namespace {

// Calls f(TypeTag<I>{}) for an index dtype (the inference admits int32 and int64 only).
template <typename F>
void DispatchIndex(DType dtype, F&& f) {
  if (dtype == DType::kInt64) {
    f(TypeTag<int64_t>{});
  } else {
    f(TypeTag<int32_t>{});
  }
}

// Element e (row-major over the index's shape) of an index tensor of any strides.
template <typename I>
struct IndexReader {
  const I* p;
  bool contiguous;
  cuda::Geometry g = {};  // used when not contiguous
  __host__ __device__ int64_t Offset(int64_t e) const {
    return contiguous ? e : cuda::OffsetOf(g, e);
  }
  __device__ int64_t operator()(int64_t e) const { return static_cast<int64_t>(p[Offset(e)]); }
};

// *index is replaced by a contiguous copy when its rank is beyond what Geometry holds.
template <typename I>
IndexReader<I> MakeIndexReader(Tensor* index, const char* op) {
  if (!index->is_contiguous() && index->ndim() > cuda::kMaxDims) *index = fn::contiguous(*index);
  IndexReader<I> r;
  r.p = index->data<I>();
  r.contiguous = index->is_contiguous();
  if (!r.contiguous) r.g = cuda::BroadcastGeometry(*index, index->shape(), op);
  return r;
}

// The CPU's message, raised at the next synchronisation point when the kernels recorded a bad
// index (index_check.cuh).
template <typename I>
void ThrowIfBad(cuda::BadIndex& bad, const Tensor&, const IndexReader<I>& reader, int64_t bound,
                const char* op, int64_t dim, cudaStream_t) {
  bad.Report(reader, [op = std::string(op), dim, bound](int64_t k) {
    throw IndexError(
        StrCat(op, ": index ", k, " is out of bounds for dimension ", dim, " with size ", bound));
  });
}

// Wraps a negative index; false (after recording e) when it is out of [-bound, bound).
__device__ __forceinline__ bool WrapIndex(int64_t* t, int64_t bound, int64_t e, cuda::BadSlot bad) {
  if (*t < -bound || *t >= bound) {
    cuda::RecordBad(bad, e);
    return false;
  }
  if (*t < 0) *t += bound;
  return true;
}

// ---------------------------------------------------------------- gather

// y[i][j][k] = x[i][index[i][j][k]][k]; y has the index's shape, (outer, n_y, inner).
template <typename T, typename I>
__global__ void GatherKernel(const T* x, T* y, IndexReader<I> index, int64_t total, int64_t n_y,
                             int64_t n_x, int64_t inner, cuda::BadSlot bad) {
  ONEFLOW_CUDA_GRID_LOOP(e, total) {
    const int64_t k = e % inner, i = e / inner / n_y;
    int64_t t = index(e);
    if (!WrapIndex(&t, n_x, e, bad)) continue;
    y[e] = x[(i * n_x + t) * inner + k];
  }
}

std::vector<Tensor> GatherCuda(const std::vector<Tensor>& in, const Attrs& a,
                               const std::vector<TensorMeta>& out) {
  Tensor o = Tensor::Empty(out[0]);
  if (o.numel() == 0) return {o};
  Tensor x = fn::contiguous(in[0]);
  Tensor index = in[1];
  const int64_t dim = WrapDim(a.Get<int64_t>("dim"), x.ndim(), "gather");
  const Around xs = Split(x.shape(), dim), os = Split(o.shape(), dim);
  cudaStream_t stream = cuda::StreamFor(o.device());
  cuda::BadIndex bad(o.device(), stream);
  DispatchIndex(index.dtype(), [&](auto itag) {
    using I = typename decltype(itag)::type;
    const IndexReader<I> reader = MakeIndexReader<I>(&index, "gather");
    DispatchAll(x.dtype(), "gather", [&](auto tag) {
      using T = typename decltype(tag)::type;
      GatherKernel<<<cuda::Blocks(o.numel()), cuda::kThreads, 0, stream>>>(
          x.data<T>(), o.data<T>(), reader, o.numel(), os.n, xs.n, os.inner, bad.slot());
      ONEFLOW_CUDA_CHECK(cudaGetLastError());
    });
    ThrowIfBad(bad, index, reader, xs.n, "gather", dim, stream);
  });
  return {o};
}

// ---------------------------------------------------------------- scatter_add

// *p += v for the element types scatter_add takes. One-byte types go through a compare-and-swap
// of the aligned word holding them (allocations are word aligned, so the word is in bounds);
// their sum wraps as the CPU's `+=` does, and bool's is logical or.
template <typename T>
__device__ __forceinline__ void AtomicAdd(T* p, T v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                std::is_same_v<T, int32_t> || std::is_same_v<T, __half> ||
                std::is_same_v<T, __nv_bfloat16>) {
    atomicAdd(p, v);  // the half types' atomicAdd: sm_70 (__half) and sm_80 (bfloat16) on
  } else if constexpr (std::is_same_v<T, int64_t>) {
    static_assert(sizeof(int64_t) == sizeof(unsigned long long));
    // Two's complement: adding the unsigned image adds the signed value.
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  } else {
    static_assert(sizeof(T) == 1, "AtomicAdd: unsupported element type");
    const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
    unsigned int* word = reinterpret_cast<unsigned int*>(addr & ~uintptr_t{3});
    const unsigned int shift = static_cast<unsigned int>(addr & 3) * 8;
    unsigned int old = *word, assumed;
    do {
      assumed = old;
      const T cur = static_cast<T>((assumed >> shift) & 0xffu);
      const unsigned int next = static_cast<unsigned char>(static_cast<T>(cur + v));
      old = atomicCAS(word, assumed, (assumed & ~(0xffu << shift)) | (next << shift));
    } while (old != assumed);
  }
}

// y[i][index[i][j][k]][k] += src[i][j][k]; src (outer, n_src, inner_src) is contiguous.
template <typename T, typename I>
__global__ void ScatterAddKernel(const T* src, T* y, IndexReader<I> index, int64_t total,
                                 int64_t n_src, int64_t inner_src, int64_t n_y, int64_t inner_y,
                                 int64_t y_total, cuda::BadSlot bad) {
  ONEFLOW_CUDA_GRID_LOOP(e, total) {
    const int64_t k = e % inner_src, i = e / inner_src / n_src;
    int64_t t = index(e);
    if (!WrapIndex(&t, n_y, e, bad)) continue;
    const int64_t dst = (i * n_y + t) * inner_y + k;
    // The inference does not tie src's other dims to y's; never write outside y.
    if (dst < y_total) AtomicAdd(y + dst, src[e]);
  }
}

std::vector<Tensor> ScatterAddCuda(const std::vector<Tensor>& in, const Attrs& a,
                                   const std::vector<TensorMeta>& out) {
  Tensor o = Tensor::Empty(out[0]);
  cudaStream_t stream = cuda::StreamFor(o.device());
  if (o.numel() > 0) {
    ONEFLOW_CUDA_CHECK(cudaMemsetAsync(o.raw_data(), 0, o.numel() * SizeOf(o.dtype()), stream));
  }
  const int64_t dim = WrapDim(a.Get<int64_t>("dim"), o.ndim(), "scatter_add");
  Tensor src = fn::contiguous(in[1]);
  if (src.numel() == 0) return {o};
  Tensor index = in[0];
  const Around os = Split(o.shape(), dim), ss = Split(src.shape(), dim);
  cuda::BadIndex bad(o.device(), stream);
  DispatchIndex(index.dtype(), [&](auto itag) {
    using I = typename decltype(itag)::type;
    const IndexReader<I> reader = MakeIndexReader<I>(&index, "scatter_add");
    DispatchWithHalf(o.dtype(), "scatter_add", [&](auto tag) {
      using T = cuda::DevT<typename decltype(tag)::type>;  // __half, __nv_bfloat16 for the halves
      ScatterAddKernel<<<cuda::Blocks(src.numel()), cuda::kThreads, 0, stream>>>(
          reinterpret_cast<const T*>(src.raw_data()), reinterpret_cast<T*>(o.raw_data()), reader,
          src.numel(), ss.n, ss.inner, os.n, os.inner, o.numel(), bad.slot());
      ONEFLOW_CUDA_CHECK(cudaGetLastError());
    });
    ThrowIfBad(bad, index, reader, os.n, "scatter_add", dim, stream);
  });
  return {o};
}

// ---------------------------------------------------------------- index_select

template <typename I>
__global__ void CheckIndexKernel(IndexReader<I> index, int64_t count, int64_t bound,
                                 cuda::BadSlot bad) {
  ONEFLOW_CUDA_GRID_LOOP(j, count) {
    int64_t t = index(j);
    WrapIndex(&t, bound, j, bad);
  }
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <typename F>
void DispatchBySize(size_t size, F&& f) {
  switch (size) {
    case 1:
      return f(TypeTag<uint8_t>{});
    case 2:
      return f(TypeTag<uint16_t>{});
    case 4:
      return f(TypeTag<uint32_t>{});
    default:
      return f(TypeTag<uint64_t>{});
  }
}

std::vector<Tensor> IndexSelectCuda(const std::vector<Tensor>& in, const Attrs& a,
                                    const std::vector<TensorMeta>& out) {
  Tensor x = fn::contiguous(in[0]);
  Tensor index = in[1];
  Tensor o = Tensor::Empty(out[0]);
  const int64_t dim = x.ndim() ? WrapDim(a.Get<int64_t>("dim"), x.ndim(), "index_select") : 0;
  const Around xs = Split(x.shape(), dim);
  const int64_t count = index.numel();
  if (count == 0) return {o};
  cudaStream_t stream = cuda::StreamFor(x.device());
  cuda::BadIndex bad(x.device(), stream);
  DispatchIndex(index.dtype(), [&](auto itag) {
    using I = typename decltype(itag)::type;
    const IndexReader<I> reader = MakeIndexReader<I>(&index, "index_select");
    // Every index is checked, as on CPU, even when the output is empty.
    CheckIndexKernel<<<cuda::Blocks(count), cuda::kThreads, 0, stream>>>(reader, count, xs.n,
                                                                         bad.slot());
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
    if (o.numel() > 0) {
      const I* pi = index.data<I>();
      const int64_t stride = index.ndim() == 1 ? index.strides()[0] : 0;
      const size_t es = SizeOf(x.dtype());
      using Pack16 = cuda::row::Pack<uint32_t, 4>;
      if (xs.inner * es % sizeof(Pack16) == 0 && Aligned16(x.raw_data()) &&
          Aligned16(o.raw_data())) {
        cuda::embedding::Forward(static_cast<const Pack16*>(x.raw_data()),
                                 static_cast<Pack16*>(o.raw_data()), pi, stride, count, xs.outer,
                                 xs.n, static_cast<int64_t>(xs.inner * es / sizeof(Pack16)),
                                 stream);
      } else {
        DispatchBySize(es, [&](auto etag) {
          using E = typename decltype(etag)::type;
          cuda::embedding::Forward(static_cast<const E*>(x.raw_data()),
                                   static_cast<E*>(o.raw_data()), pi, stride, count, xs.outer, xs.n,
                                   xs.inner, stream);
        });
      }
    }
    ThrowIfBad(bad, index, reader, xs.n, "index_select", dim, stream);
  });
  return {o};
}

// index_select_grad(g, index): zeros, then each run of equal indices adds its rows of g in
// position order (the positions sorted stably by index with CUB's radix sort).
std::vector<Tensor> IndexSelectGradCuda(const std::vector<Tensor>& in, const Attrs& a,
                                        const std::vector<TensorMeta>& out) {
  Tensor g = fn::contiguous(in[0]);
  Tensor index = in[1];
  Tensor o = Tensor::Empty(out[0]);
  cudaStream_t stream = cuda::StreamFor(o.device());
  if (o.numel() > 0) {
    ONEFLOW_CUDA_CHECK(cudaMemsetAsync(o.raw_data(), 0, o.numel() * SizeOf(o.dtype()), stream));
  }
  const int64_t dim = WrapDim(a.Get<int64_t>("dim"), o.ndim(), "index_select_grad");
  const Around os = Split(o.shape(), dim);
  const int64_t count = index.numel();
  if (count == 0) return {o};
  cuda::BadIndex bad(o.device(), stream);
  DispatchIndex(index.dtype(), [&](auto itag) {
    using I = typename decltype(itag)::type;
    const IndexReader<I> reader = MakeIndexReader<I>(&index, "index_select_grad");
    CheckIndexKernel<<<cuda::Blocks(count), cuda::kThreads, 0, stream>>>(reader, count, os.n,
                                                                         bad.slot());
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
    if (o.numel() > 0) {
      const int64_t stride = index.ndim() == 1 ? index.strides()[0] : 0;
      auto make = [&](int64_t n) { return Tensor::Empty(Shape({n}), DType::kInt64, o.device()); };
      Tensor keys = make(count), positions = make(count), sorted_keys = make(count),
             sorted_positions = make(count);
      cuda::embedding::SortKeys(index.data<I>(), stride, count, os.n, keys.data<int64_t>(),
                                positions.data<int64_t>(), stream);
      // Keys lie in [0, n] (n: out of range, sorted last): sort only their low bits.
      int end_bit = 1;
      while (end_bit < 63 && (int64_t{1} << end_bit) <= os.n) ++end_bit;
      size_t temp_bytes = 0;
      ONEFLOW_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
          nullptr, temp_bytes, keys.data<int64_t>(), sorted_keys.data<int64_t>(),
          positions.data<int64_t>(), sorted_positions.data<int64_t>(), count, 0, end_bit, stream));
      Tensor temp =
          Tensor::Empty(Shape({static_cast<int64_t>(temp_bytes) + 1}), DType::kUInt8, o.device());
      ONEFLOW_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
          temp.raw_data(), temp_bytes, keys.data<int64_t>(), sorted_keys.data<int64_t>(),
          positions.data<int64_t>(), sorted_positions.data<int64_t>(), count, 0, end_bit, stream));
      DispatchWithHalf(o.dtype(), "index_select_grad", [&](auto tag) {
        using T = typename decltype(tag)::type;
        cuda::embedding::Backward(cuda::Ptr<T>(g), sorted_keys.data<int64_t>(),
                                  sorted_positions.data<int64_t>(), count, os.outer, os.n, os.inner,
                                  cuda::Ptr<T>(o), stream);
      });
    }
    ThrowIfBad(bad, index, reader, os.n, "index_select_grad", dim, stream);
  });
  return {o};
}

// ---------------------------------------------------------------- slice_grad, cat

// Zeros of the input's shape with the gradient written into the slice.
std::vector<Tensor> SliceGradCuda(const std::vector<Tensor>& in, const Attrs& a,
                                  const std::vector<TensorMeta>& out) {
  Tensor o = Tensor::Empty(out[0]);
  if (o.numel() == 0) return {o};
  cudaStream_t stream = cuda::StreamFor(o.device());
  ONEFLOW_CUDA_CHECK(cudaMemsetAsync(o.raw_data(), 0, o.numel() * SizeOf(o.dtype()), stream));
  // The slice op's own view of o, so its start/end clamping is the one used here.
  Tensor window = fn::slice(o, a.Get<int64_t>("dim"), a.Get<int64_t>("start"),
                            a.Get<int64_t>("end"), a.Get<int64_t>("step"));
  if (in[0].numel() > 0) cuda::CopyStrided(window, in[0]);
  return {o};
}

std::vector<Tensor> CatCuda(const std::vector<Tensor>& in, const Attrs& a,
                            const std::vector<TensorMeta>& out) {
  Tensor o = Tensor::Empty(out[0]);
  const int64_t dim = WrapDim(a.Get<int64_t>("dim"), o.ndim(), "cat");
  int64_t pos = 0;
  for (const Tensor& x : in) {
    const int64_t n = x.shape()[dim];
    if (n == 0) continue;
    if (x.numel() > 0) {
      cuda::CopyStrided(Tensor::MakeView(o, x.shape(), o.strides(), pos * o.strides()[dim]), x);
    }
    pos += n;
  }
  return {o};
}

// ---------------------------------------------------------------- tril / triu, flip, scatter
// (the everyday-API additions in core/ops/index.cc)

template <typename T, bool kUpper>
__global__ void TriangleKernel(const T* x, T* y, int64_t total, int64_t rows, int64_t cols,
                               int64_t diag) {
  ONEFLOW_CUDA_GRID_LOOP(e, total) {
    const int64_t j = e % cols, i = (e / cols) % rows;
    const bool keep = kUpper ? j - i >= diag : j - i <= diag;
    y[e] = keep ? x[e] : T(0);
  }
}

template <bool kUpper>
std::vector<Tensor> TriangleCuda(const std::vector<Tensor>& in, const Attrs& a,
                                 const std::vector<TensorMeta>& out) {
  Tensor x = fn::contiguous(in[0]);
  Tensor o = Tensor::Empty(out[0]);
  if (o.numel() == 0) return {o};
  const int64_t rows = x.shape()[x.ndim() - 2], cols = x.shape()[x.ndim() - 1];
  cudaStream_t stream = cuda::StreamFor(o.device());
  DispatchAll(x.dtype(), kUpper ? "triu" : "tril", [&](auto tag) {
    using T = typename decltype(tag)::type;
    TriangleKernel<T, kUpper><<<cuda::Blocks(o.numel()), cuda::kThreads, 0, stream>>>(
        x.data<T>(), o.data<T>(), o.numel(), rows, cols, a.Get<int64_t>("diagonal"));
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
  });
  return {o};
}

// Sizes, contiguous strides and which dims are flipped, by value.
struct FlipGeometry {
  int ndim = 0;
  int64_t sizes[cuda::kMaxDims];
  int64_t strides[cuda::kMaxDims];
  bool flipped[cuda::kMaxDims];
};

template <typename E>
__global__ void FlipKernel(const E* x, E* y, int64_t total, FlipGeometry g) {
  ONEFLOW_CUDA_GRID_LOOP(e, total) {
    int64_t rest = e, src = 0;
    for (int d = g.ndim - 1; d >= 0; --d) {
      const int64_t c = rest % g.sizes[d];
      rest /= g.sizes[d];
      src += (g.flipped[d] ? g.sizes[d] - 1 - c : c) * g.strides[d];
    }
    y[e] = x[src];
  }
}

std::vector<Tensor> FlipCuda(const std::vector<Tensor>& in, const Attrs& a,
                             const std::vector<TensorMeta>& out) {
  Tensor x = fn::contiguous(in[0]);
  Tensor o = Tensor::Empty(out[0]);
  if (o.numel() == 0) return {o};
  ONEFLOW_CHECK(x.ndim() <= cuda::kMaxDims, "flip: at most ", cuda::kMaxDims, " dims on CUDA, got ",
                x.ndim());
  FlipGeometry g;
  g.ndim = static_cast<int>(x.ndim());
  for (int d = 0; d < g.ndim; ++d) {
    g.sizes[d] = x.shape()[d];
    g.strides[d] = x.strides()[d];
    g.flipped[d] = false;
  }
  for (int64_t d : a.Get<std::vector<int64_t>>("dims"))
    g.flipped[WrapDim(d, x.ndim(), "flip")] = true;
  cudaStream_t stream = cuda::StreamFor(o.device());
  DispatchBySize(SizeOf(x.dtype()), [&](auto etag) {
    using E = typename decltype(etag)::type;
    FlipKernel<<<cuda::Blocks(o.numel()), cuda::kThreads, 0, stream>>>(
        static_cast<const E*>(x.raw_data()), static_cast<E*>(o.raw_data()), o.numel(), g);
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
  });
  return {o};
}

// The index's sizes and the output's strides, by value.
struct ScatterGeometry {
  int ndim = 0;
  int dim = 0;
  int64_t index_sizes[cuda::kMaxDims];
  int64_t out_strides[cuda::kMaxDims];
};

// out[..., index[e], ...] = src[e] (or += with kAdd); src is contiguous with the index's shape.
template <typename T, typename I, bool kAdd>
__global__ void ScatterKernel(const T* src, T* y, IndexReader<I> index, int64_t total,
                              int64_t bound, ScatterGeometry g, cuda::BadSlot bad) {
  ONEFLOW_CUDA_GRID_LOOP(e, total) {
    int64_t t = index(e);
    if (!WrapIndex(&t, bound, e, bad)) continue;
    int64_t rest = e, dst = 0;
    for (int d = g.ndim - 1; d >= 0; --d) {
      const int64_t c = rest % g.index_sizes[d];
      rest /= g.index_sizes[d];
      dst += (d == g.dim ? t : c) * g.out_strides[d];
    }
    if constexpr (kAdd) {
      AtomicAdd(y + dst, src[e]);
    } else {
      y[dst] = src[e];
    }
  }
}

std::vector<Tensor> ScatterCuda(const std::vector<Tensor>& in, const Attrs& a,
                                const std::vector<TensorMeta>& out) {
  const bool add = a.Get<std::string>("reduce") == "add";
  const char* op = add ? "scatter_add" : "scatter";
  Tensor o = fn::contiguous_copy(in[0]);
  Tensor src = fn::contiguous(in[2]);
  if (src.numel() == 0) return {o};
  Tensor index = in[1];
  const int64_t nd = o.ndim(), dim = nd ? WrapDim(a.Get<int64_t>("dim"), nd, op) : 0;
  const int64_t bound = nd ? o.shape()[dim] : 1;
  ONEFLOW_CHECK(nd <= cuda::kMaxDims, op, ": at most ", cuda::kMaxDims, " dims on CUDA, got ", nd);
  ScatterGeometry g;
  g.ndim = static_cast<int>(nd);
  g.dim = static_cast<int>(dim);
  for (int d = 0; d < g.ndim; ++d) {
    g.index_sizes[d] = src.shape()[d];
    g.out_strides[d] = o.strides()[d];
  }
  cudaStream_t stream = cuda::StreamFor(o.device());
  cuda::BadIndex bad(o.device(), stream);
  DispatchIndex(index.dtype(), [&](auto itag) {
    using I = typename decltype(itag)::type;
    const IndexReader<I> reader = MakeIndexReader<I>(&index, op);
    DispatchAll(o.dtype(), op, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (add) {
        ScatterKernel<T, I, true><<<cuda::Blocks(src.numel()), cuda::kThreads, 0, stream>>>(
            src.data<T>(), o.data<T>(), reader, src.numel(), bound, g, bad.slot());
      } else {
        ScatterKernel<T, I, false><<<cuda::Blocks(src.numel()), cuda::kThreads, 0, stream>>>(
            src.data<T>(), o.data<T>(), reader, src.numel(), bound, g, bad.slot());
      }
      ONEFLOW_CUDA_CHECK(cudaGetLastError());
    });
    ThrowIfBad(bad, index, reader, bound, op, dim, stream);
  });
  return {o};
}

}  // namespace

ONEFLOW_REGISTER_KERNEL(gather, kCUDA, GatherCuda);
ONEFLOW_REGISTER_KERNEL(scatter_add, kCUDA, ScatterAddCuda);
ONEFLOW_REGISTER_KERNEL(index_select, kCUDA, IndexSelectCuda);
ONEFLOW_REGISTER_KERNEL(index_select_grad, kCUDA, IndexSelectGradCuda);
ONEFLOW_REGISTER_KERNEL(slice_grad, kCUDA, SliceGradCuda);
ONEFLOW_REGISTER_KERNEL(cat, kCUDA, CatCuda);
ONEFLOW_REGISTER_KERNEL(tril, kCUDA, TriangleCuda<false>);
ONEFLOW_REGISTER_KERNEL(triu, kCUDA, TriangleCuda<true>);
ONEFLOW_REGISTER_KERNEL(flip, kCUDA, FlipCuda);
ONEFLOW_REGISTER_KERNEL(scatter, kCUDA, ScatterCuda);

}  // namespace oneflow
