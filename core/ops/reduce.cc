// Reductions: sum over dims (mean composes on it), max/min over one dim with indices.
#include <limits>

#include "core/kernels/cpu/cpu_util.h"
#include "core/ops/op_util.h"
#include "core/ops/reduce_functors.h"

namespace oneflow {

namespace {

std::vector<bool> ReducedMask(const Attrs& a, int64_t ndim, const char* op) {
  std::vector<bool> mask(ndim, false);
  const auto& dims = a.Get<std::vector<int64_t>>("dims");
  if (ndim == 0) {
    // A 0-dim tensor reduces over dim 0 or -1 as over nothing (PyTorch's rule).
    for (int64_t d : dims) WrapDim(d, 1, op);
    return mask;
  }
  if (dims.empty()) mask.assign(ndim, true);
  for (int64_t d : dims) {
    int64_t w = WrapDim(d, ndim, op);
    ONEFLOW_CHECK(!mask[w] || dims.empty(), op, ": dim ", d, " appears more than once");
    mask[w] = true;
  }
  return mask;
}

Shape ReducedShape(const Shape& s, const std::vector<bool>& mask, bool keepdim) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < s.ndim(); ++i) {
    if (!mask[i]) {
      out.push_back(s[i]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return Shape(out);
}

DType SumDType(DType t) { return IsFloating(t) ? t : DType::kInt64; }

std::vector<TensorMeta> InferSum(const std::vector<TensorMeta>& in, const Attrs& a) {
  auto mask = ReducedMask(a, in[0].shape.ndim(), "sum");
  return {{ReducedShape(in[0].shape, mask, a.Get<bool>("keepdim")), SumDType(in[0].dtype),
           in[0].device}};
}

// sum and prod over dims: one loop, R combines (the functors are shared with the CUDA kernels).
template <typename R>
std::vector<Tensor> ReduceCpu(const std::vector<Tensor>& in, const Attrs& a,
                              const std::vector<TensorMeta>& out, const char* op) {
  const Tensor& x = in[0];
  auto mask = ReducedMask(a, x.ndim(), op);
  Shape keep = ReducedShape(x.shape(), mask, /*keepdim=*/true);
  std::vector<int64_t> acc_strides = ContiguousStrides(keep);
  for (int64_t i = 0; i < x.ndim(); ++i) {
    if (mask[i]) acc_strides[i] = 0;
  }
  Tensor o = Tensor::Empty(out[0]);
  const R r;
  DispatchAll(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Accumulate in double (floats) or int64 (integers and bool) for accuracy.
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
    std::vector<Acc> acc(keep.numel(), R::template Identity<Acc>());
    const T* px = x.data<T>();
    ForEachRow<2>(
        x.shape(), {acc_strides, x.strides()},
        [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
          const T* p = px + off[1];
          if (st[0] == 0) {
            Acc s = R::template Identity<Acc>();
            if (st[1] == 1) {
              for (int64_t i = 0; i < n; ++i) s = r(s, static_cast<Acc>(p[i]));
            } else {
              for (int64_t i = 0; i < n; ++i) s = r(s, static_cast<Acc>(p[i * st[1]]));
            }
            acc[off[0]] = r(acc[off[0]], s);
          } else {
            Acc* q = acc.data() + off[0];
            if (st[0] == 1 && st[1] == 1) {  // summing rows into a row (bias gradients)
              for (int64_t i = 0; i < n; ++i) q[i] = r(q[i], static_cast<Acc>(p[i]));
            } else {
              for (int64_t i = 0; i < n; ++i) {
                q[i * st[0]] = r(q[i * st[0]], static_cast<Acc>(p[i * st[1]]));
              }
            }
          }
        });
    DispatchAll(o.dtype(), op, [&](auto otag) {
      using O = typename decltype(otag)::type;
      O* po = o.data<O>();
      for (size_t i = 0; i < acc.size(); ++i) po[i] = static_cast<O>(acc[i]);
    });
  });
  return {o};
}

std::vector<Tensor> SumCpu(const std::vector<Tensor>& in, const Attrs& a,
                           const std::vector<TensorMeta>& out) {
  return ReduceCpu<functors::SumR>(in, a, out, "sum");
}

std::vector<Tensor> ProdCpu(const std::vector<Tensor>& in, const Attrs& a,
                            const std::vector<TensorMeta>& out) {
  return ReduceCpu<functors::ProdR>(in, a, out, "prod");
}

std::vector<TensorMeta> InferProd(const std::vector<TensorMeta>& in, const Attrs& a) {
  auto mask = ReducedMask(a, in[0].shape.ndim(), "prod");
  return {{ReducedShape(in[0].shape, mask, a.Get<bool>("keepdim")), SumDType(in[0].dtype),
           in[0].device}};
}

// d prod / d x_i = the product of the others: out / x_i without zeros; with one zero in the
// slice, the product of the rest at the zero and 0 elsewhere; with two or more, 0 everywhere.
std::vector<Tensor> ProdGrad(const GradCtx& c) {
  const Tensor& x = c.inputs[0];
  auto mask = ReducedMask(c.attrs, x.ndim(), "prod");
  Shape keep = ReducedShape(x.shape(), mask, true);
  fn::IntList dims;
  for (int64_t i = 0; i < x.ndim(); ++i) {
    if (mask[i]) dims.push_back(i);
  }
  auto widen = [&](const Tensor& t) {
    return fn::expand(fn::reshape(t, keep.dims()), x.shape().dims());
  };
  Tensor g = widen(c.grad_outputs[0]);
  Tensor out = widen(c.outputs[0]);
  Tensor is_zero = fn::eq(x, fn::scalar_like(0, x));
  Tensor zeros = widen(fn::sum(is_zero, dims, true));
  Tensor rest = widen(fn::prod(fn::where(is_zero, fn::ones_like(x), x), dims, true));
  Tensor no_zero = fn::eq(zeros, fn::scalar_like(0, zeros));
  Tensor safe_x = fn::where(is_zero, fn::ones_like(x), x);
  Tensor others =
      fn::where(no_zero, fn::div(out, safe_x),
                fn::where(fn::logical_and(fn::eq(zeros, fn::scalar_like(1, zeros)), is_zero), rest,
                          fn::zeros_like(x)));
  return {fn::mul(g, others)};
}

std::vector<Tensor> SumGrad(const GradCtx& c) {
  const Tensor& x = c.inputs[0];
  auto mask = ReducedMask(c.attrs, x.ndim(), "sum");
  Shape keep = ReducedShape(x.shape(), mask, true);
  return {fn::expand(fn::reshape(c.grad_outputs[0], keep.dims()), x.shape().dims())};
}

// max/min over one dim: (values, int64 indices); the first extreme wins ties.
template <bool kMax>
std::vector<TensorMeta> InferArgReduce(const std::vector<TensorMeta>& in, const Attrs& a) {
  const TensorMeta& x = in[0];
  const char* op = kMax ? "max" : "min";
  int64_t dim = WrapDim(a.Get<int64_t>("dim"), x.shape.ndim(), op);
  ONEFLOW_CHECK(x.shape.ndim() == 0 || x.shape[dim] > 0, op, ": cannot reduce over dim ", dim,
                " of size 0 in a tensor of shape ", x.shape);
  std::vector<bool> mask(x.shape.ndim(), false);
  if (x.shape.ndim()) mask[dim] = true;
  Shape s = ReducedShape(x.shape, mask, a.Get<bool>("keepdim"));
  return {{s, x.dtype, x.device}, {s, DType::kInt64, x.device}};
}

template <bool kMax>
std::vector<Tensor> ArgReduceCpu(const std::vector<Tensor>& in, const Attrs& a,
                                 const std::vector<TensorMeta>& out) {
  Tensor x = Contig(in[0]);
  Tensor v = Tensor::Empty(out[0]);
  Tensor idx = Tensor::Empty(out[1]);
  int64_t dim = x.ndim() ? WrapDim(a.Get<int64_t>("dim"), x.ndim(), kMax ? "max" : "min") : 0;
  int64_t n = x.ndim() ? x.shape()[dim] : 1;
  int64_t inner = 1;
  for (int64_t i = dim + 1; i < x.ndim(); ++i) inner *= x.shape()[i];
  int64_t outer = n * inner ? x.numel() / (n * inner) : 0;  // 0: an empty other dim
  DispatchAll(x.dtype(), kMax ? "max" : "min", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = x.data<T>();
    T* pv = v.data<T>();
    int64_t* pi = idx.data<int64_t>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < inner; ++j) {
        const T* row = p + o * n * inner + j;
        T best = row[0];
        int64_t bi = 0;
        for (int64_t k = 1; k < n; ++k) {
          T val = row[k * inner];
          bool nan_best = best != best;
          if (!nan_best && (val != val || (kMax ? val > best : val < best))) {
            best = val;
            bi = k;
          }
        }
        pv[o * inner + j] = best;
        pi[o * inner + j] = bi;
      }
    }
  });
  return {v, idx};
}

