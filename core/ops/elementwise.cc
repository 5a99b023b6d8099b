// Elementwise ops: binary ops with broadcasting, comparisons, where, unary math and
// activations. Binary kernels see inputs of one dtype: the functional API promotes first.
#include <cmath>

#include "core/kernels/cpu/cpu_util.h"
#include "core/kernels/cpu/onednn_eltwise.h"
#include "core/ops/binary_functors.h"
#include "core/ops/op_util.h"
#include "core/ops/unary_functors.h"

namespace oneflow {

namespace {

// ---------------------------------------------------------------- binary

template <typename T, typename O, typename F>
void BinaryLoop(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  O* po = out.data<O>();
  const int64_t n = out.numel();
  const bool a_full = a.is_contiguous() && a.shape() == out.shape();
  const bool b_full = b.is_contiguous() && b.shape() == out.shape();
  if (a_full && b_full) {
    for (int64_t i = 0; i < n; ++i) po[i] = static_cast<O>(f(pa[i], pb[i]));
  } else if (a_full && b.numel() == 1) {
    const T s = pb[0];
    for (int64_t i = 0; i < n; ++i) po[i] = static_cast<O>(f(pa[i], s));
  } else if (b_full && a.numel() == 1) {
    const T s = pa[0];
    for (int64_t i = 0; i < n; ++i) po[i] = static_cast<O>(f(s, pb[i]));
  } else {
    ForEachRow<3>(
        out.shape(),
        {ContiguousStrides(out.shape()), BroadcastStrides(a, out.shape()),
         BroadcastStrides(b, out.shape())},
        [&](const std::array<int64_t, 3>& off, int64_t len, const std::array<int64_t, 3>& st) {
          O* o = po + off[0];
          const T* x = pa + off[1];
          const T* y = pb + off[2];
          // Rows of a broadcast are mostly contiguous against a contiguous row or a repeated
          // scalar (bias adds): give the compiler loops it can vectorise.
          if (st[1] == 1 && st[2] == 1) {
            for (int64_t i = 0; i < len; ++i) o[i] = static_cast<O>(f(x[i], y[i]));
          } else if (st[1] == 1 && st[2] == 0) {
            const T yv = y[0];
            for (int64_t i = 0; i < len; ++i) o[i] = static_cast<O>(f(x[i], yv));
          } else if (st[1] == 0 && st[2] == 1) {
            const T xv = x[0];
            for (int64_t i = 0; i < len; ++i) o[i] = static_cast<O>(f(xv, y[i]));
          } else {
            for (int64_t i = 0; i < len; ++i) {
              o[i] = static_cast<O>(f(x[i * st[1]], y[i * st[2]]));
            }
          }
        });
  }
}

using namespace functors;  // NOLINT: the shared functors (binary_functors.h)
struct PowF {              // through double: see the CUDA kernel's PowF for its integer rule
  template <typename T>
  auto operator()(T a, T b) const {
    return std::pow(a, b);
  }
};

std::vector<TensorMeta> InferBinary(const std::vector<TensorMeta>& in, const char* op,
                                    bool to_bool) {
  if (in[0].dtype != in[1].dtype) {
    throw Error(StrCat(op, ": dtypes ", DTypeName(in[0].dtype), " and ", DTypeName(in[1].dtype),
                       " differ (the functional API promotes them first)"));
  }
  Shape s = BroadcastShapes(in[0].shape, in[1].shape, op);
  return {{s, to_bool ? DType::kBool : in[0].dtype, in[0].device}};
}

template <typename F, bool kToBool>
std::vector<Tensor> BinaryCpu(const std::vector<Tensor>& in, const Attrs&,
                              const std::vector<TensorMeta>& out) {
  Tensor o = Tensor::Empty(out[0]);
  DispatchAll(in[0].dtype(), "binary op", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using O = std::conditional_t<kToBool, bool, T>;
    BinaryLoop<T, O>(in[0], in[1], o, F{});
  });
  return {o};
}

std::vector<Tensor> RemainderCpu(const std::vector<Tensor>& in, const Attrs& attrs,
                                 const std::vector<TensorMeta>& out) {
  CheckNoIntegerZero(in[1], "remainder");
  return BinaryCpu<RemF, false>(in, attrs, out);
}

std::vector<TensorMeta> InferRemainder(const std::vector<TensorMeta>& in, const Attrs&) {
  ONEFLOW_CHECK(in[0].dtype != DType::kBool, "remainder: not defined for bool tensors");
  return InferBinary(in, "remainder", false);
}

Tensor SumTo(const Tensor& g, const Tensor& like) { return fn::sum_to(g, like.shape()); }

// d(a % b)/da = 1, d(a % b)/db = -floor(a / b) = -(a - a % b) / b.
std::vector<Tensor> RemainderGrad(const GradCtx& c) {
  const Tensor& g = c.grad_outputs[0];
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  Tensor ga = c.needs_input_grad[0] ? SumTo(g, a) : Tensor();
  Tensor gb = c.needs_input_grad[1]
                  ? SumTo(fn::neg(fn::mul(g, fn::div(fn::sub(a, c.outputs[0]), b))), b)
                  : Tensor();
  return {ga, gb};
}

std::vector<Tensor> AddGrad(const GradCtx& c) {
  const Tensor& g = c.grad_outputs[0];
  return {c.needs_input_grad[0] ? SumTo(g, c.inputs[0]) : Tensor(),
          c.needs_input_grad[1] ? SumTo(g, c.inputs[1]) : Tensor()};
}
std::vector<Tensor> SubGrad(const GradCtx& c) {
  const Tensor& g = c.grad_outputs[0];
  return {c.needs_input_grad[0] ? SumTo(g, c.inputs[0]) : Tensor(),
          c.needs_input_grad[1] ? SumTo(fn::neg(g), c.inputs[1]) : Tensor()};
}
std::vector<Tensor> MulGrad(const GradCtx& c) {
  const Tensor& g = c.grad_outputs[0];
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  return {c.needs_input_grad[0] ? SumTo(fn::mul(g, b), a) : Tensor(),
          c.needs_input_grad[1] ? SumTo(fn::mul(g, a), b) : Tensor()};
}
std::vector<Tensor> DivGrad(const GradCtx& c) {
  const Tensor& g = c.grad_outputs[0];
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  return {
      c.needs_input_grad[0] ? SumTo(fn::div(g, b), a) : Tensor(),
      c.needs_input_grad[1] ? SumTo(fn::neg(fn::div(fn::mul(g, c.outputs[0]), b)), b) : Tensor()};
}
std::vector<Tensor> PowGrad(const GradCtx& c) {
  const Tensor& g = c.grad_outputs[0];
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  Tensor ga, gb;
  if (c.needs_input_grad[0]) {
    // b * a^(b-1)
    ga = SumTo(fn::mul(g, fn::mul(b, fn::pow(a, fn::sub(b, fn::scalar_like(1, b))))), a);
  }
  if (c.needs_input_grad[1]) {
    // a^b * log(a), taken as 0 where a == 0 (PyTorch's convention)
    Tensor la = fn::where(fn::eq(a, fn::scalar_like(0, a)), fn::zeros_like(a), fn::log(a));
    gb = SumTo(fn::mul(g, fn::mul(c.outputs[0], la)), b);
  }
  return {ga, gb};
}
// Ties split the gradient evenly, as PyTorch does.
std::vector<Tensor> MaxMinGrad(const GradCtx& c, bool is_max) {
  const Tensor& g = c.grad_outputs[0];
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  Tensor a_wins = fn::to_dtype(is_max ? fn::gt(a, b) : fn::lt(a, b), g.dtype());
  Tensor tie = fn::mul_scalar(fn::to_dtype(fn::eq(a, b), g.dtype()), 0.5);
  Tensor wa = fn::add(a_wins, tie);
  return {c.needs_input_grad[0] ? SumTo(fn::mul(g, wa), a) : Tensor(),
          c.needs_input_grad[1] ? SumTo(fn::mul(g, fn::sub(fn::ones_like(wa), wa)), b) : Tensor()};
}
std::vector<Tensor> MaximumGrad(const GradCtx& c) { return MaxMinGrad(c, true); }
std::vector<Tensor> MinimumGrad(const GradCtx& c) { return MaxMinGrad(c, false); }

// ---------------------------------------------------------------- where

std::vector<TensorMeta> InferWhere(const std::vector<TensorMeta>& in, const Attrs&) {
  ONEFLOW_CHECK(in[0].dtype == DType::kBool, "where: condition must be a bool tensor, got ",
                DTypeName(in[0].dtype));
  ONEFLOW_CHECK(in[1].dtype == in[2].dtype,
                "where: x and y dtypes differ: ", DTypeName(in[1].dtype), " and ",
                DTypeName(in[2].dtype));
  Shape s =
      BroadcastShapes(BroadcastShapes(in[0].shape, in[1].shape, "where"), in[2].shape, "where");
  return {{s, in[1].dtype, in[1].device}};
}

std::vector<Tensor> WhereCpu(const std::vector<Tensor>& in, const Attrs&,
                             const std::vector<TensorMeta>& out) {
  Tensor o = Tensor::Empty(out[0]);
  const Shape& s = o.shape();
  DispatchAll(o.dtype(), "where", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const bool* pc = in[0].data<bool>();
    const T* pa = in[1].data<T>();
    const T* pb = in[2].data<T>();
    T* po = o.data<T>();
    ForEachRow<4>(
        s,
        {ContiguousStrides(s), BroadcastStrides(in[0], s), BroadcastStrides(in[1], s),
         BroadcastStrides(in[2], s)},
        [&](const std::array<int64_t, 4>& off, int64_t n, const std::array<int64_t, 4>& st) {
          for (int64_t i = 0; i < n; ++i) {
            po[off[0] + i] =
                pc[off[1] + i * st[1]] ? pa[off[2] + i * st[2]] : pb[off[3] + i * st[3]];
          }
        });
  });
  return {o};
}

