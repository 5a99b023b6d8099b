// CUDA kernels of softmax and log_softmax (core/ops/nn/softmax.cc) and of nll_loss and its
// gradient (core/ops/nn/loss.cc).
//
// softmax runs on x seen as (outer, d, inner) around its dim: rows (inner == 1) take a warp
// each, or a block when longer than kWarpRowMax; columns (inner > 1) take a block of 32
// columns by kColRows threads down the dim. Both follow the CPU's recipe: the max ignores NaN,
// an infinite max shifts by 0 (a row of -inf stays -inf / 0 rather than nan), and the math is
// in the input's type. The loss sums in one block, in double as on CPU, so the result does
// not depend on scheduling.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "core/functional.h"
#include "core/kernels/cuda/cuda_util.h"
#include "core/kernels/cuda/index_check.cuh"
#include "core/kernels/cuda/reduce_util.cuh"
#include "core/op_registry.h"
#include "core/ops/nn/nn_util.h"

namespace oneflow {

namespace {

using cuda::CeilDiv;

constexpr int64_t kWarpRowMax = 1024;  // longer rows are worth a block each
constexpr int kColRows = 8;
// One block sums all targets. Kernels launched with it declare __launch_bounds__(kLossThreads):
// without it nvcc may use more registers than 1024 threads of a block can have, and the launch
// fails with "too many resources requested for launch".
constexpr int kLossThreads = 1024;

__device__ __forceinline__ float Exp(float v) { return expf(v); }
__device__ __forceinline__ double Exp(double v) { return exp(v); }
__device__ __forceinline__ float Log(float v) { return logf(v); }
__device__ __forceinline__ double Log(double v) { return log(v); }

// std::max(a, b) as the CPU uses it: a NaN b leaves a.
template <typename T>
__device__ __forceinline__ T MaxOf(T a, T b) {
  return a < b ? b : a;
}
template <typename T>
__device__ __forceinline__ T SumOf(T a, T b) {
  return a + b;
}

// ---------------------------------------------------------------- softmax, log_softmax

// One row of d elements per group of threads (a warp, or the whole block).
template <typename T, bool kLog, bool kBlockPerRow>
__global__ void SoftmaxRowsKernel(const T* x, T* y, int64_t rows, int64_t d) {
  __shared__ T smem[cuda::kWarpSize];
  const int group = kBlockPerRow ? blockDim.x : cuda::kWarpSize;
  const int64_t groups_per_block = blockDim.x / group;
  const int t = threadIdx.x % group;
  auto reduce = [&](T v, auto combine, T identity) {
    if constexpr (kBlockPerRow) {
      return cuda::BlockReduce(v, combine, identity, smem);
    } else {
      return cuda::WarpReduce(v, combine);
    }
  };
  auto max_of = [](T a, T b) { return MaxOf(a, b); };
  auto sum_of = [](T a, T b) { return SumOf(a, b); };
  for (int64_t row = blockIdx.x * groups_per_block + threadIdx.x / group; row < rows;
       row += gridDim.x * groups_per_block) {
    const T* xr = x + row * d;
    T* yr = y + row * d;
    T mx = -std::numeric_limits<T>::infinity();
    for (int64_t k = t; k < d; k += group) mx = MaxOf(mx, xr[k]);
    mx = reduce(mx, max_of, -std::numeric_limits<T>::infinity());
    if (isinf(mx)) mx = T(0);
    T sum = 0;
    for (int64_t k = t; k < d; k += group) {
      const T e = Exp(xr[k] - mx);
      sum += e;
      if (!kLog) yr[k] = e;
    }
    sum = reduce(sum, sum_of, T(0));
    if (kLog) {
      const T log_sum = Log(sum);
      for (int64_t k = t; k < d; k += group) yr[k] = xr[k] - mx - log_sum;
    } else {
      for (int64_t k = t; k < d; k += group) yr[k] = yr[k] / sum;  // this thread's own writes
    }
  }
}

// v reduced over the kColRows threads of each column of the block; all of them get it.
template <typename T, typename F>
__device__ __forceinline__ T ColumnReduce(T v, F combine, T (*part)[cuda::kWarpSize]) {
  part[threadIdx.y][threadIdx.x] = v;
  __syncthreads();
  T r = part[0][threadIdx.x];
  for (int j = 1; j < kColRows; ++j) r = combine(r, part[j][threadIdx.x]);
  __syncthreads();  // part is rewritten by the next call
  return r;
}

// Columns i of x (outer, d, inner), 32 of them per block, kColRows threads down each.
template <typename T, bool kLog>
__global__ void SoftmaxColsKernel(const T* x, T* y, int64_t outer, int64_t d, int64_t inner) {
  __shared__ T part[kColRows][cuda::kWarpSize];
  const int64_t tiles = CeilDiv(inner, cuda::kWarpSize);
  const int ty = threadIdx.y;
  auto max_of = [](T a, T b) { return MaxOf(a, b); };
  auto sum_of = [](T a, T b) { return SumOf(a, b); };
  for (int64_t item = blockIdx.x; item < outer * tiles; item += gridDim.x) {
    const int64_t i = item % tiles * cuda::kWarpSize + threadIdx.x;
    const bool active = i < inner;
    const int64_t base = item / tiles * d * inner + i;
    const T* xc = x + base;
    T* yc = y + base;
    T mx = -std::numeric_limits<T>::infinity();
    if (active) {
      for (int64_t k = ty; k < d; k += kColRows) mx = MaxOf(mx, xc[k * inner]);
    }
    mx = ColumnReduce(mx, max_of, part);
    if (isinf(mx)) mx = T(0);
    T sum = 0;
    if (active) {
      for (int64_t k = ty; k < d; k += kColRows) {
        const T e = Exp(xc[k * inner] - mx);
        sum += e;
        if (!kLog) yc[k * inner] = e;
      }
    }
    sum = ColumnReduce(sum, sum_of, part);
    if (!active) continue;
    if (kLog) {
      const T log_sum = Log(sum);
      for (int64_t k = ty; k < d; k += kColRows) yc[k * inner] = xc[k * inner] - mx - log_sum;
    } else {
      for (int64_t k = ty; k < d; k += kColRows) yc[k * inner] = yc[k * inner] / sum;
    }
  }
}

template <bool kLog>
std::vector<Tensor> SoftmaxCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                const std::vector<TensorMeta>& out) {
  const char* op = kLog ? "log_softmax" : "softmax";
  Tensor y = Tensor::Empty(out[0]);
  // The CPU kernel's dtype error, for empty tensors too.
  DispatchFloating(in[0].dtype(), op, [](auto) {});
  if (y.numel() == 0) return {y};
  Tensor x = fn::contiguous(in[0]);
  int64_t outer = 1, d = 1, inner = 1;
  if (x.ndim() > 0) {
    const int64_t dim = WrapDim(attrs.Get<int64_t>("dim"), x.ndim(), op);
    for (int64_t i = 0; i < dim; ++i) outer *= x.shape()[i];
    d = x.shape()[dim];
    for (int64_t i = dim + 1; i < x.ndim(); ++i) inner *= x.shape()[i];
  }
  cudaStream_t stream = cuda::StreamFor(x.device());
  DispatchFloating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    if (inner > 1) {
      const int64_t items = outer * CeilDiv(inner, cuda::kWarpSize);
      SoftmaxColsKernel<T, kLog>
          <<<cuda::Blocks(items, 1), dim3(cuda::kWarpSize, kColRows), 0, stream>>>(px, py, outer, d,
                                                                                   inner);
    } else if (d <= kWarpRowMax) {
      SoftmaxRowsKernel<T, kLog, false>
          <<<cuda::Blocks(outer * cuda::kWarpSize), cuda::kThreads, 0, stream>>>(px, py, outer, d);
    } else {
      SoftmaxRowsKernel<T, kLog, true>
          <<<cuda::Blocks(outer, 1), cuda::kThreads, 0, stream>>>(px, py, outer, d);
    }
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
  });
  return {y};
}