std::vector<Tensor> ArgReduceGrad(const GradCtx& c) {
  const Tensor& x = c.inputs[0];
  Tensor g = c.grad_outputs[0];
  Tensor idx = c.outputs[1];
  if (x.ndim() == 0) return {g};
  int64_t dim = WrapDim(c.attrs.Get<int64_t>("dim"), x.ndim(), "max");
  if (!c.attrs.Get<bool>("keepdim")) {
    g = fn::unsqueeze(g, dim);
    idx = fn::unsqueeze(idx, dim);
  }
  static const OpDef& scatter_add = OpRegistry::Global().Get("scatter_add");
  Attrs a;
  a.Set("dim", dim).Set("shape", x.shape().dims());
  return {CallOp1(scatter_add, {idx, g}, a)};
}

}  // namespace

ONEFLOW_REGISTER_OP(sum).Inputs(1).Infer(InferSum).Grad(SumGrad).Kernel(DeviceType::kCPU, SumCpu);
ONEFLOW_REGISTER_OP(prod).Inputs(1).Infer(InferProd).Grad(ProdGrad).Kernel(DeviceType::kCPU,
                                                                           ProdCpu);
ONEFLOW_REGISTER_OP(max_dim)
    .Inputs(1)
    .Infer(InferArgReduce<true>)
    .Grad(ArgReduceGrad)
    .Kernel(DeviceType::kCPU, ArgReduceCpu<true>);