std::vector<Tensor> WhereGrad(const GradCtx& c) {
  const Tensor& g = c.grad_outputs[0];
  Tensor zero = fn::zeros_like(g);
  return {Tensor(),
          c.needs_input_grad[1] ? SumTo(fn::where(c.inputs[0], g, zero), c.inputs[1]) : Tensor(),
          c.needs_input_grad[2] ? SumTo(fn::where(c.inputs[0], zero, g), c.inputs[2]) : Tensor()};
}

// ---------------------------------------------------------------- unary

template <typename F, bool kToBool = false>
std::vector<Tensor> UnaryCpu(const std::vector<Tensor>& in, const Attrs&,
                             const std::vector<TensorMeta>& out) {
  Tensor x = Contig(in[0]);
  Tensor o = Tensor::Empty(out[0]);
  DispatchAll(x.dtype(), "unary op", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using O = std::conditional_t<kToBool, bool, T>;
    const T* p = x.data<T>();
    O* q = o.data<O>();
    F f;
    for (int64_t i = 0, n = x.numel(); i < n; ++i) q[i] = static_cast<O>(f(p[i]));
  });
  return {o};
}

// The functors (NegF ... NotF) are core/ops/unary_functors.h's, shared with the CUDA kernels.

// Unary kernels over floating types only; the functional API casts integers first.
template <typename F>
std::vector<Tensor> FloatUnaryCpu(const std::vector<Tensor>& in, const Attrs& a,
                                  const std::vector<TensorMeta>& out) {
  DispatchFloating(in[0].dtype(), "unary op", [](auto) {});
  return UnaryCpu<F>(in, a, out);
}

