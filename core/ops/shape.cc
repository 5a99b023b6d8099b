// Shape and view ops. reshape, permute, slice and expand return views that share storage
// (reshape copies when the input's strides do not allow a view); cat, copy and cast copy.
#include <cstring>

#include "core/autograd.h"
#include "core/kernels/cpu/cpu_util.h"
#include "core/ops/op_util.h"
#include "core/trace.h"

namespace oneflow {

namespace {

using IntList = std::vector<int64_t>;

// ---------------------------------------------------------------- reshape

Shape ResolveShape(const IntList& req, const Shape& in, const char* op) {
  IntList out = req;
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      ONEFLOW_CHECK(infer < 0, op, ": only one dimension can be -1, got ", Shape(req));
      infer = static_cast<int64_t>(i);
    } else {
      ONEFLOW_CHECK(out[i] >= 0, op, ": invalid size ", out[i], " in shape ", Shape(req));
      known *= out[i];
    }
  }
  if (infer >= 0) {
    ONEFLOW_CHECK(known != 0 && in.numel() % known == 0, op, ": shape ", Shape(req),
                  " is invalid for input of size ", in.numel());
    out[infer] = in.numel() / known;
  }
  ONEFLOW_CHECK(Shape(out).numel() == in.numel(), op, ": shape ", Shape(req),
                " is invalid for input of size ", in.numel());
  return Shape(out);
}

std::vector<TensorMeta> InferReshape(const std::vector<TensorMeta>& in, const Attrs& a) {
  return {
      {ResolveShape(a.Get<IntList>("shape"), in[0].shape, "reshape"), in[0].dtype, in[0].device}};
}