// ---------------------------------------------------------------- nll_loss, nll_loss_grad

// Input seen as (n, c, inner) and target as (n, inner), exactly as the CPU kernel sees them
// (inner is 0 when n * c is, so no target is read then).
using nn_util::NllLayout;

__host__ __device__ inline int64_t Targets(const NllLayout& l) { return l.n * l.inner; }

enum class Reduction { kNone, kSum, kMean };

Reduction ParseReduction(const std::string& r) {
  return r == "none" ? Reduction::kNone : r == "sum" ? Reduction::kSum : Reduction::kMean;
}

// The input offset of target j, or -1 when it is ignored or out of range (recorded in bad).
__device__ __forceinline__ int64_t TargetOffset(const int64_t* target, int64_t j,
                                                const NllLayout& l, int64_t ignore_index,
                                                cuda::BadSlot bad) {
  const int64_t t = target[j];
  if (t == ignore_index) return -1;
  if (t < 0 || t >= l.c) {
    cuda::RecordBad(bad, j);
    return -1;
  }
  return (j / l.inner * l.c + t) * l.inner + j % l.inner;
}

template <typename T>
__global__ void NllNoneKernel(const T* x, const int64_t* target, T* y, NllLayout l,
                              int64_t ignore_index, cuda::BadSlot bad) {
  ONEFLOW_CUDA_GRID_LOOP(j, Targets(l)) {
    const int64_t xi = TargetOffset(target, j, l, ignore_index, bad);
    if (xi >= 0) y[j] = -x[xi];  // ignored targets keep the zero written before
  }
}

