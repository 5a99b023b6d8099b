// softmax and log_softmax over one dim, and their gradients as ops of their own (one pass over
// y and dy instead of four ops). The kernels subtract the max before exp, so large logits do
// not overflow:
//   softmax_grad(y, dy):      dx = y * (dy - sum(dy * y, dim))
//   log_softmax_grad(y, dy):  dx = dy - exp(y) * sum(dy, dim)
// The gradient ops' own gradients are compositions (so they differentiate again).

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
// Softmax over the last dim (inner == 1): the running max and sum live in registers (through
// the vectors below, each step would wait on the last one's store). Same operations, same order.
template <typename T, bool kLog>
void SoftmaxForwardRows(const DimLayout& l, const T* x, T* y) {
  for (int64_t o = 0; o < l.outer; ++o) {
    const T* xo = x + o * l.d;
    T* yo = y + o * l.d;
    T mx = -std::numeric_limits<T>::infinity();
    for (int64_t k = 0; k < l.d; ++k) mx = std::max(mx, xo[k]);
    if (std::isinf(mx)) mx = 0;  // as below
    T sum = 0;
    for (int64_t k = 0; k < l.d; ++k) {
      const T e = std::exp(xo[k] - mx);
      sum += e;
      if (!kLog) yo[k] = e;
    }
    const T log_sum = kLog ? std::log(sum) : T(0);
    for (int64_t k = 0; k < l.d; ++k) yo[k] = kLog ? xo[k] - mx - log_sum : yo[k] / sum;
  }
}

template <typename T, bool kLog>
void SoftmaxForward(const DimLayout& l, const T* x, T* y) {
  if (l.inner == 1) return SoftmaxForwardRows<T, kLog>(l, x, y);
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

// ---------------------------------------------------------------- gradients

template <bool kLog>
std::vector<TensorMeta> InferSoftmaxGrad(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const char* op = kLog ? "log_softmax_grad" : "softmax_grad";
  if (in[0].shape != in[1].shape || in[0].dtype != in[1].dtype) {
    throw Error(StrCat(op, ": y and dy must have one shape and dtype, got ", in[0].shape, " ",
                       DTypeName(in[0].dtype), " and ", in[1].shape, " ", DTypeName(in[1].dtype)));
  }
  return InferSoftmaxFor(in, attrs, op);
}

// s = sum over dim of dy * y (softmax) or of dy (log_softmax), one per (outer, inner); then dx.
template <typename T, bool kLog>
void SoftmaxBackward(const DimLayout& l, const T* y, const T* dy, T* dx) {
  if (kLog && l.inner == 1) {  // over the last dim: the sum in a register (as the forward's)
    for (int64_t o = 0; o < l.outer; ++o) {
      const int64_t base = o * l.d;
      T s = 0;
      for (int64_t k = 0; k < l.d; ++k) s += dy[base + k];
      for (int64_t k = 0; k < l.d; ++k) {
        const int64_t j = base + k;
        dx[j] = dy[j] - std::exp(y[j]) * s;
      }
    }
    return;
  }
  // (softmax's s += dy * y stays below: a register sum there may contract into an FMA that the
  // loop through memory does not, and the gradient would move by a rounding.)
  std::vector<T> s(l.inner);
  for (int64_t o = 0; o < l.outer; ++o) {
    const int64_t base = o * l.d * l.inner;
    std::fill(s.begin(), s.end(), T(0));
    for (int64_t k = 0; k < l.d; ++k) {
      for (int64_t i = 0; i < l.inner; ++i) {
        const int64_t j = base + k * l.inner + i;
        s[i] += kLog ? dy[j] : dy[j] * y[j];
      }
    }
    for (int64_t k = 0; k < l.d; ++k) {
      for (int64_t i = 0; i < l.inner; ++i) {
        const int64_t j = base + k * l.inner + i;
        dx[j] = kLog ? dy[j] - std::exp(y[j]) * s[i] : y[j] * (dy[j] - s[i]);
      }
    }
  }
}

template <bool kLog>
std::vector<Tensor> SoftmaxGradCpu(const std::vector<Tensor>& in, const Attrs& attrs,
                                   const std::vector<TensorMeta>& out) {
  const char* op = kLog ? "log_softmax_grad" : "softmax_grad";
  Tensor y = Contig(in[0]);
  Tensor dy = Contig(in[1]);
  Tensor dx = Tensor::Empty(out[0]);
  DimLayout l = MakeDimLayout(y.shape(), attrs.Get<int64_t>("dim"), op);
  if (y.dtype() == DType::kFloat32 && cpu::UseOneDnn(y.numel()) && l.d > 0) {
    cpu::SoftmaxBackward(y.data<float>(), dy.data<float>(), dx.data<float>(), l.outer, l.d, l.inner,
                         kLog);
    return {dx};
  }
  DispatchFloating(y.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    SoftmaxBackward<T, kLog>(l, y.data<T>(), dy.data<T>(), dx.data<T>());
  });
  return {dx};
}