// Strides that view (old_shape, old_strides) as new_shape without a copy, or false when the
// memory layout does not allow it (PyTorch's rule: each run of merged dims must be contiguous).
bool ViewStrides(const Shape& old_shape, const IntList& old_strides, const Shape& new_shape,
                 IntList* new_strides) {
  new_strides->assign(new_shape.ndim(), 0);
  if (old_shape.numel() == 0 || old_shape.ndim() == 0) return false;
  int64_t view_d = new_shape.ndim() - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = old_shape.ndim() - 1; d >= 0; --d) {
    tensor_numel *= old_shape[d];
    if (d == 0 ||
        (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        (*new_strides)[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

std::vector<Tensor> ReshapeCpu(const std::vector<Tensor>& in, const Attrs&,
                               const std::vector<TensorMeta>& out) {
  const Tensor& x = in[0];
  IntList strides;
  if (!x.is_contiguous() && ViewStrides(x.shape(), x.strides(), out[0].shape, &strides)) {
    return {Tensor::MakeView(x, out[0].shape, strides, x.offset())};
  }
  // x itself when contiguous: then the result is a view. The copy op, unlike Contig, runs on
  // every device, so this kernel serves CUDA too.
  Tensor c = fn::contiguous(x);
  if (!c.is_same(x) && c.offset() == 0) {
    // a fresh copy takes the new shape itself: the result is no view (Tensor.is_view says so)
    c.impl()->shape = out[0].shape;
    c.impl()->strides = ContiguousStrides(out[0].shape);
    return {c};
  }
  return {Tensor::MakeView(c, out[0].shape, ContiguousStrides(out[0].shape), c.offset())};
}

std::vector<Tensor> ReshapeGrad(const GradCtx& c) {
  return {fn::reshape(c.grad_outputs[0], c.inputs[0].shape().dims())};
}

// ---------------------------------------------------------------- permute

IntList CheckedPerm(const Attrs& a, int64_t ndim) {
  IntList perm = a.Get<IntList>("dims");
  ONEFLOW_CHECK(static_cast<int64_t>(perm.size()) == ndim, "permute: expected ", ndim,
                " dims for a tensor of ", ndim, " dims, got ", perm.size());
  std::vector<bool> seen(ndim, false);
  for (auto& d : perm) {
    d = WrapDim(d, ndim, "permute");
    ONEFLOW_CHECK(!seen[d], "permute: dim ", d, " repeated in ", Shape(a.Get<IntList>("dims")));
    seen[d] = true;
  }
  return perm;
}

std::vector<TensorMeta> InferPermute(const std::vector<TensorMeta>& in, const Attrs& a) {
  IntList perm = CheckedPerm(a, in[0].shape.ndim());
  IntList s(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) s[i] = in[0].shape[perm[i]];
  return {{Shape(s), in[0].dtype, in[0].device}};
}

std::vector<Tensor> PermuteCpu(const std::vector<Tensor>& in, const Attrs& a,
                               const std::vector<TensorMeta>& out) {
  const Tensor& x = in[0];
  IntList perm = CheckedPerm(a, x.ndim());
  IntList st(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) st[i] = x.strides()[perm[i]];
  return {Tensor::MakeView(x, out[0].shape, st, x.offset())};
}

std::vector<Tensor> PermuteGrad(const GradCtx& c) {
  IntList perm = CheckedPerm(c.attrs, c.inputs[0].ndim());
  IntList inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
  return {fn::permute(c.grad_outputs[0], inv)};
}

// ---------------------------------------------------------------- slice

struct SliceSpec {
  int64_t dim, start, end, step, len;
};

SliceSpec GetSlice(const Attrs& a, const Shape& s) {
  SliceSpec sp;
  ONEFLOW_CHECK(s.ndim() > 0, "slice: cannot slice a 0-dim tensor (it has no dims to slice)");
  sp.dim = WrapDim(a.Get<int64_t>("dim"), s.ndim(), "slice");
  int64_t n = s[sp.dim];
  sp.step = a.Get<int64_t>("step");
  ONEFLOW_CHECK(sp.step > 0, "slice: step must be positive, got ", sp.step);
  auto clampi = [n](int64_t v) { return v < 0 ? std::max<int64_t>(v + n, 0) : std::min(v, n); };
  sp.start = clampi(a.Get<int64_t>("start"));
  sp.end = std::max(clampi(a.Get<int64_t>("end")), sp.start);
  sp.len = (sp.end - sp.start + sp.step - 1) / sp.step;
  return sp;
}

std::vector<TensorMeta> InferSlice(const std::vector<TensorMeta>& in, const Attrs& a) {
  ONEFLOW_CHECK(in[0].shape.ndim() > 0, "slice: cannot slice a 0-dim tensor");
  SliceSpec sp = GetSlice(a, in[0].shape);
  IntList s = in[0].shape.dims();
  s[sp.dim] = sp.len;
  return {{Shape(s), in[0].dtype, in[0].device}};
}

std::vector<Tensor> SliceCpu(const std::vector<Tensor>& in, const Attrs& a,
                             const std::vector<TensorMeta>& out) {
  const Tensor& x = in[0];
  SliceSpec sp = GetSlice(a, x.shape());
  IntList st = x.strides();
  int64_t offset = x.offset() + sp.start * st[sp.dim];
  st[sp.dim] *= sp.step;
  return {Tensor::MakeView(x, out[0].shape, st, offset)};
}

std::vector<Tensor> SliceGrad(const GradCtx& c) {
  Attrs a = c.attrs;
  a.Set("shape", c.inputs[0].shape().dims());
  return {CallOp1(OP(slice_grad), {c.grad_outputs[0]}, a)};
}

// Zeros of the input's shape with the gradient written into the slice.
std::vector<TensorMeta> InferSliceGrad(const std::vector<TensorMeta>& in, const Attrs& a) {
  return {{AttrShape(a, "shape"), in[0].dtype, in[0].device}};
}

std::vector<Tensor> SliceGradCpu(const std::vector<Tensor>& in, const Attrs& a,
                                 const std::vector<TensorMeta>& out) {
  Tensor o = Tensor::Empty(out[0]);
  fn::fill_(o, 0.0);
  SliceSpec sp = GetSlice(a, o.shape());
  IntList st = o.strides();
  int64_t offset = sp.start * st[sp.dim];
  st[sp.dim] *= sp.step;
  fn::copy_(Tensor::MakeView(o, in[0].shape(), st, offset), in[0]);
  return {o};
}

std::vector<Tensor> SliceGradGrad(const GradCtx& c) {
  return {fn::slice(c.grad_outputs[0], c.attrs.Get<int64_t>("dim"), c.attrs.Get<int64_t>("start"),
                    c.attrs.Get<int64_t>("end"), c.attrs.Get<int64_t>("step"))};
}

// ---------------------------------------------------------------- expand

std::vector<TensorMeta> InferExpand(const std::vector<TensorMeta>& in, const Attrs& a) {
  const Shape& s = in[0].shape;
  IntList req = a.Get<IntList>("shape");
  int64_t lead = static_cast<int64_t>(req.size()) - s.ndim();
  ONEFLOW_CHECK(lead >= 0, "expand: the target shape ", Shape(req),
                " has fewer dims than the input ", s);
  for (int64_t i = 0; i < static_cast<int64_t>(req.size()); ++i) {
    int64_t have = i < lead ? 1 : s[i - lead];
    if (req[i] == -1) {
      ONEFLOW_CHECK(i >= lead, "expand: -1 is not allowed for the new leading dim ", i);
      req[i] = have;
    }
    ONEFLOW_CHECK(have == req[i] || have == 1, "expand: cannot expand dim ", i, " of size ", have,
                  " to ", req[i], " (input ", s, ", target ", Shape(a.Get<IntList>("shape")), ")");
  }
  return {{Shape(req), in[0].dtype, in[0].device}};
}

std::vector<Tensor> ExpandCpu(const std::vector<Tensor>& in, const Attrs&,
                              const std::vector<TensorMeta>& out) {
  const Tensor& x = in[0];
  return {Tensor::MakeView(x, out[0].shape, BroadcastStrides(x, out[0].shape), x.offset())};
}

std::vector<Tensor> ExpandGrad(const GradCtx& c) {
  return {fn::sum_to(c.grad_outputs[0], c.inputs[0].shape())};
}

// ---------------------------------------------------------------- copy and cast

std::vector<Tensor> CopyCpu(const std::vector<Tensor>& in, const Attrs&,
                            const std::vector<TensorMeta>& out) {
  Tensor o = Tensor::Empty(out[0]);
  fn::copy_(o, in[0]);
  return {o};
}

std::vector<Tensor> IdentityGrad(const GradCtx& c) { return {c.grad_outputs[0]}; }

std::vector<TensorMeta> InferCast(const std::vector<TensorMeta>& in, const Attrs& a) {
  return {{in[0].shape, a.Get<DType>("dtype"), in[0].device}};
}

std::vector<Tensor> CastGrad(const GradCtx& c) {
  if (!IsDifferentiable(c.inputs[0].dtype())) return {Tensor()};
  return {fn::to_dtype(c.grad_outputs[0], c.inputs[0].dtype())};
}

// ---------------------------------------------------------------- cat

std::vector<TensorMeta> InferCat(const std::vector<TensorMeta>& in, const Attrs& a) {
  ONEFLOW_CHECK(!in.empty(), "cat: expected a non-empty list of tensors");
  const Shape& s0 = in[0].shape;
  ONEFLOW_CHECK(s0.ndim() > 0, "cat: zero-dimensional tensor (input 0) cannot be concatenated");
  int64_t dim = WrapDim(a.Get<int64_t>("dim"), s0.ndim(), "cat");
  IntList out = s0.dims();
  out[dim] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const Shape& s = in[i].shape;
    ONEFLOW_CHECK(in[i].dtype == in[0].dtype, "cat: input ", i, " has dtype ",
                  DTypeName(in[i].dtype), " but input 0 has ", DTypeName(in[0].dtype));
    ONEFLOW_CHECK(s.ndim() == s0.ndim(), "cat: input ", i, " has shape ", s, " but input 0 has ",
                  s0, ": tensors must have the same number of dims");
    for (int64_t d = 0; d < s.ndim(); ++d) {
      ONEFLOW_CHECK(d == dim || s[d] == s0[d], "cat: input ", i, " has shape ", s,
                    " but input 0 has ", s0, ": sizes must match except in dim ", dim);
    }
    out[dim] += s[dim];
  }
  return {{Shape(out), in[0].dtype, in[0].device}};
}

std::vector<Tensor> CatCpu(const std::vector<Tensor>& in, const Attrs& a,
                           const std::vector<TensorMeta>& out) {
  Tensor o = Tensor::Empty(out[0]);
  int64_t dim = WrapDim(a.Get<int64_t>("dim"), o.ndim(), "cat");
  int64_t pos = 0;
  for (const Tensor& x : in) {
    int64_t n = x.shape()[dim];
    if (n == 0) continue;
    IntList st = o.strides();
    fn::copy_(Tensor::MakeView(o, x.shape(), st, pos * st[dim]), x);
    pos += n;
  }
  return {o};
}

std::vector<Tensor> CatGrad(const GradCtx& c) {
  int64_t dim = WrapDim(c.attrs.Get<int64_t>("dim"), c.inputs[0].ndim(), "cat");
  std::vector<Tensor> grads;
  int64_t pos = 0;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    int64_t n = c.inputs[i].shape()[dim];
    grads.push_back(c.needs_input_grad[i] ? fn::slice(c.grad_outputs[0], dim, pos, pos + n)
                                          : Tensor());
    pos += n;
  }
  return grads;
}

}  // namespace

// The view ops (reshape, permute, slice, expand) only make views (reshape copies through the
// copy op), so their kernels serve every device and every dtype.
ONEFLOW_REGISTER_OP(reshape)
    .Inputs(1)
    .Complex()
    .Infer(InferReshape)
    .Grad(ReshapeGrad)
    .CpuHalf()
    .Kernel(DeviceType::kCPU, ReshapeCpu)
    .Kernel(DeviceType::kCUDA, ReshapeCpu);
ONEFLOW_REGISTER_OP(permute)
    .Inputs(1)
    .Complex()
    .Infer(InferPermute)
    .Grad(PermuteGrad)
    .CpuHalf()
    .Kernel(DeviceType::kCPU, PermuteCpu)
    .Kernel(DeviceType::kCUDA, PermuteCpu);
ONEFLOW_REGISTER_OP(slice)
    .Inputs(1)
    .Complex()
    .Infer(InferSlice)
    .Grad(SliceGrad)
    .CpuHalf()
    .Kernel(DeviceType::kCPU, SliceCpu)
    .Kernel(DeviceType::kCUDA, SliceCpu);
ONEFLOW_REGISTER_OP(slice_grad)
    .Inputs(1)
    .Complex()
    .Infer(InferSliceGrad)
    .Grad(SliceGradGrad)
    .CpuHalf()
    .Kernel(DeviceType::kCPU, SliceGradCpu);
ONEFLOW_REGISTER_OP(expand)
    .Inputs(1)
    .Complex()
    .Infer(InferExpand)
    .Grad(ExpandGrad)
    .CpuHalf()
    .Kernel(DeviceType::kCPU, ExpandCpu)
    .Kernel(DeviceType::kCUDA, ExpandCpu);
ONEFLOW_REGISTER_OP(copy)
    .Inputs(1)
    .Complex()
    .Infer(SameAsInput0)
    .Grad(IdentityGrad)
    .CpuHalf()
    .Kernel(DeviceType::kCPU, CopyCpu);
ONEFLOW_REGISTER_OP(cast).Inputs(1).Infer(InferCast).Grad(CastGrad).CpuHalf().Complex().Kernel(
    DeviceType::kCPU, CopyCpu);
ONEFLOW_REGISTER_OP(cat).Inputs(-1).Infer(InferCat).Grad(CatGrad).CpuHalf().Complex().Kernel(
    DeviceType::kCPU, CatCpu);

namespace {

template <typename T>
struct IsStdComplex : std::false_type {};
template <typename T>
struct IsStdComplex<std::complex<T>> : std::true_type {};

// One element from S to D; the half types convert through float; a real value becomes a
// complex one with imaginary part 0, a complex one a real one by its real part (as numpy's
// and PyTorch's casts).
template <typename D, typename S>
D ConvertValue(S v) {
  constexpr bool kHalfS = std::is_same_v<S, Half> || std::is_same_v<S, BFloat16>;
  constexpr bool kHalfD = std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>;
  if constexpr (std::is_same_v<S, D>) {
    return v;
  } else if constexpr (IsStdComplex<S>::value && IsStdComplex<D>::value) {
    return D(static_cast<typename D::value_type>(v.real()),
             static_cast<typename D::value_type>(v.imag()));
  } else if constexpr (IsStdComplex<S>::value) {
    return ConvertValue<D>(v.real());
  } else if constexpr (IsStdComplex<D>::value) {
    return D(ConvertValue<typename D::value_type>(v), 0);
  } else if constexpr (kHalfS || kHalfD) {
    return static_cast<D>(static_cast<float>(v));
  } else {
    return static_cast<D>(v);
  }
}

// The gradient of a move between devices is the move back.
class ToDeviceNode : public Node {
 public:
  explicit ToDeviceNode(Device from) : from_(from) {}
  std::vector<Tensor> Apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0].defined() ? grads[0] : Full(output_metas[0], 0.0);
    return {fn::to_device(g, from_)};
  }
  std::string name() const override { return "ToCopyBackward0"; }

 private:
  Device from_;
};

}  // namespace