// One block: y = -sum of the picked log-probabilities (divided by their count for mean).
template <typename T>
__global__ void __launch_bounds__(kLossThreads)
    NllReduceKernel(const T* x, const int64_t* target, T* y, NllLayout l, int64_t ignore_index,
                    bool mean, cuda::BadSlot bad) {
  __shared__ double total_smem[cuda::kWarpSize];
  __shared__ int64_t count_smem[cuda::kWarpSize];
  double total = 0;
  int64_t count = 0;
  for (int64_t j = threadIdx.x; j < Targets(l); j += blockDim.x) {
    const int64_t xi = TargetOffset(target, j, l, ignore_index, bad);
    if (xi < 0) continue;
    total -= x[xi];
    ++count;
  }
  total = cuda::BlockReduce(total, SumOf<double>, 0.0, total_smem);
  count = cuda::BlockReduce(count, SumOf<int64_t>, int64_t{0}, count_smem);
  // No targets: 0 for sum and 0 / 0 = nan for mean, as in PyTorch.
  if (threadIdx.x == 0) y[0] = static_cast<T>(mean ? total / static_cast<double>(count) : total);
}

void ThrowIfBadTarget(const cuda::BadIndex& bad, const Tensor& target, const NllLayout& l,
                      cudaStream_t stream) {
  const int64_t pos = bad.First(stream);
  if (pos < 0) return;
  const int64_t t = cuda::ReadIndexValue(target, pos, stream);
  throw Error(StrCat("nll_loss: target ", t, " is out of bounds for ", l.c, " classes"));
}

std::vector<Tensor> NllLossCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                const std::vector<TensorMeta>& out) {
  Tensor x = fn::contiguous(in[0]), target = fn::contiguous(in[1]);
  const NllLayout l = nn_util::NllLayoutOf(x.shape());
  const Reduction reduction = ParseReduction(attrs.Get<std::string>("reduction"));
  const int64_t ignore_index = attrs.Get<int64_t>("ignore_index");
  Tensor y = Tensor::Empty(out[0]);
  cudaStream_t stream = cuda::StreamFor(x.device());
  cuda::BadIndex bad(x.device(), stream);
  DispatchFloating(x.dtype(), "nll_loss", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    const int64_t* pt = target.data<int64_t>();
    T* py = y.data<T>();
    if (reduction == Reduction::kNone) {
      if (y.numel() == 0) return;
      ONEFLOW_CUDA_CHECK(cudaMemsetAsync(py, 0, y.numel() * sizeof(T), stream));
      if (Targets(l) == 0) return;
      NllNoneKernel<<<cuda::Blocks(Targets(l)), cuda::kThreads, 0, stream>>>(
          px, pt, py, l, ignore_index, bad.slot());
    } else {
      NllReduceKernel<<<1, kLossThreads, 0, stream>>>(px, pt, py, l, ignore_index,
                                                      reduction == Reduction::kMean, bad.slot());
    }
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
  });
  ThrowIfBadTarget(bad, target, l, stream);
  return {y};
}

