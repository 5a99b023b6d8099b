// CUDA kernels of nll_loss and cross_entropy and their gradients (core/ops/nn/loss.cc). The
// losses sum in one block, in double as on CPU, so the result does not depend on scheduling.
// cross_entropy's kernels (float32, float64, float16, bfloat16) are in
// kernels/cross_entropy.cuh.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "core/functional.h"
#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/cuda_util.h"
#include "core/kernels/cuda/index_check.cuh"
#include "core/kernels/cuda/kernels/cross_entropy.cuh"
#include "core/kernels/cuda/reduce_util.cuh"
#include "core/op_registry.h"
#include "core/ops/nn/nn_util.h"

namespace oneflow {

namespace {

using cuda::SumOf;

// One block sums all targets. Kernels launched with it declare __launch_bounds__(kLossThreads):
// without it nvcc may use more registers than 1024 threads of a block can have, and the launch
// fails with "too many resources requested for launch".
constexpr int kLossThreads = 1024;

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

void ThrowIfBadTarget(cuda::BadIndex& bad, const Tensor& target, const NllLayout& l, cudaStream_t) {
  // Raised at the next synchronisation point (index_check.cuh).
  bad.Report(
      cuda::ContiguousIndexReader<int64_t>{target.data<int64_t>()}, [classes = l.c](int64_t t) {
        throw Error(StrCat("nll_loss: target ", t, " is out of bounds for ", classes, " classes"));
      });
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

// ---------------------------------------------------------------- cross_entropy

int ReductionCode(const std::string& r) {
  return r == "none"  ? cuda::cross_entropy::kNone
         : r == "sum" ? cuda::cross_entropy::kSum
                      : cuda::cross_entropy::kMean;
}

// logits (C,) or (N, C) as rows x c (the inference checked the shapes).
void CrossEntropyRows(const Shape& x, int64_t* rows, int64_t* c) {
  *rows = x.ndim() == 1 ? 1 : x[0];
  *c = x.ndim() == 1 ? x[0] : x[1];
}

std::vector<Tensor> CrossEntropyCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                     const std::vector<TensorMeta>& out) {
  Tensor x = fn::contiguous(in[0]), target = fn::contiguous(in[1]);
  Tensor y = Tensor::Empty(out[0]), lse = Tensor::Empty(out[1]);
  int64_t rows, c;
  CrossEntropyRows(x.shape(), &rows, &c);
  const int reduction = ReductionCode(attrs.Get<std::string>("reduction"));
  cudaStream_t stream = cuda::StreamFor(x.device());
  // No rows: the finishing kernel still writes 'sum' 0 and 'mean' 0 / 0 = nan.
  cuda::BadIndex bad(x.device(), stream);
  DispatchFloatingWithHalf(x.dtype(), "cross_entropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = cuda::Acc<cuda::DevT<T>>;
    Tensor loss_rows = Tensor::Empty(Shape({rows}), lse.dtype(), x.device());
    cuda::cross_entropy::Forward(
        cuda::Ptr<T>(x), target.data<int64_t>(), rows, c, attrs.Get<int64_t>("ignore_index"),
        attrs.Get<double>("label_smoothing"), reduction, cuda::Ptr<T>(y),
        static_cast<A*>(lse.raw_data()), static_cast<A*>(loss_rows.raw_data()), bad.slot(), stream);
  });
  // Raised at the next synchronisation point with nll_loss's message (index_check.cuh).
  ThrowIfBadTarget(bad, target, nn_util::NllLayoutOf(x.shape()), stream);
  return {y, lse};
}

std::vector<Tensor> CrossEntropyGradCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                         const std::vector<TensorMeta>& out) {
  Tensor dy = fn::contiguous(in[0]), x = fn::contiguous(in[1]), target = fn::contiguous(in[2]),
         lse = fn::contiguous(in[3]);
  Tensor dx = Tensor::Empty(out[0]);
  int64_t rows, c;
  CrossEntropyRows(x.shape(), &rows, &c);
  if (rows == 0 || c == 0) return {dx};
  cudaStream_t stream = cuda::StreamFor(x.device());
  const int reduction = ReductionCode(attrs.Get<std::string>("reduction"));
  Tensor count = Tensor::Empty(Shape({1}), DType::kInt64, x.device());
  DispatchFloatingWithHalf(x.dtype(), "cross_entropy_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = cuda::Acc<cuda::DevT<T>>;
    cuda::cross_entropy::Backward(cuda::Ptr<T>(dy), cuda::Ptr<T>(x), target.data<int64_t>(),
                                  static_cast<const A*>(lse.raw_data()), rows, c,
                                  attrs.Get<int64_t>("ignore_index"),
                                  attrs.Get<double>("label_smoothing"), reduction,
                                  count.data<int64_t>(), cuda::Ptr<T>(dx), stream);
  });
  // Targets out of range were reported by the forward; the kernel gives their rows
  // softmax * dy and never reads past the row.
  return {dx};
}

}  // namespace

ONEFLOW_REGISTER_KERNEL(nll_loss, kCUDA, NllLossCuda);
ONEFLOW_REGISTER_KERNEL(nll_loss_grad, kCUDA, NllLossGradCuda);
ONEFLOW_REGISTER_KERNEL(cross_entropy, kCUDA, CrossEntropyCuda);
ONEFLOW_REGISTER_KERNEL(cross_entropy_grad, kCUDA, CrossEntropyGradCuda);

}  // namespace oneflow
