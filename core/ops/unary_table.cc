// The ops of the unary table (core/ops/unary_functors.h): for each line `X(name, F, ...)` the op
// `name` and its gradient op `name_grad(dy, x) = dy * f'(x)`, with their inference and CPU
// kernels; the CUDA kernels are in core/kernels/cuda/unary_table.cu, the SBP rules in
// sbp/rules/pointwise.cc, all from the same table.
#include <map>
#include <string>

#include "core/kernels/cpu/cpu_util.h"
#include "core/ops/op_util.h"
#include "core/ops/unary_functors.h"

namespace oneflow {

namespace {

template <typename F>
std::vector<Tensor> TableCpu(const std::vector<Tensor>& in, const Attrs& a,
                             const std::vector<TensorMeta>& out) {
  Tensor x = Contig(in[0]);
  Tensor o = Tensor::Empty(out[0]);
  const F f = functors::MakeFunctor<F>(a);
  DispatchFloating(x.dtype(), "unary op", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = x.data<T>();
    T* q = o.data<T>();
    for (int64_t i = 0, n = x.numel(); i < n; ++i) q[i] = f(p[i]);
  });
  return {o};
}

template <typename F>
std::vector<Tensor> TableGradCpu(const std::vector<Tensor>& in, const Attrs& a,
                                 const std::vector<TensorMeta>& out) {
  Tensor g = Contig(in[0]), x = Contig(in[1]);
  Tensor o = Tensor::Empty(out[0]);
  const F f = functors::MakeFunctor<F>(a);
  DispatchFloating(x.dtype(), "unary op gradient", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = g.data<T>();
    const T* px = x.data<T>();
    T* q = o.data<T>();
    for (int64_t i = 0, n = x.numel(); i < n; ++i) q[i] = pg[i] * f.Grad(px[i]);
  });
  return {o};
}

std::vector<TensorMeta> InferTableGrad(const std::vector<TensorMeta>& in, const Attrs&) {
  ONEFLOW_CHECK(in[0].shape == in[1].shape && in[0].dtype == in[1].dtype, "unary op gradient: dy ",
                in[0].shape, " ", DTypeName(in[0].dtype), " and x ", in[1].shape, " ",
                DTypeName(in[1].dtype), " differ");
  return {in[1]};
}

// f''(x) of the table ops whose gradient op has a gradient of its own (second derivatives,
// create_graph=True), composed from existing ops. name_grad(dy, x) = dy * f'(x) has the gradient
// (name_grad(g, x), g * dy * f''(x)) for its inputs (dy, x); ops missing here are registered
// with NoDoubleBackward (so the registry and the harnesses see they have none).
using SecondDerivative = Tensor (*)(const Tensor& x);
const std::map<std::string, SecondDerivative>& SecondDerivatives() {
  using namespace fn;  // NOLINT: the formulas read as math
  static const std::map<std::string, SecondDerivative> table = {
      {"sin", [](const Tensor& x) { return neg(sin(x)); }},
      {"cos", [](const Tensor& x) { return neg(cos(x)); }},
      // tan'' = 2 tan (1 + tan^2)
      {"tan",
       [](const Tensor& x) {
         Tensor t = tan(x);
         return mul_scalar(mul(t, add_scalar(square(t), 1.0)), 2.0);
       }},
      {"sinh", [](const Tensor& x) { return sinh(x); }},
      {"cosh", [](const Tensor& x) { return cosh(x); }},
      // asin'' = x (1 - x^2)^(-3/2), acos'' = -asin''
      {"asin",
       [](const Tensor& x) {
         Tensor r = rsqrt(add_scalar(neg(square(x)), 1.0));
         return mul(x, mul(r, square(r)));
       }},
      {"acos",
       [](const Tensor& x) {
         Tensor r = rsqrt(add_scalar(neg(square(x)), 1.0));
         return neg(mul(x, mul(r, square(r))));
       }},
      // atan'' = -2x / (1 + x^2)^2
      {"atan",
       [](const Tensor& x) {
         return div(mul_scalar(x, -2.0), square(add_scalar(square(x), 1.0)));
       }},
      // asinh'' = -x (1 + x^2)^(-3/2)
      {"asinh",
       [](const Tensor& x) {
         Tensor r = rsqrt(add_scalar(square(x), 1.0));
         return neg(mul(x, mul(r, square(r))));
       }},
      // atanh'' = 2x / (1 - x^2)^2
      {"atanh",
       [](const Tensor& x) {
         return div(mul_scalar(x, 2.0), square(add_scalar(neg(square(x)), 1.0)));
       }},
      // erf'' = -2x * 2/sqrt(pi) e^(-x^2); erfc'' = -erf''
      {"erf",
       [](const Tensor& x) {
         return mul(mul_scalar(x, -2.0 * 1.1283791670955126), exp(neg(square(x))));
       }},
      {"erfc",
       [](const Tensor& x) {
         return mul(mul_scalar(x, 2.0 * 1.1283791670955126), exp(neg(square(x))));
       }},
      {"expm1", [](const Tensor& x) { return exp(x); }},
      // lgamma'' = trigamma, digamma's derivative: digamma_grad(1, x)
      {"lgamma",
       [](const Tensor& x) {
         return CallOp1(OpRegistry::Global().Get("digamma_grad"), {ones_like(x), x}, Attrs());
       }},
      // log1p'' = -1 / (1 + x)^2; log2'' = -1 / (x^2 ln 2); log10'' = -1 / (x^2 ln 10)
      {"log1p", [](const Tensor& x) { return neg(reciprocal(square(add_scalar(x, 1.0)))); }},
      {"log2",
       [](const Tensor& x) {
         return mul_scalar(reciprocal(square(x)), -1.0 / 0.6931471805599453);
       }},
      {"log10",
       [](const Tensor& x) { return mul_scalar(reciprocal(square(x)), -1.0 / 2.302585092994046); }},
      // reciprocal'' = 2 / x^3
      {"reciprocal",
       [](const Tensor& x) { return mul_scalar(reciprocal(mul(square(x), x)), 2.0); }},
      // logsigmoid' = 1 - sigmoid(x); logsigmoid'' = -sigmoid(x) (1 - sigmoid(x))
      {"logsigmoid",
       [](const Tensor& x) {
         Tensor s = sigmoid(x);
         return neg(mul(s, add_scalar(neg(s), 1.0)));
       }},
  };
  return table;
}