ONEFLOW_REGISTER_OP(min_dim)
    .Inputs(1)
    .Infer(InferArgReduce<false>)
    .Grad(ArgReduceGrad)
    .Kernel(DeviceType::kCPU, ArgReduceCpu<false>);

namespace fn {

Tensor sum(const Tensor& x, const IntList& dims, bool keepdim) {
  Attrs a;
  a.Set("dims", dims).Set("keepdim", keepdim);
  return CallOp1(OP(sum), {x}, a);
}

Tensor mean(const Tensor& x, const IntList& dims, bool keepdim) {
  if (!IsDifferentiable(x.dtype())) {
    throw Error(StrCat("mean: expected a floating point tensor, got ", DTypeName(x.dtype()),
                       "; convert with .float() first"));
  }
  int64_t count = 1;
  if (dims.empty()) {
    count = x.numel();
  } else {
    for (int64_t d : dims) {
      const int64_t w = WrapDim(d, x.ndim(), "mean");
      if (x.ndim()) count *= x.shape()[w];  // a 0-dim tensor's dim 0 is itself
    }
  }
  return mul_scalar(sum(x, dims, keepdim), 1.0 / static_cast<double>(count));
}

Tensor prod(const Tensor& x, const IntList& dims, bool keepdim) {
  Attrs a;
  a.Set("dims", dims).Set("keepdim", keepdim);
  return CallOp1(OP(prod), {x}, a);
}

std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  Attrs a;
  a.Set("dim", dim).Set("keepdim", keepdim);
  auto out = CallOp(OP(max_dim), {x}, a);
  return {out[0], out[1]};
}

std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  Attrs a;
  a.Set("dim", dim).Set("keepdim", keepdim);
  auto out = CallOp(OP(min_dim), {x}, a);
  return {out[0], out[1]};
}

