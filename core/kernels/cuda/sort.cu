// CUDA kernels of the row ops in core/ops/sort.cc: sort, cumsum and cumprod. One thread per
// row (outer * inner rows of n elements, stride inner): simple and exact, not fast for long
// rows. sort is a stable insertion sort (NaN last, as on CPU); the scans accumulate floats in
// double and integers in int64, as the CPU kernels do.
#include <cmath>
#include <type_traits>

#include "core/functional.h"
#include "core/kernels/cuda/cuda_util.h"
#include "core/op_registry.h"
#include "core/ops/op_util.h"

namespace oneflow {

namespace {

int64_t RowDim(const Attrs& a, int64_t ndim, const char* op) {
  return ndim ? WrapDim(a.Get<int64_t>("dim"), ndim, op) : 0;
}

template <typename T>
__device__ __forceinline__ bool LessNanLast(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (isnan(a)) return false;
    if (isnan(b)) return true;
  }
  return a < b;
}

template <typename T>
__global__ void SortRowsKernel(const T* x, T* v, int64_t* idx, int64_t rows, int64_t n,
                               int64_t inner, bool descending) {
  ONEFLOW_CUDA_GRID_LOOP(r, rows) {
    const int64_t base = (r / inner) * n * inner + r % inner;
    for (int64_t j = 0; j < n; ++j) {
      const T key = x[base + j * inner];
      int64_t k = j - 1;
      // Shift the sorted prefix right past every element key must precede (strictly: stable).
      while (k >= 0) {
        const T cur = v[base + k * inner];
        const bool before = descending ? LessNanLast(cur, key) : LessNanLast(key, cur);
        if (!before) break;
        v[base + (k + 1) * inner] = cur;
        idx[base + (k + 1) * inner] = idx[base + k * inner];
        --k;
      }
      v[base + (k + 1) * inner] = key;
      idx[base + (k + 1) * inner] = j;
    }
  }
}

std::vector<Tensor> SortCuda(const std::vector<Tensor>& in, const Attrs& a,
                             const std::vector<TensorMeta>& out) {
  Tensor x = fn::contiguous(in[0]);
  Tensor v = Tensor::Empty(out[0]), idx = Tensor::Empty(out[1]);
  if (x.numel() == 0) return {v, idx};
  const int64_t dim = RowDim(a, x.ndim(), "sort");
  const Around s = Split(x.shape(), dim);
  const int64_t rows = s.outer * s.inner;
  cudaStream_t stream = cuda::StreamFor(x.device());
  DispatchAll(x.dtype(), "sort", [&](auto tag) {
    using T = typename decltype(tag)::type;
    SortRowsKernel<<<cuda::Blocks(rows), cuda::kThreads, 0, stream>>>(
        x.data<T>(), v.data<T>(), idx.data<int64_t>(), rows, s.n, s.inner,
        a.Get<bool>("descending"));
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
  });
  return {v, idx};
}

template <typename T, bool kProd>
__global__ void ScanRowsKernel(const T* x, T* y, int64_t rows, int64_t n, int64_t inner,
                               bool reverse) {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
  ONEFLOW_CUDA_GRID_LOOP(r, rows) {
    const int64_t base = (r / inner) * n * inner + r % inner;
    Acc acc = kProd ? Acc(1) : Acc(0);
    for (int64_t t = 0; t < n; ++t) {
      const int64_t j = reverse ? n - 1 - t : t;
      const Acc e = static_cast<Acc>(x[base + j * inner]);
      acc = kProd ? acc * e : acc + e;
      y[base + j * inner] = static_cast<T>(acc);
    }
  }
}

template <bool kProd>
std::vector<Tensor> ScanCuda(const std::vector<Tensor>& in, const Attrs& a,
                             const std::vector<TensorMeta>& out) {
  const char* op = kProd ? "cumprod" : "cumsum";
  Tensor x = in[0].dtype() == out[0].dtype ? in[0] : fn::to_dtype(in[0], out[0].dtype);
  x = fn::contiguous(x);
  Tensor o = Tensor::Empty(out[0]);
  if (o.numel() == 0) return {o};
  const int64_t dim = RowDim(a, x.ndim(), op);
  const bool reverse = a.Has("reverse") && a.Get<bool>("reverse");
  const Around s = Split(x.shape(), dim);
  const int64_t rows = s.outer * s.inner;
  cudaStream_t stream = cuda::StreamFor(o.device());
  DispatchAll(o.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    ScanRowsKernel<T, kProd><<<cuda::Blocks(rows), cuda::kThreads, 0, stream>>>(
        x.data<T>(), o.data<T>(), rows, s.n, s.inner, reverse);
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
  });
  return {o};
}

}  // namespace

ONEFLOW_REGISTER_KERNEL(sort, kCUDA, SortCuda);
ONEFLOW_REGISTER_KERNEL(cumsum, kCUDA, ScanCuda<false>);
ONEFLOW_REGISTER_KERNEL(cumprod, kCUDA, ScanCuda<true>);

}  // namespace oneflow
