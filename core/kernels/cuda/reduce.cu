// CUDA kernels of the reductions in core/ops/reduce.cc: sum and prod over dims, max_dim and
// min_dim. The kernels and their passes are core/kernels/cuda/kernels/reduce.cuh (run by the host
// stand-in, tests/cuda_host/reduce_test.cc); here: the ops' dims arranged as (outer, r, inner),
// dtype dispatch (floats accumulate in double, integers in int64, as on the CPU) and scratch.
#include <algorithm>
#include <type_traits>

#include "core/functional.h"
#include "core/kernels/cuda/cuda_util.h"
#include "core/kernels/cuda/kernels/reduce.cuh"
#include "core/op_registry.h"
#include "core/ops/reduce_functors.h"

namespace oneflow {

namespace {

using cuda::ReduceLayout;

// Scratch for the partial passes: uint8 tensors kept alive until the op returns (the caching
// allocator only hands a freed block to later work on the same stream, so kernels still queued
// are safe).
struct Scratch {
  const Device& device;
  std::vector<Tensor> keep;
  void* operator()(size_t bytes) {
    keep.push_back(Tensor::Empty(Shape({static_cast<int64_t>(bytes)}), DType::kUInt8, device));
    return keep.back().raw_data();
  }
};

std::vector<bool> ReducedMask(const Attrs& a, int64_t ndim) {
  const auto& dims = a.Get<std::vector<int64_t>>("dims");
  std::vector<bool> mask(ndim, dims.empty());
  if (ndim == 0) return mask;  // dim 0 or -1 of a 0-dim tensor: nothing to reduce
  for (int64_t d : dims) mask[WrapDim(d, ndim, "sum")] = true;  // checked by the inference
  return mask;
}

// x made contiguous with its reduced elements in one run: dims of size 1 are dropped, and when
// the reduced dims are not adjacent they are moved last (one copy).
Tensor Arrange(const Tensor& x, const std::vector<bool>& mask, ReduceLayout* l) {
  std::vector<int64_t> kept, reduced;
  int runs = 0;
  bool in_run = false;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    if (x.shape()[d] == 1) continue;
    if (mask[d] && !in_run) ++runs;
    in_run = mask[d];
    (mask[d] ? reduced : kept).push_back(d);
  }
  *l = ReduceLayout{1, 1, 1};
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
  ReduceLayout l;
  Tensor xc = Arrange(x, ReducedMask(a, x.ndim()), &l);
  cudaStream_t stream = cuda::StreamFor(x.device());
  DispatchAll(x.dtype(), "sum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Accumulate in double (floats) or int64 (integers and bool), as the CPU kernel does.
    constexpr bool kFloat = std::is_floating_point_v<T>;
    using A = std::conditional_t<kFloat, double, int64_t>;
    using O = std::conditional_t<kFloat, T, int64_t>;
    Scratch scratch{x.device(), {}};
    cuda::ReduceSum<R, T, A, O>(xc.data<T>(), y.data<O>(), l, stream, scratch);
  });
  return {y};
}

// ---------------------------------------------------------------- max_dim, min_dim

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
  ReduceLayout l;
  const int64_t dim = x.ndim() ? WrapDim(a.Get<int64_t>("dim"), x.ndim(), op) : 0;
  l.r = x.ndim() ? x.shape()[dim] : 1;  // > 0: checked by the inference
  for (int64_t i = dim + 1; i < x.ndim(); ++i) l.inner *= x.shape()[i];
  l.outer = x.numel() / (l.r * l.inner);
  cudaStream_t stream = cuda::StreamFor(x.device());
  DispatchAll(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using W = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;
    Scratch scratch{x.device(), {}};
    cuda::ReduceArg<T, W, T, kMax>(x.data<T>(), nullptr, v.data<T>(), idx.data<int64_t>(), l,
                                   stream, scratch);
  });
  return {v, idx};
}

}  // namespace

ONEFLOW_REGISTER_KERNEL(sum, kCUDA, SumCuda<functors::SumR>);
ONEFLOW_REGISTER_KERNEL(prod, kCUDA, SumCuda<functors::ProdR>);
ONEFLOW_REGISTER_KERNEL(max_dim, kCUDA, ArgReduceCuda</*kMax=*/true>);
ONEFLOW_REGISTER_KERNEL(min_dim, kCUDA, ArgReduceCuda</*kMax=*/false>);

}  // namespace oneflow