std::vector<Tensor> TableGradGrad(const std::string& name, const GradCtx& c) {
  auto found = SecondDerivatives().find(name);
  if (found == SecondDerivatives().end()) return NoDoubleBackward(c);
  const Tensor& g = c.grad_outputs[0];
  const Tensor &dy = c.inputs[0], &x = c.inputs[1];
  Tensor grad_dy = c.needs_input_grad[0]
                       ? CallOp1(OpRegistry::Global().Get(name + "_grad"), {g, x}, c.attrs)
                       : Tensor();
  Tensor grad_x = c.needs_input_grad[1] ? fn::mul(fn::mul(g, dy), found->second(x)) : Tensor();
  return {grad_dy, grad_x};
}

}  // namespace

#define ONEFLOW_REGISTER_TABLE_OP(name, F, lo, hi)                                  \
  ONEFLOW_REGISTER_OP(name)                                                         \
      .Inputs(1)                                                                    \
      .Infer(SameAsInput0)                                                          \
      .Grad(+[](const GradCtx& c) {                                                 \
        return std::vector<Tensor>{                                                 \
            CallOp1(OP(name##_grad), {c.grad_outputs[0], c.inputs[0]}, c.attrs)};   \
      })                                                                            \
      .Kernel(DeviceType::kCPU, TableCpu<functors::F>);                             \
  ONEFLOW_REGISTER_OP(name##_grad)                                                  \
      .Inputs(2)                                                                    \
      .Infer(InferTableGrad)                                                        \
      .Grad(SecondDerivatives().count(#name)                                        \
                ? GradFn(+[](const GradCtx& c) { return TableGradGrad(#name, c); }) \
                : NoDoubleBackward)                                                 \
      .Kernel(DeviceType::kCPU, TableGradCpu<functors::F>);
ONEFLOW_UNARY_TABLE_OPS(ONEFLOW_REGISTER_TABLE_OP)
#undef ONEFLOW_REGISTER_TABLE_OP

namespace fn {

namespace {

// Integers are computed as float32, as PyTorch's floating unary ops do (complex inputs reach
// the op, which refuses them).
Tensor Table(const OpDef& op, const Tensor& x, const Attrs& a = Attrs()) {
  return CallOp1(op, {IsDifferentiable(x.dtype()) ? x : to_dtype(x, DType::kFloat32)}, a);
}

// Rounding keeps an integer tensor as it is (a copy), as PyTorch does.
Tensor Rounding(const OpDef& op, const Tensor& x) {
  return IsDifferentiable(x.dtype()) ? CallOp1(op, {x}) : clone(x);
}

}  // namespace

Tensor log1p(const Tensor& x) { return Table(OP(log1p), x); }
Tensor expm1(const Tensor& x) { return Table(OP(expm1), x); }
Tensor log2(const Tensor& x) { return Table(OP(log2), x); }
Tensor log10(const Tensor& x) { return Table(OP(log10), x); }
Tensor reciprocal(const Tensor& x) { return Table(OP(reciprocal), x); }
Tensor sin(const Tensor& x) { return Table(OP(sin), x); }
Tensor cos(const Tensor& x) { return Table(OP(cos), x); }
Tensor tan(const Tensor& x) { return Table(OP(tan), x); }
Tensor asin(const Tensor& x) { return Table(OP(asin), x); }
Tensor acos(const Tensor& x) { return Table(OP(acos), x); }
Tensor atan(const Tensor& x) { return Table(OP(atan), x); }
Tensor sinh(const Tensor& x) { return Table(OP(sinh), x); }
Tensor cosh(const Tensor& x) { return Table(OP(cosh), x); }
Tensor asinh(const Tensor& x) { return Table(OP(asinh), x); }
Tensor atanh(const Tensor& x) { return Table(OP(atanh), x); }
Tensor erf(const Tensor& x) { return Table(OP(erf), x); }
Tensor erfc(const Tensor& x) { return Table(OP(erfc), x); }
Tensor erfinv(const Tensor& x) { return Table(OP(erfinv), x); }
Tensor lgamma(const Tensor& x) { return Table(OP(lgamma), x); }
Tensor digamma(const Tensor& x) { return Table(OP(digamma), x); }
Tensor floor(const Tensor& x) { return Rounding(OP(floor), x); }
Tensor ceil(const Tensor& x) { return Rounding(OP(ceil), x); }
Tensor round(const Tensor& x) { return Rounding(OP(round), x); }
Tensor trunc(const Tensor& x) { return Rounding(OP(trunc), x); }
Tensor silu(const Tensor& x) { return Table(OP(silu), x); }
Tensor mish(const Tensor& x) { return Table(OP(mish), x); }
Tensor hardswish(const Tensor& x) { return Table(OP(hardswish), x); }
Tensor hardsigmoid(const Tensor& x) { return Table(OP(hardsigmoid), x); }
Tensor logsigmoid(const Tensor& x) { return Table(OP(logsigmoid), x); }
Tensor softsign(const Tensor& x) { return Table(OP(softsign), x); }
Tensor selu(const Tensor& x) { return Table(OP(selu), x); }
Tensor gelu_tanh(const Tensor& x) { return Table(OP(gelu_tanh), x); }
Tensor leaky_relu(const Tensor& x, double negative_slope) {
  return Table(OP(leaky_relu), x, Attrs().Set("negative_slope", negative_slope));
}
Tensor elu(const Tensor& x, double alpha) {
  return Table(OP(elu), x, Attrs().Set("alpha", alpha).Set("celu", false));
}
Tensor celu(const Tensor& x, double alpha) {
  ONEFLOW_CHECK(alpha != 0, "celu: alpha must not be 0 (it divides x)");
  return Table(OP(elu), x, Attrs().Set("alpha", alpha).Set("celu", true));
}
Tensor softplus(const Tensor& x, double beta, double threshold) {
  ONEFLOW_CHECK(beta != 0, "softplus: beta must not be 0 (it divides the result)");
  return Table(OP(softplus), x, Attrs().Set("beta", beta).Set("threshold", threshold));
}
Tensor softshrink(const Tensor& x, double lambd) {
  ONEFLOW_CHECK(lambd >= 0, "softshrink: lambd must be >= 0, got ", lambd);
  return Table(OP(shrink), x, Attrs().Set("lambd", lambd).Set("hard", false));
}
Tensor hardshrink(const Tensor& x, double lambd) {
  return Table(OP(shrink), x, Attrs().Set("lambd", lambd).Set("hard", true));
}
Tensor threshold(const Tensor& x, double threshold, double value) {
  return Table(OP(threshold), x, Attrs().Set("threshold", threshold).Set("value", value));
}

}  // namespace fn
}  // namespace oneflow