namespace fn {

Tensor reshape(const Tensor& x, const IntList& shape) {
  Attrs a;
  a.Set("shape", shape);
  return CallOp1(OP(reshape), {x}, a);
}

Tensor view(const Tensor& x, const IntList& shape) {
  IntList strides;
  Shape target = ResolveShape(shape, x.shape(), "view");
  if (!x.is_contiguous() && !ViewStrides(x.shape(), x.strides(), target, &strides)) {
    throw Error(StrCat("view: the tensor of shape ", x.shape(),
                       " is not contiguous, so it cannot be viewed as ", Shape(shape),
                       "; use .reshape(...) instead"));
  }
  return reshape(x, shape);
}

Tensor permute(const Tensor& x, const IntList& dims) {
  Attrs a;
  a.Set("dims", dims);
  return CallOp1(OP(permute), {x}, a);
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  int64_t n = x.ndim();
  IntList perm(n);
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  if (n == 0) return x;
  std::swap(perm[WrapDim(dim0, n, "transpose")], perm[WrapDim(dim1, n, "transpose")]);
  return permute(x, perm);
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  Attrs a;
  a.Set("dim", dim).Set("start", start).Set("end", end).Set("step", step);
  return CallOp1(OP(slice), {x}, a);
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  ONEFLOW_CHECK(x.ndim() > 0, "select: cannot index a 0-dim tensor");
  int64_t d = WrapDim(dim, x.ndim(), "select");
  int64_t n = x.shape()[d];
  if (index < -n || index >= n) {
    throw IndexError(
        StrCat("index ", index, " is out of bounds for dimension ", d, " with size ", n));
  }
  if (index < 0) index += n;
  return squeeze(slice(x, d, index, index + 1), d);
}

Tensor expand(const Tensor& x, const IntList& shape) {
  if (x.shape().dims() == shape) return x;
  Attrs a;
  a.Set("shape", shape);
  return CallOp1(OP(expand), {x}, a);
}

Tensor squeeze(const Tensor& x, std::optional<int64_t> dim) {
  IntList s;
  if (dim) {
    int64_t d = WrapDim(*dim, x.ndim(), "squeeze");
    for (int64_t i = 0; i < x.ndim(); ++i) {
      if (i != d || x.shape()[i] != 1) s.push_back(x.shape()[i]);
    }
  } else {
    for (int64_t v : x.shape().dims()) {
      if (v != 1) s.push_back(v);
    }
  }
  return reshape(x, s);
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  int64_t d = WrapDim(dim, x.ndim() + 1, "unsqueeze");
  IntList s = x.shape().dims();
  s.insert(s.begin() + d, 1);
  return reshape(x, s);
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (x.ndim() == 0) return reshape(x, {1});
  int64_t s = WrapDim(start_dim, x.ndim(), "flatten");
  int64_t e = WrapDim(end_dim, x.ndim(), "flatten");
  ONEFLOW_CHECK(s <= e, "flatten: start_dim ", start_dim, " comes after end_dim ", end_dim);
  IntList out;
  for (int64_t i = 0; i < s; ++i) out.push_back(x.shape()[i]);
  int64_t m = 1;
  for (int64_t i = s; i <= e; ++i) m *= x.shape()[i];
  out.push_back(m);
  for (int64_t i = e + 1; i < x.ndim(); ++i) out.push_back(x.shape()[i]);
  return reshape(x, out);
}

Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : contiguous_copy(x); }
Tensor contiguous_copy(const Tensor& x) { return CallOp1(OP(copy), {x}); }
Tensor clone(const Tensor& x) { return contiguous_copy(x); }

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  ONEFLOW_CHECK(!xs.empty(), "cat: expected a non-empty list of tensors");
  DType t = xs[0].dtype();
  for (const Tensor& x : xs) t = PromoteTypes(t, x.dtype());
  std::vector<Tensor> in;
  for (const Tensor& x : xs) in.push_back(x.dtype() == t ? x : to_dtype(x, t));
  Attrs a;
  a.Set("dim", dim);
  return CallOp1(OP(cat), in, a);
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  ONEFLOW_CHECK(!xs.empty(), "stack: expected a non-empty list of tensors");
  for (size_t i = 1; i < xs.size(); ++i) {
    ONEFLOW_CHECK(xs[i].shape() == xs[0].shape(), "stack: expected all tensors of shape ",
                  xs[0].shape(), ", got ", xs[i].shape(), " at entry ", i);
  }
  int64_t d = WrapDim(dim, xs[0].ndim() + 1, "stack");
  std::vector<Tensor> us;
  for (const Tensor& x : xs) us.push_back(unsqueeze(x, d));
  return cat(us, d);
}

