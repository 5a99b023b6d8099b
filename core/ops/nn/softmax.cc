// softmax and log_softmax over one dim. The kernels subtract the max before exp, so large
// logits do not overflow; the gradients are compositions of other ops (so they differentiate
// again):
//   softmax:      dx = y * (dy - sum(dy * y, dim))
//   log_softmax:  dx = dy - exp(y) * sum(dy, dim)

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/kernels/cpu/cpu_util.h"
#include "core/kernels/cpu/onednn_eltwise.h"
#include "core/ops/op_util.h"

namespace oneflow {

namespace {

// x seen as (outer, d, inner) around dim; a 0-dim x is a single element along its only "dim".
struct DimLayout {
  int64_t outer = 1, d = 1, inner = 1;
};

DimLayout MakeDimLayout(const Shape& x, int64_t dim, const char* op) {
  DimLayout l;
  if (x.ndim() == 0) {
    WrapDim(dim, 1, op);
    return l;
  }
  dim = WrapDim(dim, x.ndim(), op);
  for (int64_t i = 0; i < dim; ++i) l.outer *= x[i];
  l.d = x[dim];
  for (int64_t i = dim + 1; i < x.ndim(); ++i) l.inner *= x[i];
  return l;
}

std::vector<TensorMeta> InferSoftmaxFor(const std::vector<TensorMeta>& in, const Attrs& attrs,
                                        const char* op) {
  if (!IsFloating(in[0].dtype)) {
    throw Error(StrCat(op, ": expected a floating point input, got ", DTypeName(in[0].dtype)));
  }
  MakeDimLayout(in[0].shape, attrs.Get<int64_t>("dim"), op);
  return {in[0]};
}

std::vector<TensorMeta> InferSoftmax(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  return InferSoftmaxFor(in, attrs, "softmax");
}
std::vector<TensorMeta> InferLogSoftmax(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  return InferSoftmaxFor(in, attrs, "log_softmax");
}

// Rows along dim are strided by `inner`; the loops run over a whole (d, inner) block at once,
// keeping one running max and sum per inner position, so memory is read in order.
template <typename T, bool kLog>
void SoftmaxForward(const DimLayout& l, const T* x, T* y) {
  std::vector<T> mx(l.inner), sum(l.inner);
  for (int64_t o = 0; o < l.outer; ++o) {
    const T* xo = x + o * l.d * l.inner;
    T* yo = y + o * l.d * l.inner;
    std::fill(mx.begin(), mx.end(), -std::numeric_limits<T>::infinity());
    std::fill(sum.begin(), sum.end(), T(0));
    for (int64_t k = 0; k < l.d; ++k) {
      for (int64_t i = 0; i < l.inner; ++i) mx[i] = std::max(mx[i], xo[k * l.inner + i]);
    }
    // A row of all -inf would give (-inf) - (-inf) = nan; shifting by 0 keeps it -inf / 0.
    for (int64_t i = 0; i < l.inner; ++i) {
      if (std::isinf(mx[i])) mx[i] = 0;
    }
    for (int64_t k = 0; k < l.d; ++k) {
      for (int64_t i = 0; i < l.inner; ++i) {
        const T e = std::exp(xo[k * l.inner + i] - mx[i]);
        sum[i] += e;
        if (!kLog) yo[k * l.inner + i] = e;
      }
    }
    for (int64_t k = 0; k < l.d; ++k) {
      for (int64_t i = 0; i < l.inner; ++i) {
        const int64_t j = k * l.inner + i;
        yo[j] = kLog ? xo[j] - mx[i] - std::log(sum[i]) : yo[j] / sum[i];
      }
    }
  }
}

template <bool kLog>
std::vector<Tensor> SoftmaxCpu(const std::vector<Tensor>& in, const Attrs& attrs,
                               const std::vector<TensorMeta>& out) {
  const char* op = kLog ? "log_softmax" : "softmax";
  Tensor x = Contig(in[0]);
  Tensor y = Tensor::Empty(out[0]);
  DimLayout l = MakeDimLayout(x.shape(), attrs.Get<int64_t>("dim"), op);
  if (x.dtype() == DType::kFloat32 && cpu::UseOneDnn(x.numel()) && l.d > 0) {
    // oneDNN's vectorised exp (core/kernels/cpu/onednn_eltwise.h)
    cpu::Softmax(x.data<float>(), y.data<float>(), l.outer, l.d, l.inner, kLog);
    return {y};
  }
  DispatchFloating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    SoftmaxForward<T, kLog>(l, x.data<T>(), y.data<T>());
  });
  return {y};
}

// The dim to reduce over in the gradients: sum() wants a real dim even for 0-dim x.
fn::IntList GradDims(const GradCtx& ctx) {
  const Tensor& y = ctx.outputs[0];
  if (y.ndim() == 0) return {};
  return {WrapDim(ctx.attrs.Get<int64_t>("dim"), y.ndim(), "softmax")};
}

std::vector<Tensor> SoftmaxGrad(const GradCtx& ctx) {
  const Tensor& y = ctx.outputs[0];
  const Tensor& dy = ctx.grad_outputs[0];
  Tensor dot = fn::sum(fn::mul(dy, y), GradDims(ctx), /*keepdim=*/true);
  return {fn::mul(y, fn::sub(dy, dot))};
}

std::vector<Tensor> LogSoftmaxGrad(const GradCtx& ctx) {
  const Tensor& y = ctx.outputs[0];
  const Tensor& dy = ctx.grad_outputs[0];
  Tensor total = fn::sum(dy, GradDims(ctx), /*keepdim=*/true);
  return {fn::sub(dy, fn::mul(fn::exp(y), total))};
}

}  // namespace

ONEFLOW_REGISTER_OP(softmax).Inputs(1).Infer(InferSoftmax).Grad(SoftmaxGrad);
ONEFLOW_REGISTER_KERNEL(softmax, kCPU, SoftmaxCpu</*kLog=*/false>);
ONEFLOW_REGISTER_OP(log_softmax).Inputs(1).Infer(InferLogSoftmax).Grad(LogSoftmaxGrad);
ONEFLOW_REGISTER_KERNEL(log_softmax, kCPU, SoftmaxCpu</*kLog=*/true>);

namespace fn {

Tensor softmax(const Tensor& x, int64_t dim) {
  Attrs a;
  a.Set("dim", AttrValue(dim));
  return CallOp1(OP(softmax), {x}, a);
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  Attrs a;
  a.Set("dim", AttrValue(dim));
  return CallOp1(OP(log_softmax), {x}, a);
}

}  // namespace fn
}  // namespace oneflow