std::vector<TensorMeta> InferToBool(const std::vector<TensorMeta>& in, const Attrs&) {
  return {{in[0].shape, DType::kBool, in[0].device}};
}

std::vector<Tensor> NegGrad(const GradCtx& c) { return {fn::neg(c.grad_outputs[0])}; }
std::vector<Tensor> ExpGrad(const GradCtx& c) { return {fn::mul(c.grad_outputs[0], c.outputs[0])}; }
std::vector<Tensor> LogGrad(const GradCtx& c) { return {fn::div(c.grad_outputs[0], c.inputs[0])}; }
std::vector<Tensor> SqrtGrad(const GradCtx& c) {
  return {fn::div(c.grad_outputs[0], fn::mul_scalar(c.outputs[0], 2.0))};
}
std::vector<Tensor> RsqrtGrad(const GradCtx& c) {
  const Tensor& y = c.outputs[0];
  return {fn::mul(c.grad_outputs[0], fn::mul_scalar(fn::mul(y, fn::square(y)), -0.5))};
}
std::vector<Tensor> AbsGrad(const GradCtx& c) {
  return {fn::mul(c.grad_outputs[0], fn::sign(c.inputs[0]))};
}
std::vector<Tensor> SignGrad(const GradCtx& c) { return {fn::zeros_like(c.inputs[0])}; }
std::vector<Tensor> SquareGrad(const GradCtx& c) {
  return {fn::mul(c.grad_outputs[0], fn::mul_scalar(c.inputs[0], 2.0))};
}
std::vector<Tensor> SigmoidGrad(const GradCtx& c) {
  const Tensor& y = c.outputs[0];
  return {fn::mul(c.grad_outputs[0], fn::mul(y, fn::sub(fn::ones_like(y), y)))};
}
std::vector<Tensor> TanhGrad(const GradCtx& c) {
  const Tensor& y = c.outputs[0];
  return {fn::mul(c.grad_outputs[0], fn::sub(fn::ones_like(y), fn::square(y)))};
}
std::vector<Tensor> GeluGrad(const GradCtx& c) {
  return {CallOp1(OP(gelu_grad), {c.grad_outputs[0], c.inputs[0]})};
}