Tensor CallSoftmaxGrad(bool log, const Tensor& y, const Tensor& dy, const Attrs& attrs) {
  return log ? CallOp1(OP(log_softmax_grad), {y, dy}, attrs)
             : CallOp1(OP(softmax_grad), {y, dy}, attrs);
}

std::vector<Tensor> SoftmaxGrad(const GradCtx& ctx) {
  return {CallSoftmaxGrad(false, ctx.outputs[0], ctx.grad_outputs[0], ctx.attrs)};
}

std::vector<Tensor> LogSoftmaxGrad(const GradCtx& ctx) {
  return {CallSoftmaxGrad(true, ctx.outputs[0], ctx.grad_outputs[0], ctx.attrs)};
}

// The dim to reduce over: sum() wants a real dim even for 0-dim y.
fn::IntList GradDims(const GradCtx& ctx) {
  const Tensor& y = ctx.inputs[0];
  if (y.ndim() == 0) return {};
  return {WrapDim(ctx.attrs.Get<int64_t>("dim"), y.ndim(), "softmax_grad")};
}

// Second derivatives, g the gradient of dx:
//   softmax:      d/d dy = softmax_grad(y, g);  d/dy = g * (dy - s) - dy * sum(g * y),
//                 s = sum(dy * y)
//   log_softmax:  d/d dy = g - sum(g * exp(y));  d/dy = -g * exp(y) * sum(dy)
std::vector<Tensor> SoftmaxGradGrad(const GradCtx& ctx) {
  const Tensor& y = ctx.inputs[0];
  const Tensor& dy = ctx.inputs[1];
  const Tensor& g = ctx.grad_outputs[0];
  const fn::IntList dims = GradDims(ctx);
  Tensor gy, gdy;
  if (ctx.needs_input_grad[0]) {
    Tensor s = fn::sum(fn::mul(dy, y), dims, /*keepdim=*/true);
    Tensor gs = fn::sum(fn::mul(g, y), dims, /*keepdim=*/true);
    gy = fn::sub(fn::mul(g, fn::sub(dy, s)), fn::mul(dy, gs));
  }
  if (ctx.needs_input_grad[1]) gdy = CallSoftmaxGrad(false, y, g, ctx.attrs);
  return {gy, gdy};
}

std::vector<Tensor> LogSoftmaxGradGrad(const GradCtx& ctx) {
  const Tensor& y = ctx.inputs[0];
  const Tensor& dy = ctx.inputs[1];
  const Tensor& g = ctx.grad_outputs[0];
  const fn::IntList dims = GradDims(ctx);
  Tensor e = fn::exp(y);
  Tensor gy, gdy;
  if (ctx.needs_input_grad[0]) {
    gy = fn::neg(fn::mul(fn::mul(g, e), fn::sum(dy, dims, /*keepdim=*/true)));
  }
  if (ctx.needs_input_grad[1]) gdy = fn::sub(g, fn::sum(fn::mul(g, e), dims, /*keepdim=*/true));
  return {gy, gdy};
}

}  // namespace

ONEFLOW_REGISTER_OP(softmax).Inputs(1).Infer(InferSoftmax).Grad(SoftmaxGrad);
ONEFLOW_REGISTER_KERNEL(softmax, kCPU, SoftmaxCpu</*kLog=*/false>);
ONEFLOW_REGISTER_OP(log_softmax).Inputs(1).Infer(InferLogSoftmax).Grad(LogSoftmaxGrad);
ONEFLOW_REGISTER_KERNEL(log_softmax, kCPU, SoftmaxCpu</*kLog=*/true>);
ONEFLOW_REGISTER_OP(softmax_grad).Inputs(2).Infer(InferSoftmaxGrad<false>).Grad(SoftmaxGradGrad);
ONEFLOW_REGISTER_KERNEL(softmax_grad, kCPU, SoftmaxGradCpu</*kLog=*/false>);
ONEFLOW_REGISTER_OP(log_softmax_grad)
    .Inputs(2)
    .Infer(InferSoftmaxGrad<true>)
    .Grad(LogSoftmaxGradGrad);
ONEFLOW_REGISTER_KERNEL(log_softmax_grad, kCPU, SoftmaxGradCpu</*kLog=*/true>);

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