// One block: *count = the number of targets that are not ignored.
__global__ void __launch_bounds__(kLossThreads)
    CountTargetsKernel(const int64_t* target, NllLayout l, int64_t ignore_index, int64_t* count) {
  __shared__ int64_t smem[cuda::kWarpSize];
  int64_t c = 0;
  for (int64_t j = threadIdx.x; j < Targets(l); j += blockDim.x) c += target[j] != ignore_index;
  c = cuda::BlockReduce(c, SumOf<int64_t>, int64_t{0}, smem);
  if (threadIdx.x == 0) *count = c;
}

// dx (zeroed before) gets -dy at each picked log-probability: dy[j] per target for none, else
// dy[0] (divided by the count of targets for mean).
template <typename T>
__global__ void NllGradKernel(const T* dy, const int64_t* target, T* dx, NllLayout l,
                              int64_t ignore_index, Reduction reduction, const int64_t* count,
                              cuda::BadSlot bad) {
  ONEFLOW_CUDA_GRID_LOOP(j, Targets(l)) {
    const int64_t xi = TargetOffset(target, j, l, ignore_index, bad);
    if (xi < 0) continue;
    if (reduction == Reduction::kNone) {
      dx[xi] = -dy[j];
    } else {
      T scale = -dy[0];
      if (reduction == Reduction::kMean) scale /= static_cast<T>(*count);
      dx[xi] = scale;
    }
  }
}

std::vector<Tensor> NllLossGradCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                    const std::vector<TensorMeta>& out) {
  Tensor dy = fn::contiguous(in[0]), target = fn::contiguous(in[1]);
  const NllLayout l = nn_util::NllLayoutOf(out[0].shape);
  const Reduction reduction = ParseReduction(attrs.Get<std::string>("reduction"));
  const int64_t ignore_index = attrs.Get<int64_t>("ignore_index");
  Tensor dx = Tensor::Empty(out[0]);
  cudaStream_t stream = cuda::StreamFor(dy.device());
  cuda::BadIndex bad(dy.device(), stream);
  DispatchFloating(dy.dtype(), "nll_loss_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (dx.numel() > 0) {
      ONEFLOW_CUDA_CHECK(cudaMemsetAsync(dx.raw_data(), 0, dx.numel() * sizeof(T), stream));
    }
    if (Targets(l) == 0) return;
    Tensor count;
    if (reduction == Reduction::kMean) {
      count = Tensor::Empty(Shape({1}), DType::kInt64, dy.device());
      CountTargetsKernel<<<1, kLossThreads, 0, stream>>>(target.data<int64_t>(), l, ignore_index,
                                                         count.data<int64_t>());
      ONEFLOW_CUDA_CHECK(cudaGetLastError());
    }
    NllGradKernel<<<cuda::Blocks(Targets(l)), cuda::kThreads, 0, stream>>>(
        dy.data<T>(), target.data<int64_t>(), dx.data<T>(), l, ignore_index, reduction,
        count.defined() ? count.data<int64_t>() : nullptr, bad.slot());
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
  });
  ThrowIfBadTarget(bad, target, l, stream);
  return {dx};
}

}  // namespace

ONEFLOW_REGISTER_KERNEL(softmax, kCUDA, SoftmaxCuda</*kLog=*/false>);
ONEFLOW_REGISTER_KERNEL(log_softmax, kCUDA, SoftmaxCuda</*kLog=*/true>);
ONEFLOW_REGISTER_KERNEL(nll_loss, kCUDA, NllLossCuda);
ONEFLOW_REGISTER_KERNEL(nll_loss_grad, kCUDA, NllLossGradCuda);

}  // namespace oneflow