Tensor to_dtype(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Attrs a;
  a.Set("dtype", dtype);
  return CallOp1(OP(cast), {x}, a);
}

Tensor to_device(const Tensor& x, const Device& device) {
  if (x.device() == device) return x;
  if (CurrentTracer()) {  // a copy without an op call: nn.Graph's replay redoes it as a step
    return TracedStep("to_device", {x}, [device](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{to_device(in[0], device)};
    })[0];
  }
  ONEFLOW_CHECK(!x.is_global(), "to: a global tensor moves between devices with to_global ",
                "and a placement of the other device type, got ", x.ToString(), " to ",
                device.ToString());
  ONEFLOW_CHECK(x.device().type != DeviceType::kMeta, "to: a meta tensor of shape ", x.shape(),
                " has no data to move to ", device.ToString(),
                "; use module.to_empty(device=...) or to_global of a meta module");
  if (device.type == DeviceType::kMeta) {  // the shape and dtype, no data: nothing to copy
    Tensor out = Tensor::Empty(x.shape(), x.dtype(), device);
    if (x.requires_grad() && IsDifferentiable(x.dtype()))
      out.impl()->mutable_autograd().requires_grad = true;
    return out;
  }
  const DeviceHooks& hooks = GetDeviceHooks();
  if (!hooks.copy_to) {
    throw Error(StrCat("to: cannot move a tensor from ", x.device().ToString(), " to ",
                       device.ToString(), ": this build has no CUDA support"));
  }
  Tensor out;
  {
    NoGradGuard no_grad;
    out = hooks.copy_to(contiguous(x), device);
  }
  if (x.requires_grad() && GradModeEnabled() && IsDifferentiable(x.dtype())) {
    auto node = std::make_shared<ToDeviceNode>(x.device());
    node->next_edges.push_back(GradientEdge(x));
    node->output_metas.push_back(out.meta());
    AutogradMeta& am = out.impl()->mutable_autograd();
    am.requires_grad = true;
    am.grad_fn = node;
  }
  return out;
}