// relu's gradient is hot in every MLP: one fused kernel instead of compare + cast + mul.
std::vector<Tensor> ReluGrad(const GradCtx& c) {
  return {CallOp1(OP(relu_grad), {c.grad_outputs[0], c.outputs[0]})};
}

// relu_grad(g, y) = g where y > 0: linear in g (its gradient is relu_grad again) and flat in y,
// so second derivatives through relu (gradient penalties) work.
std::vector<Tensor> ReluGradGrad(const GradCtx& c) {
  Tensor gg;
  if (c.needs_input_grad[0]) gg = CallOp1(OP(relu_grad), {c.grad_outputs[0], c.inputs[1]});
  return {gg, Tensor()};
}

std::vector<Tensor> ReluGradCpu(const std::vector<Tensor>& in, const Attrs&,
                                const std::vector<TensorMeta>& out) {
  Tensor g = Contig(in[0]), y = Contig(in[1]);
  Tensor o = Tensor::Empty(out[0]);
  DispatchFloating(g.dtype(), "relu_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = g.data<T>();
    const T* py = y.data<T>();
    T* q = o.data<T>();
    const ReluGradF f;
    for (int64_t i = 0, n = g.numel(); i < n; ++i) q[i] = f(pg[i], py[i]);
  });
  return {o};
}

// gelu and its gradient: float32 tensors of some size through oneDNN's vectorised erf
// (core/kernels/cpu/onednn_eltwise.h), the rest through the scalar loops.
std::vector<Tensor> GeluCpu(const std::vector<Tensor>& in, const Attrs& a,
                            const std::vector<TensorMeta>& out) {
  if (in[0].dtype() != DType::kFloat32 || !cpu::UseOneDnn(in[0].numel())) {
    return FloatUnaryCpu<GeluF>(in, a, out);
  }
  Tensor x = Contig(in[0]);
  Tensor o = Tensor::Empty(out[0]);
  cpu::GeluForward(x.data<float>(), o.data<float>(), x.numel());
  return {o};
}

std::vector<Tensor> GeluGradCpu(const std::vector<Tensor>& in, const Attrs&,
                                const std::vector<TensorMeta>& out) {
  Tensor g = Contig(in[0]), x = Contig(in[1]);
  Tensor o = Tensor::Empty(out[0]);
  if (g.dtype() == DType::kFloat32 && cpu::UseOneDnn(g.numel())) {
    cpu::GeluBackward(g.data<float>(), x.data<float>(), o.data<float>(), g.numel());
    return {o};
  }
  DispatchFloating(g.dtype(), "gelu_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = g.data<T>();
    const T* px = x.data<T>();
    T* q = o.data<T>();
    const GeluGradF f;
    for (int64_t i = 0, n = g.numel(); i < n; ++i) q[i] = f(pg[i], px[i]);
  });
  return {o};
}

std::vector<TensorMeta> InferGradLike(const std::vector<TensorMeta>& in, const Attrs&) {
  ONEFLOW_CHECK(in[0].shape == in[1].shape, "activation grad: shapes ", in[0].shape, " and ",
                in[1].shape, " differ");
  return {in[0]};
}

// ---------------------------------------------------------------- clamp

std::vector<Tensor> ClampCpu(const std::vector<Tensor>& in, const Attrs& a,
                             const std::vector<TensorMeta>& out) {
  Tensor x = Contig(in[0]);
  Tensor o = Tensor::Empty(out[0]);
  bool has_min = a.Get<bool>("has_min"), has_max = a.Get<bool>("has_max");
  double lo = a.Get<double>("min"), hi = a.Get<double>("max");
  DispatchAll(x.dtype(), "clamp", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = x.data<T>();
    T* q = o.data<T>();
    const ClampF<T> f{has_min, has_max, static_cast<T>(lo), static_cast<T>(hi)};
    for (int64_t i = 0, n = x.numel(); i < n; ++i) q[i] = f(p[i]);
  });
  return {o};
}