// The gradient of a full max/min is shared evenly by all elements that reach it (PyTorch's
// rule): value m plus sum((x - x.detach()) * w), which is exactly m with gradient w.
Tensor ExtremeAll(const Tensor& x, bool is_max) {
  ONEFLOW_CHECK(x.numel() > 0, is_max ? "max" : "min", ": cannot reduce an empty tensor");
  Tensor flat = reshape(x, {-1});
  // Without a gradient, no detached alias (nn.Graph's trace of a global tensor cannot replay
  // one: clip_grad_norm_'s inf norm of sharded gradients reduces here).
  if (!x.requires_grad() || !GradModeEnabled()) {
    return is_max ? max(flat, 0).first : min(flat, 0).first;
  }
  Tensor m = is_max ? max(flat.detach(), 0).first : min(flat.detach(), 0).first;
  Tensor mask = to_dtype(eq(flat.detach(), m), x.dtype());
  Tensor w = div(mask, sum(mask));
  return add(m, sum(mul(sub(flat, flat.detach()), w)));
}
Tensor max_all(const Tensor& x) { return ExtremeAll(x, true); }

// amax/amin over dims: max_dim one dim at a time on the detached input, and the gradient shared
// evenly by the elements that reach the extreme (PyTorch's rule), as in ExtremeAll.
Tensor ExtremeDims(const Tensor& x, const IntList& dims, bool keepdim, bool is_max) {
  const char* op = is_max ? "amax" : "amin";
  std::vector<bool> mask(x.ndim(), dims.empty());
  for (int64_t d : dims) {
    int64_t w = WrapDim(d, std::max<int64_t>(x.ndim(), 1), op);
    ONEFLOW_CHECK(x.ndim() == 0 || !mask[w], op, ": dim ", d, " appears more than once");
    if (x.ndim()) mask[w] = true;
  }
  Tensor m = x.detach();
  for (int64_t d = 0; d < x.ndim(); ++d) {
    if (!mask[d]) continue;
    ONEFLOW_CHECK(x.shape()[d] > 0, op, ": cannot reduce over dim ", d,
                  " of size 0 in a tensor of shape ", x.shape());
    m = is_max ? max(m, d, true).first : min(m, d, true).first;
  }
  if (x.requires_grad() && GradModeEnabled()) {
    IntList rd;
    for (int64_t d = 0; d < x.ndim(); ++d) {
      if (mask[d]) rd.push_back(d);
    }
    Tensor hit = to_dtype(eq(x.detach(), m), x.dtype());
    Tensor w = div(hit, sum(hit, rd, true));
    m = add(m, sum(mul(sub(x, x.detach()), w), rd, true));
  }
  if (keepdim || x.ndim() == 0) return m;
  IntList shape;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    if (!mask[d]) shape.push_back(x.shape()[d]);
  }
  return reshape(m, shape);
}
Tensor amax(const Tensor& x, const IntList& dims, bool keepdim) {
  return ExtremeDims(x, dims, keepdim, true);
}
Tensor amin(const Tensor& x, const IntList& dims, bool keepdim) {
  return ExtremeDims(x, dims, keepdim, false);
}
Tensor min_all(const Tensor& x) { return ExtremeAll(x, false); }

// argmax/argmin name themselves in their refusals (max_dim/min_dim would name max/min).
void CheckArgReduce(const Tensor& x, std::optional<int64_t> dim, const char* op) {
  if (!dim) {
    ONEFLOW_CHECK(x.numel() > 0, op, ": cannot reduce an empty tensor of shape ", x.shape());
    return;
  }
  const int64_t d = WrapDim(*dim, x.ndim(), op);
  ONEFLOW_CHECK(x.ndim() == 0 || x.shape()[d] > 0, op, ": cannot reduce over dim ", d,
                " of size 0 in a tensor of shape ", x.shape());
}
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  CheckArgReduce(x, dim, "argmax");
  if (!dim) return max(reshape(x, {-1}), 0).second;
  return max(x, *dim, keepdim).second;
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  CheckArgReduce(x, dim, "argmin");
  if (!dim) return min(reshape(x, {-1}), 0).second;
  return min(x, *dim, keepdim).second;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  int64_t lead = x.ndim() - shape.ndim();
  ONEFLOW_CHECK(lead >= 0, "sum_to: cannot reduce shape ", x.shape(), " to ", shape);
  fn::IntList dims;
  for (int64_t i = 0; i < x.ndim(); ++i) {
    if (i < lead || (shape[i - lead] == 1 && x.shape()[i] != 1)) dims.push_back(i);
  }
  Tensor s = dims.empty() ? x : sum(x, dims, /*keepdim=*/true);
  return reshape(s, shape.dims());
}

}  // namespace fn
}  // namespace oneflow