void copy_(const Tensor& dst, const Tensor& src) {
  if (CurrentTracer()) {  // a write without an op call: the replay redoes it
    TracedStep("copy_", {dst, src}, [](const std::vector<Tensor>& in) {
      copy_(in[0], in[1]);
      return std::vector<Tensor>{};
    });
    return;
  }
  if ((dst.is_global() || src.is_global()) && GetGlobalHooks().copy) {
    return GetGlobalHooks().copy(dst, src);
  }
  Shape s = BroadcastShapes(dst.shape(), src.shape(), "copy_");
  ONEFLOW_CHECK(s == dst.shape(), "copy_: cannot broadcast source of shape ", src.shape(),
                " into destination of shape ", dst.shape());
  if (dst.device().type == DeviceType::kMeta) return;  // a meta tensor holds no values
  if (!OnHost(dst.device())) {
    Tensor from = to_device(src.detach(), dst.device());
    dst.storage()->bump_version();
    GetDeviceHooks().copy_strided(dst, from);
    return;
  }
  if (src.device() != dst.device()) return copy_(dst, to_device(src.detach(), dst.device()));
  dst.storage()->bump_version();
  DispatchWithComplex(dst.dtype(), "copy_", [&](auto dtag) {
    using D = typename decltype(dtag)::type;
    DispatchWithComplex(src.dtype(), "copy_", [&](auto stag) {
      using S = typename decltype(stag)::type;
      D* pd = dst.data<D>();
      const S* ps = src.data<S>();
      auto conv = [](S v) { return ConvertValue<D>(v); };
      if (dst.is_contiguous() && src.is_contiguous() && src.shape() == dst.shape()) {
        if constexpr (std::is_same_v<S, D>) {
          std::memcpy(pd, ps, dst.numel() * sizeof(D));
        } else {
          for (int64_t i = 0, n = dst.numel(); i < n; ++i) pd[i] = conv(ps[i]);
        }
        return;
      }
      ForEachRow<2>(
          s, {dst.strides(), BroadcastStrides(src, s)},
          [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
            for (int64_t i = 0; i < n; ++i) {
              pd[off[0] + i * st[0]] = conv(ps[off[1] + i * st[1]]);
            }
          });
    });
  });
}