std::vector<Tensor> ClampGrad(const GradCtx& c) {
  const Tensor& x = c.inputs[0];
  Tensor mask = fn::ones_like(x);
  if (c.attrs.Get<bool>("has_min")) {
    mask = fn::mul(
        mask, fn::to_dtype(fn::ge(x, fn::scalar_like(c.attrs.Get<double>("min"), x)), x.dtype()));
  }
  if (c.attrs.Get<bool>("has_max")) {
    mask = fn::mul(
        mask, fn::to_dtype(fn::le(x, fn::scalar_like(c.attrs.Get<double>("max"), x)), x.dtype()));
  }
  return {fn::mul(c.grad_outputs[0], mask)};
}

}  // namespace

#define REGISTER_BINARY(name, F, grad, cuda_types)                  \
  ONEFLOW_REGISTER_OP(name)                                         \
      .Inputs(2)                                                    \
      .Infer(+[](const std::vector<TensorMeta>& in, const Attrs&) { \
        return InferBinary(in, #name, false);                       \
      })                                                            \
      .Grad(grad)                                                   \
      .Kernel(DeviceType::kCPU, BinaryCpu<F, false>);
#define REGISTER_COMPARE(name, F)                                   \
  ONEFLOW_REGISTER_OP(name)                                         \
      .Inputs(2)                                                    \
      .Infer(+[](const std::vector<TensorMeta>& in, const Attrs&) { \
        return InferBinary(in, #name, true);                        \
      })                                                            \
      .NonDifferentiable()                                          \
      .Kernel(DeviceType::kCPU, BinaryCpu<F, true>);
ONEFLOW_BINARY_TABLE_OPS(REGISTER_BINARY)
ONEFLOW_COMPARE_TABLE_OPS(REGISTER_COMPARE)
#undef REGISTER_BINARY
#undef REGISTER_COMPARE
ONEFLOW_REGISTER_OP(remainder)
    .Inputs(2)
    .Infer(InferRemainder)
    .Grad(RemainderGrad)
    .Kernel(DeviceType::kCPU, RemainderCpu);

ONEFLOW_REGISTER_OP(where)
    .Inputs(3)
    .Infer(InferWhere)
    .Grad(WhereGrad)
    .NonDiffInputs({0})
    .Kernel(DeviceType::kCPU, WhereCpu);

#define REGISTER_UNARY(name, kernel, grad) \
  ONEFLOW_REGISTER_OP(name)                \
      .Inputs(1)                           \
      .Infer(SameAsInput0)                 \
      .Grad(grad)                          \
      .Kernel(DeviceType::kCPU, kernel)
REGISTER_UNARY(neg, UnaryCpu<NegF>, NegGrad);
REGISTER_UNARY(exp, FloatUnaryCpu<ExpF>, ExpGrad);
REGISTER_UNARY(log, FloatUnaryCpu<LogF>, LogGrad);
REGISTER_UNARY(sqrt, FloatUnaryCpu<SqrtF>, SqrtGrad);
REGISTER_UNARY(rsqrt, FloatUnaryCpu<RsqrtF>, RsqrtGrad);
REGISTER_UNARY(abs, UnaryCpu<AbsF>, AbsGrad);
REGISTER_UNARY(sign, UnaryCpu<SignF>, SignGrad);
REGISTER_UNARY(square, UnaryCpu<SquareF>, SquareGrad);
REGISTER_UNARY(relu, UnaryCpu<ReluF>, ReluGrad);
REGISTER_UNARY(sigmoid, FloatUnaryCpu<SigmoidF>, SigmoidGrad);
REGISTER_UNARY(tanh, FloatUnaryCpu<TanhF>, TanhGrad);
REGISTER_UNARY(gelu, GeluCpu, GeluGrad);
REGISTER_UNARY(clamp, ClampCpu, ClampGrad);
#undef REGISTER_UNARY
ONEFLOW_REGISTER_OP(logical_not)
    .Inputs(1)
    .Infer(InferToBool)
    .NonDifferentiable()
    .Kernel(DeviceType::kCPU, (UnaryCpu<NotF, true>));
ONEFLOW_REGISTER_OP(relu_grad)
    .Inputs(2)
    .Infer(InferGradLike)
    .Grad(ReluGradGrad)
    .NonDiffInputs({1})
    .Kernel(DeviceType::kCPU, ReluGradCpu);
ONEFLOW_REGISTER_OP(gelu_grad)
    .Inputs(2)
    .Infer(InferGradLike)
    .Grad(NoDoubleBackward)
    .Kernel(DeviceType::kCPU, GeluGradCpu);

namespace fn {

namespace {

int Category(DType t) { return t == DType::kBool ? 0 : IsIntegral(t) ? 1 : IsComplex(t) ? 3 : 2; }

// PyTorch's rule: a 0-dim operand (a Python scalar) does not widen a dim tensor of the same
// or a higher category.
DType ResultType(const Tensor& a, const Tensor& b) {
  if (a.dtype() == b.dtype()) return a.dtype();
  if (a.ndim() == 0 && b.ndim() > 0 && Category(a.dtype()) <= Category(b.dtype())) {
    return b.dtype();
  }
  if (b.ndim() == 0 && a.ndim() > 0 && Category(b.dtype()) <= Category(a.dtype())) {
    return a.dtype();
  }
  return PromoteTypes(a.dtype(), b.dtype());
}

Tensor Binary(const OpDef& op, Tensor a, Tensor b, bool floating = false) {
  DType t = ResultType(a, b);
  if (floating && !IsFloating(t) && !IsComplex(t)) t = DType::kFloat32;
  if (a.dtype() != t) a = to_dtype(a, t);
  if (b.dtype() != t) b = to_dtype(b, t);
  return CallOp1(op, {a, b});
}

Tensor FloatUnary(const OpDef& op, const Tensor& x) {
  return CallOp1(op, {IsDifferentiable(x.dtype()) ? x : to_dtype(x, DType::kFloat32)});
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return Binary(OP(add), a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return Binary(OP(sub), a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return Binary(OP(mul), a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return Binary(OP(div), a, b, /*floating=*/true); }
Tensor pow(const Tensor& a, const Tensor& b) { return Binary(OP(pow), a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return Binary(OP(maximum), a, b); }
Tensor remainder(const Tensor& a, const Tensor& b) { return Binary(OP(remainder), a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return Binary(OP(minimum), a, b); }
Tensor eq(const Tensor& a, const Tensor& b) { return Binary(OP(eq), a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return Binary(OP(ne), a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return Binary(OP(lt), a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return Binary(OP(le), a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return Binary(OP(gt), a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return Binary(OP(ge), a, b); }
Tensor logical_and(const Tensor& a, const Tensor& b) {
  return CallOp1(OP(logical_and), {to_dtype(a, DType::kBool), to_dtype(b, DType::kBool)});
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return CallOp1(OP(logical_or), {to_dtype(a, DType::kBool), to_dtype(b, DType::kBool)});
}
Tensor logical_not(const Tensor& a) { return CallOp1(OP(logical_not), {a}); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  DType t = ResultType(a, b);
  return CallOp1(OP(where),
                 {cond.dtype() == DType::kBool ? cond : to_dtype(cond, DType::kBool),
                  a.dtype() == t ? a : to_dtype(a, t), b.dtype() == t ? b : to_dtype(b, t)});
}

Tensor neg(const Tensor& x) { return CallOp1(OP(neg), {x}); }
Tensor exp(const Tensor& x) { return FloatUnary(OP(exp), x); }
Tensor log(const Tensor& x) { return FloatUnary(OP(log), x); }
Tensor sqrt(const Tensor& x) { return FloatUnary(OP(sqrt), x); }
Tensor rsqrt(const Tensor& x) { return FloatUnary(OP(rsqrt), x); }
Tensor abs(const Tensor& x) { return CallOp1(OP(abs), {x}); }
Tensor sign(const Tensor& x) { return CallOp1(OP(sign), {x}); }
Tensor square(const Tensor& x) { return CallOp1(OP(square), {x}); }
Tensor relu(const Tensor& x) { return CallOp1(OP(relu), {x}); }
Tensor relu6(const Tensor& x) { return clamp(x, 0.0, 6.0); }
Tensor sigmoid(const Tensor& x) { return FloatUnary(OP(sigmoid), x); }
Tensor tanh(const Tensor& x) { return FloatUnary(OP(tanh), x); }
Tensor gelu(const Tensor& x) { return FloatUnary(OP(gelu), x); }

Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  ONEFLOW_CHECK(min || max, "clamp: at least one of min and max must be given");
  Attrs a;
  a.Set("has_min", min.has_value()).Set("min", min.value_or(0.0));
  a.Set("has_max", max.has_value()).Set("max", max.value_or(0.0));
  return CallOp1(OP(clamp), {x}, a);
}

Tensor add_scalar(const Tensor& x, double v) { return add(x, scalar_like(v, x)); }
Tensor mul_scalar(const Tensor& x, double v) { return mul(x, scalar_like(v, x)); }

}  // namespace fn
}  // namespace oneflow
