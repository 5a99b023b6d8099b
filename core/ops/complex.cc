// Complex tensors: view_as_real / view_as_complex and the complex rules of the ops that take
// complex inputs (see complex.h). Each rule writes the op on the (..., 2) real pairs with real
// ops, so gradients come from the real ops' gradients.
#include "core/ops/complex.h"

#include <cmath>

#include "core/ops/op_util.h"

namespace oneflow {

namespace {

using fn::IntList;

// ---------------------------------------------------------------- the two views

// A view of t's storage as dtype with new geometry (strides and offset in dtype's elements).
Tensor Reinterpret(const Tensor& t, DType dtype, Shape shape, IntList strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = dtype;
  impl->extension = t.impl()->extension;
  return Tensor(std::move(impl));
}

std::vector<TensorMeta> InferViewAsReal(const std::vector<TensorMeta>& in, const Attrs&) {
  ONEFLOW_CHECK(IsComplex(in[0].dtype), "view_as_real: expected a complex tensor, got ",
                DTypeName(in[0].dtype));
  IntList s = in[0].shape.dims();
  s.push_back(2);
  return {{Shape(s), ComplexPart(in[0].dtype), in[0].device}};
}

std::vector<Tensor> ViewAsRealKernel(const std::vector<Tensor>& in, const Attrs&,
                                     const std::vector<TensorMeta>& out) {
  const Tensor& z = in[0];
  IntList st;
  for (int64_t s : z.strides()) st.push_back(2 * s);
  st.push_back(1);
  return {Reinterpret(z, out[0].dtype, out[0].shape, st, 2 * z.offset())};
}

std::vector<TensorMeta> InferViewAsComplex(const std::vector<TensorMeta>& in, const Attrs&) {
  const TensorMeta& x = in[0];
  ONEFLOW_CHECK(x.dtype == DType::kFloat32 || x.dtype == DType::kFloat64,
                "view_as_complex: expected a float32 or float64 tensor, got ", DTypeName(x.dtype));
  ONEFLOW_CHECK(x.shape.ndim() >= 1 && x.shape[x.shape.ndim() - 1] == 2,
                "view_as_complex: expected a last dim of size 2 (real, imag), got shape ", x.shape);
  IntList s = x.shape.dims();
  s.pop_back();
  return {{Shape(s), ComplexOf(x.dtype), x.device}};
}

std::vector<Tensor> ViewAsComplexKernel(const std::vector<Tensor>& in, const Attrs&,
                                        const std::vector<TensorMeta>& out) {
  Tensor x = in[0];
  auto adjacent = [](const Tensor& t) {
    if (t.strides().back() != 1 || t.offset() % 2 != 0) return false;
    for (size_t i = 0; i + 1 < t.strides().size(); ++i) {
      if (t.strides()[i] % 2 != 0) return false;
    }
    return true;
  };
  if (!adjacent(x)) x = fn::contiguous_copy(x);
  IntList st;
  for (size_t i = 0; i + 1 < x.strides().size(); ++i) st.push_back(x.strides()[i] / 2);
  return {Reinterpret(x, out[0].dtype, out[0].shape, st, x.offset() / 2)};
}

// The two view ops as the rules use them: always views (the rules never write into them).
Tensor Pairs(const Tensor& z) { return CallOp1(OP(view_as_real), {z}); }
Tensor FromPairs(const Tensor& x) { return CallOp1(OP(view_as_complex), {x}); }

// What the user-facing views return for a tensor autograd follows: a copy. A write into a view
// of another dtype is not followed back to its root by the in-place machinery (core/inplace.h
// works in one dtype's elements), so a copy keeps gradients right; OneFlow's real() and
// imag() are copies too.
Tensor ViewOrCopy(const Tensor& view, const Tensor& of) {
  return of.requires_grad() && GradModeEnabled() ? fn::contiguous_copy(view) : view;
}

std::vector<Tensor> ViewAsRealGrad(const GradCtx& c) { return {FromPairs(c.grad_outputs[0])}; }
std::vector<Tensor> ViewAsComplexGrad(const GradCtx& c) { return {Pairs(c.grad_outputs[0])}; }

// ---------------------------------------------------------------- helpers of the rules

Tensor Re(const Tensor& z) { return fn::select(Pairs(z), -1, 0); }
Tensor Im(const Tensor& z) { return fn::select(Pairs(z), -1, 1); }
// re + i im from two real tensors of one shape and dtype.
Tensor Make(const Tensor& re, const Tensor& im) { return FromPairs(fn::stack({re, im}, -1)); }

// The inputs in their common complex dtype (a real operand gets imaginary part 0).
std::vector<Tensor> Promoted(const std::vector<Tensor>& in) {
  DType t = in[0].dtype();
  for (const Tensor& x : in) t = PromoteTypes(t, x.dtype());
  t = ComplexOf(t);
  std::vector<Tensor> out;
  for (const Tensor& x : in) out.push_back(fn::to_dtype(x, t));
  return out;
}

// atan2(y, x) in (-pi, pi], from atan.
Tensor Atan2(const Tensor& y, const Tensor& x) {
  Tensor base = fn::atan(fn::div(y, x));
  Tensor pi = fn::where(fn::ge(y, fn::scalar_like(0, y)), fn::scalar_like(M_PI, base),
                        fn::scalar_like(-M_PI, base));
  Tensor on_axis = fn::mul_scalar(fn::sign(y), M_PI / 2);
  return fn::where(fn::lt(x, fn::scalar_like(0, x)), fn::add(base, pi),
                   fn::where(fn::eq(x, fn::scalar_like(0, x)), on_axis, base));
}

Tensor Abs(const Tensor& z) {
  Tensor re = Re(z), im = Im(z);
  return fn::sqrt(fn::add(fn::mul(re, re), fn::mul(im, im)));
}

Tensor Log(const Tensor& z) { return Make(fn::log(Abs(z)), Atan2(Im(z), Re(z))); }

Tensor Exp(const Tensor& z) {
  Tensor e = fn::exp(Re(z)), im = Im(z);
  return Make(fn::mul(e, fn::cos(im)), fn::mul(e, fn::sin(im)));
}

Tensor Mul(const Tensor& a, const Tensor& b) {
  Tensor ar = Re(a), ai = Im(a), br = Re(b), bi = Im(b);
  return Make(fn::sub(fn::mul(ar, br), fn::mul(ai, bi)), fn::add(fn::mul(ar, bi), fn::mul(ai, br)));
}

// Reduction dims of a complex tensor as non-negative dims of its pairs (never the pair axis).
IntList PairDims(const Tensor& z, const IntList& dims, const char* op) {
  IntList out;
  if (dims.empty()) {
    for (int64_t d = 0; d < z.ndim(); ++d) out.push_back(d);
  }
  for (int64_t d : dims) out.push_back(WrapDim(d, z.ndim(), op));
  return out;
}

// ---------------------------------------------------------------- the rules

using Ins = std::vector<Tensor>;

Ins AddRule(const Ins& in, const Attrs&) {
  Ins p = Promoted(in);
  return {FromPairs(fn::add(Pairs(p[0]), Pairs(p[1])))};
}
Ins SubRule(const Ins& in, const Attrs&) {
  Ins p = Promoted(in);
  return {FromPairs(fn::sub(Pairs(p[0]), Pairs(p[1])))};
}
Ins MulRule(const Ins& in, const Attrs&) {
  Ins p = Promoted(in);
  return {Mul(p[0], p[1])};
}
Ins DivRule(const Ins& in, const Attrs&) {
  Ins p = Promoted(in);
  Tensor ar = Re(p[0]), ai = Im(p[0]), br = Re(p[1]), bi = Im(p[1]);
  Tensor d = fn::add(fn::mul(br, br), fn::mul(bi, bi));
  return {Make(fn::div(fn::add(fn::mul(ar, br), fn::mul(ai, bi)), d),
               fn::div(fn::sub(fn::mul(ai, br), fn::mul(ar, bi)), d))};
}
// a^b = exp(b log a), principal branch; 0^b is 0 (its gradient is not defined here).
Ins PowRule(const Ins& in, const Attrs&) {
  Ins p = Promoted(in);
  return {Exp(Mul(p[1], Log(p[0])))};
}
Ins EqRule(const Ins& in, const Attrs&) {
  Ins p = Promoted(in);
  return {fn::logical_and(fn::eq(Re(p[0]), Re(p[1])), fn::eq(Im(p[0]), Im(p[1])))};
}
Ins NeRule(const Ins& in, const Attrs&) {
  Ins p = Promoted(in);
  return {fn::logical_or(fn::ne(Re(p[0]), Re(p[1])), fn::ne(Im(p[0]), Im(p[1])))};
}
Ins NegRule(const Ins& in, const Attrs&) { return {FromPairs(fn::neg(Pairs(in[0])))}; }
Ins ExpRule(const Ins& in, const Attrs&) { return {Exp(in[0])}; }
Ins LogRule(const Ins& in, const Attrs&) { return {Log(in[0])}; }
// sqrt(r) e^(i theta / 2): the principal root.
Ins SqrtRule(const Ins& in, const Attrs&) {
  Tensor r = fn::sqrt(Abs(in[0])), half = fn::mul_scalar(Atan2(Im(in[0]), Re(in[0])), 0.5);
  return {Make(fn::mul(r, fn::cos(half)), fn::mul(r, fn::sin(half)))};
}
Ins AbsRule(const Ins& in, const Attrs&) { return {Abs(in[0])}; }
Ins SquareRule(const Ins& in, const Attrs&) { return {Mul(in[0], in[0])}; }
Ins ReciprocalRule(const Ins& in, const Attrs& a) {
  return DivRule({fn::ones_like(in[0]), in[0]}, a);
}
Ins SumRule(const Ins& in, const Attrs& a) {
  const Tensor& z = in[0];
  const IntList& dims = a.Get<IntList>("dims");
  if (z.ndim() == 0) {  // over nothing (PyTorch's rule for 0-dim tensors)
    for (int64_t d : dims) WrapDim(d, 1, "sum");
    return {fn::contiguous_copy(z)};
  }
  Tensor s = fn::sum(Pairs(z), PairDims(z, dims, "sum"), a.Get<bool>("keepdim"));
  return {FromPairs(s)};
}
// Four real products: (ar + i ai)(br + i bi).
Ins MatmulRule(const Ins& in, const Attrs&) {
  Ins p = Promoted(in);
  Tensor ar = Re(p[0]), ai = Im(p[0]), br = Re(p[1]), bi = Im(p[1]);
  return {Make(fn::sub(fn::matmul(ar, br), fn::matmul(ai, bi)),
               fn::add(fn::matmul(ar, bi), fn::matmul(ai, br)))};
}

// Ops that move, select or sum elements (indexing, scatter, flip, triangles, where): the op on
// the real parts and on the imaginary parts. Floating inputs join the complex ones' dtype;
// index and mask inputs go to both calls as they are.
Ins Parts(const OpDef& op, const Ins& in, const Attrs& a) {
  DType t = DType::kComplex64;
  for (const Tensor& x : in) {
    if (IsDifferentiable(x.dtype())) t = PromoteTypes(t, x.dtype());
  }
  Ins re, im;
  for (const Tensor& x : in) {
    const bool data = IsDifferentiable(x.dtype());
    const Tensor z = data ? fn::to_dtype(x, t) : x;
    re.push_back(data ? Re(z) : x);
    im.push_back(data ? Im(z) : x);
  }
  Ins r = CallOp(op, re, a), i = CallOp(op, im, a), out;
  for (size_t k = 0; k < r.size(); ++k) {
    out.push_back(IsDifferentiable(r[k].dtype()) ? Make(r[k], i[k]) : r[k]);
  }
  return out;
}

}  // namespace

// Views: their kernels serve every device (no memory is touched).
ONEFLOW_REGISTER_OP(view_as_real)
    .Inputs(1)
    .Complex()
    .Infer(InferViewAsReal)
    .Grad(ViewAsRealGrad)
    .Kernel(DeviceType::kCPU, ViewAsRealKernel)
    .Kernel(DeviceType::kCUDA, ViewAsRealKernel);
ONEFLOW_REGISTER_OP(view_as_complex)
    .Inputs(1)
    .Complex()
    .Infer(InferViewAsComplex)
    .Grad(ViewAsComplexGrad)
    .Kernel(DeviceType::kCPU, ViewAsComplexKernel)
    .Kernel(DeviceType::kCUDA, ViewAsComplexKernel);

// The ops that take complex inputs through a rule; every other op refuses them (dispatch).
ONEFLOW_REGISTER_OP(add).ComplexRule(AddRule);
ONEFLOW_REGISTER_OP(sub).ComplexRule(SubRule);
ONEFLOW_REGISTER_OP(mul).ComplexRule(MulRule);
ONEFLOW_REGISTER_OP(div).ComplexRule(DivRule);
ONEFLOW_REGISTER_OP(pow).ComplexRule(PowRule);
ONEFLOW_REGISTER_OP(eq).ComplexRule(EqRule);
ONEFLOW_REGISTER_OP(ne).ComplexRule(NeRule);
ONEFLOW_REGISTER_OP(neg).ComplexRule(NegRule);
ONEFLOW_REGISTER_OP(exp).ComplexRule(ExpRule);
ONEFLOW_REGISTER_OP(log).ComplexRule(LogRule);
ONEFLOW_REGISTER_OP(sqrt).ComplexRule(SqrtRule);
ONEFLOW_REGISTER_OP(abs).ComplexRule(AbsRule);
ONEFLOW_REGISTER_OP(square).ComplexRule(SquareRule);
ONEFLOW_REGISTER_OP(reciprocal).ComplexRule(ReciprocalRule);
ONEFLOW_REGISTER_OP(sum).ComplexRule(SumRule);
ONEFLOW_REGISTER_OP(matmul).ComplexRule(MatmulRule);
#define ONEFLOW_PARTS_RULE(name)         \
  ONEFLOW_REGISTER_OP(name).ComplexRule( \
      +[](const Ins& in, const Attrs& a) { return Parts(OP(name), in, a); })
ONEFLOW_PARTS_RULE(gather);
ONEFLOW_PARTS_RULE(scatter);
ONEFLOW_PARTS_RULE(scatter_add);
ONEFLOW_PARTS_RULE(index_select);
ONEFLOW_PARTS_RULE(index_select_grad);
ONEFLOW_PARTS_RULE(flip);
ONEFLOW_PARTS_RULE(tril);
ONEFLOW_PARTS_RULE(triu);
ONEFLOW_PARTS_RULE(where);
#undef ONEFLOW_PARTS_RULE

namespace fn {

Tensor view_as_real(const Tensor& z) { return ViewOrCopy(Pairs(z), z); }
Tensor view_as_complex(const Tensor& x) { return ViewOrCopy(FromPairs(x), x); }

Tensor real(const Tensor& z) { return IsComplex(z.dtype()) ? ViewOrCopy(Re(z), z) : z; }

Tensor imag(const Tensor& z) {
  ONEFLOW_CHECK(IsComplex(z.dtype()), "imag: expected a complex tensor, got ",
                DTypeName(z.dtype()));
  return ViewOrCopy(Im(z), z);
}

Tensor complex(const Tensor& re, const Tensor& im) {
  for (const Tensor* t : {&re, &im}) {
    ONEFLOW_CHECK(t->dtype() == DType::kFloat32 || t->dtype() == DType::kFloat64,
                  "complex: expected float32 or float64 real and imag parts, got ",
                  DTypeName(re.dtype()), " and ", DTypeName(im.dtype()));
  }
  const DType t = PromoteTypes(re.dtype(), im.dtype());
  const IntList s = BroadcastShapes(re.shape(), im.shape(), "complex").dims();
  return Make(expand(to_dtype(re, t), s), expand(to_dtype(im, t), s));
}

Tensor conj(const Tensor& z) {
  if (!IsComplex(z.dtype())) return z;
  return Make(Re(z), neg(Im(z)));
}

Tensor angle(const Tensor& z) {
  if (IsComplex(z.dtype())) return Atan2(Im(z), Re(z));
  Tensor x = IsFloating(z.dtype()) ? z : to_dtype(z, DType::kFloat32);
  // pi for negative numbers, 0 otherwise (NaN stays NaN, as in PyTorch)
  Tensor pi = mul_scalar(to_dtype(lt(x, scalar_like(0, x)), x.dtype()), M_PI);
  return where(ne(x, x), x, pi);
}

}  // namespace fn
}  // namespace oneflow