void fill_(const Tensor& dst, double value) {
  if (CurrentTracer()) {
    TracedStep("fill_", {dst}, [value](const std::vector<Tensor>& in) {
      fill_(in[0], value);
      return std::vector<Tensor>{};
    });
    return;
  }
  if (dst.is_global() && GetGlobalHooks().fill) return GetGlobalHooks().fill(dst, value);
  if (dst.device().type == DeviceType::kMeta) return;  // a meta tensor holds no values
  if (!OnHost(dst.device())) {
    Tensor v = Full(TensorMeta{Shape({}), dst.dtype(), dst.device()}, value);
    dst.storage()->bump_version();
    GetDeviceHooks().copy_strided(dst, v);
    return;
  }
  dst.storage()->bump_version();
  DispatchWithComplex(dst.dtype(), "fill_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v;
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      v = T(static_cast<float>(value));
    } else if constexpr (IsStdComplex<T>::value) {
      v = T(static_cast<typename T::value_type>(value), 0);
    } else {
      v = static_cast<T>(value);
    }
    T* p = dst.data<T>();
    if (dst.is_contiguous()) {
      for (int64_t i = 0, n = dst.numel(); i < n; ++i) p[i] = v;
      return;
    }
    ForEachRow<1>(
        dst.shape(), {dst.strides()},
        [&](const std::array<int64_t, 1>& off, int64_t n, const std::array<int64_t, 1>& st) {
          for (int64_t i = 0; i < n; ++i) p[off[0] + i * st[0]] = v;
        });
  });
}

}  // namespace fn
}  // namespace oneflow
