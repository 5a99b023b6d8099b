// CUDA kernels of softmax, log_softmax and their gradient ops (core/ops/nn/softmax.cc) for
// float32, float64, float16 and bfloat16 (computing in float): x is seen as (outer, d, inner)
// around its dim; the kernels (a warp per row with the row in registers, a block per long row,
// a block per 32 columns when inner > 1) are in kernels/softmax.cuh.

#include <cstdint>

#include "core/functional.h"
#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/cuda_util.h"
#include "core/kernels/cuda/kernels/softmax.cuh"
#include "core/op_registry.h"
#include "core/ops/op_util.h"

namespace oneflow {

namespace {

// x seen as (outer, d, inner) around attrs' dim.
struct RowLayout {
  int64_t outer = 1, d = 1, inner = 1;
};

RowLayout LayoutAround(const Tensor& x, const Attrs& attrs, const char* op) {
  RowLayout l;
  if (x.ndim() == 0) return l;
  const int64_t dim = WrapDim(attrs.Get<int64_t>("dim"), x.ndim(), op);
  for (int64_t i = 0; i < dim; ++i) l.outer *= x.shape()[i];
  l.d = x.shape()[dim];
  for (int64_t i = dim + 1; i < x.ndim(); ++i) l.inner *= x.shape()[i];
  return l;
}

template <bool kLog>
std::vector<Tensor> SoftmaxCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                const std::vector<TensorMeta>& out) {
  const char* op = kLog ? "log_softmax" : "softmax";
  Tensor y = Tensor::Empty(out[0]);
  // The dtype error for empty tensors too.
  DispatchFloatingWithHalf(in[0].dtype(), op, [](auto) {});
  if (y.numel() == 0) return {y};
  Tensor x = fn::contiguous(in[0]);
  const RowLayout l = LayoutAround(x, attrs, op);
  DispatchFloatingWithHalf(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda::softmax::Forward(cuda::Ptr<T>(x), cuda::Ptr<T>(y), l.outer, l.d, l.inner, kLog,
                           cuda::StreamFor(x.device()));
  });
  return {y};
}

template <bool kLog>
std::vector<Tensor> SoftmaxGradCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                    const std::vector<TensorMeta>& out) {
  const char* op = kLog ? "log_softmax_grad" : "softmax_grad";
  Tensor dx = Tensor::Empty(out[0]);
  DispatchFloatingWithHalf(in[0].dtype(), op, [](auto) {});
  if (dx.numel() == 0) return {dx};
  Tensor y = fn::contiguous(in[0]);
  Tensor dy = fn::contiguous(in[1]);
  const RowLayout l = LayoutAround(y, attrs, op);
  DispatchFloatingWithHalf(y.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda::softmax::Backward(cuda::Ptr<T>(y), cuda::Ptr<T>(dy), cuda::Ptr<T>(dx), l.outer, l.d,
                            l.inner, kLog, cuda::StreamFor(y.device()));
  });
  return {dx};
}

}  // namespace

ONEFLOW_REGISTER_KERNEL(softmax, kCUDA, SoftmaxCuda</*kLog=*/false>);
ONEFLOW_REGISTER_KERNEL(log_softmax, kCUDA, SoftmaxCuda</*kLog=*/true>);
ONEFLOW_REGISTER_KERNEL(softmax_grad, kCUDA, SoftmaxGradCuda</*kLog=*/false>);
ONEFLOW_REGISTER_KERNEL(log_softmax_grad, kCUDA, SoftmaxGradCuda</*kLog=*/true>);

}  // namespace oneflow
