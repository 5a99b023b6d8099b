// Index ops: gather and scatter_add along a dim (each the other's gradient), index_select and
// its gradient index_select_grad (the rows of g added into zeros at the rows the index names,
// in index order: the same sums on every device, no atomics on CUDA).
#include <cstring>

#include "core/kernels/cpu/cpu_util.h"
#include "core/ops/op_util.h"

namespace oneflow {

namespace {

void CheckIndex(const TensorMeta& idx, const char* op) {
  ONEFLOW_CHECK(idx.dtype == DType::kInt64 || idx.dtype == DType::kInt32, op,
                ": index must be an int64 or int32 tensor, got ", DTypeName(idx.dtype));
}

std::vector<int64_t> IndexValues(const Tensor& idx, int64_t bound, const char* op, int64_t dim) {
  Tensor c = Contig(idx);
  std::vector<int64_t> v(c.numel());
  for (int64_t i = 0; i < c.numel(); ++i) {
    int64_t k = c.dtype() == DType::kInt64 ? c.data<int64_t>()[i] : c.data<int32_t>()[i];
    if (k < -bound || k >= bound) {
      throw IndexError(
          StrCat(op, ": index ", k, " is out of bounds for dimension ", dim, " with size ", bound));
    }
    v[i] = k < 0 ? k + bound : k;
  }
  return v;
}

// gather(x, dim, index): out[i][j][k] = x[i][index[i][j][k]][k] (for dim 1); out has index's shape.
std::vector<TensorMeta> InferGather(const std::vector<TensorMeta>& in, const Attrs& a) {
  CheckIndex(in[1], "gather");
  const Shape &s = in[0].shape, &is = in[1].shape;
  int64_t dim = WrapDim(a.Get<int64_t>("dim"), s.ndim(), "gather");
  ONEFLOW_CHECK(is.ndim() == s.ndim(), "gather: index has ", is.ndim(), " dims but input has ",
                s.ndim());
  for (int64_t d = 0; d < s.ndim(); ++d) {
    ONEFLOW_CHECK(d == dim || is[d] == s[d], "gather: index shape ", is, " must match input shape ",
                  s, " except in dim ", dim);
  }
  return {{is, in[0].dtype, in[0].device}};
}

std::vector<Tensor> GatherCpu(const std::vector<Tensor>& in, const Attrs& a,
                              const std::vector<TensorMeta>& out) {
  Tensor x = Contig(in[0]);
  Tensor o = Tensor::Empty(out[0]);
  int64_t dim = WrapDim(a.Get<int64_t>("dim"), x.ndim(), "gather");
  Around xs = Split(x.shape(), dim), os = Split(o.shape(), dim);
  std::vector<int64_t> idx = IndexValues(in[1], xs.n, "gather", dim);
  DispatchAll(x.dtype(), "gather", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    T* po = o.data<T>();
    for (int64_t i = 0; i < os.outer; ++i)
      for (int64_t j = 0; j < os.n; ++j)
        for (int64_t k = 0; k < os.inner; ++k) {
          int64_t e = (i * os.n + j) * os.inner + k;
          po[e] = px[(i * xs.n + idx[e]) * xs.inner + k];
        }
  });
  return {o};
}

std::vector<Tensor> GatherGrad(const GradCtx& c) {
  Attrs a;
  a.Set("dim", c.attrs.Get<int64_t>("dim")).Set("shape", c.inputs[0].shape().dims());
  return {CallOp1(OP(scatter_add), {c.inputs[1], c.grad_outputs[0]}, a), Tensor()};
}

// scatter_add(index, src) into zeros of attr shape: out[i][index[i][j][k]][k] += src[i][j][k].
std::vector<TensorMeta> InferScatterAdd(const std::vector<TensorMeta>& in, const Attrs& a) {
  CheckIndex(in[0], "scatter_add");
  ONEFLOW_CHECK(in[0].shape == in[1].shape, "scatter_add: index shape ", in[0].shape,
                " and source shape ", in[1].shape, " differ");
  return {{AttrShape(a, "shape"), in[1].dtype, in[1].device}};
}

std::vector<Tensor> ScatterAddCpu(const std::vector<Tensor>& in, const Attrs& a,
                                  const std::vector<TensorMeta>& out) {
  Tensor src = Contig(in[1]);
  Tensor o = Tensor::Empty(out[0]);
  fn::fill_(o, 0.0);
  int64_t dim = WrapDim(a.Get<int64_t>("dim"), o.ndim(), "scatter_add");
  Around os = Split(o.shape(), dim), ss = Split(src.shape(), dim);
  std::vector<int64_t> idx = IndexValues(in[0], os.n, "scatter_add", dim);
  DispatchAll(o.dtype(), "scatter_add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* ps = src.data<T>();
    T* po = o.data<T>();
    for (int64_t i = 0; i < ss.outer; ++i)
      for (int64_t j = 0; j < ss.n; ++j)
        for (int64_t k = 0; k < ss.inner; ++k) {
          int64_t e = (i * ss.n + j) * ss.inner + k;
          po[(i * os.n + idx[e]) * os.inner + k] += ps[e];
        }
  });
  return {o};
}

std::vector<Tensor> ScatterAddGrad(const GradCtx& c) {
  Attrs a;
  a.Set("dim", c.attrs.Get<int64_t>("dim"));
  return {Tensor(), CallOp1(OP(gather), {c.grad_outputs[0], c.inputs[0]}, a)};
}

// index_select(x, dim, index 1-D): out takes the rows index names along dim.
std::vector<TensorMeta> InferIndexSelect(const std::vector<TensorMeta>& in, const Attrs& a) {
  CheckIndex(in[1], "index_select");
  ONEFLOW_CHECK(in[1].shape.ndim() <= 1, "index_select: index must be 0-D or 1-D, got shape ",
                in[1].shape);
  std::vector<int64_t> s = in[0].shape.dims();
  if (s.empty()) return {{in[0].shape, in[0].dtype, in[0].device}};
  int64_t dim = WrapDim(a.Get<int64_t>("dim"), in[0].shape.ndim(), "index_select");
  s[dim] = in[1].shape.numel();
  return {{Shape(s), in[0].dtype, in[0].device}};
}

std::vector<Tensor> IndexSelectCpu(const std::vector<Tensor>& in, const Attrs& a,
                                   const std::vector<TensorMeta>& out) {
  Tensor x = Contig(in[0]);
  Tensor o = Tensor::Empty(out[0]);
  int64_t dim = x.ndim() ? WrapDim(a.Get<int64_t>("dim"), x.ndim(), "index_select") : 0;
  Around xs = Split(x.shape(), dim);
  std::vector<int64_t> idx = IndexValues(in[1], xs.n, "index_select", dim);
  size_t es = SizeOf(x.dtype());
  const char* px = static_cast<const char*>(x.raw_data());
  char* po = static_cast<char*>(o.raw_data());
  const int64_t k = static_cast<int64_t>(idx.size());
  for (int64_t i = 0; i < xs.outer; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      std::memcpy(po + ((i * k + j) * xs.inner) * es, px + ((i * xs.n + idx[j]) * xs.inner) * es,
                  xs.inner * es);
    }
  }
  return {o};
}

std::vector<Tensor> IndexSelectGrad(const GradCtx& c) {
  const Tensor& x = c.inputs[0];
  const Tensor& g = c.grad_outputs[0];
  if (x.ndim() == 0) return {g, Tensor()};
  // A 0-dim index of a global call came in local (a scalar joins as broadcast): place it too.
  const Tensor& index = c.inputs[1];
  Attrs a;
  a.Set("dim", WrapDim(c.attrs.Get<int64_t>("dim"), x.ndim(), "index_select"))
      .Set("shape", x.shape().dims());
  return {
      CallOp1(OP(index_select_grad), {g, index.is_global() ? index : fn::place_like(g, index)}, a),
      Tensor()};
}

// index_select_grad is linear in g: its gradient is index_select of the incoming gradient.
std::vector<Tensor> IndexSelectGradGrad(const GradCtx& c) {
  Attrs a;
  a.Set("dim", c.attrs.Get<int64_t>("dim"));
  return {CallOp1(OP(index_select), {c.grad_outputs[0], c.inputs[1]}, a), Tensor()};
}

// index_select_grad(g, index) -> dx of attr shape: dx[i][index[j]][k] += g[i][j][k], j in order.
std::vector<TensorMeta> InferIndexSelectGrad(const std::vector<TensorMeta>& in, const Attrs& a) {
  CheckIndex(in[1], "index_select_grad");
  ONEFLOW_CHECK(in[1].shape.ndim() <= 1, "index_select_grad: index must be 0-D or 1-D, got shape ",
                in[1].shape);
  const Shape x = AttrShape(a, "shape");
  ONEFLOW_CHECK(x.ndim() >= 1, "index_select_grad: expected an input shape of at least 1 dim");
  const int64_t dim = WrapDim(a.Get<int64_t>("dim"), x.ndim(), "index_select_grad");
  std::vector<int64_t> want = x.dims();
  want[dim] = in[1].shape.numel();
  ONEFLOW_CHECK(in[0].shape == Shape(want), "index_select_grad: expected a gradient of shape ",
                Shape(want), ", got ", in[0].shape);
  return {{x, in[0].dtype, in[0].device}};
}

std::vector<Tensor> IndexSelectGradCpu(const std::vector<Tensor>& in, const Attrs& a,
                                       const std::vector<TensorMeta>& out) {
  Tensor g = Contig(in[0]);
  Tensor o = Tensor::Empty(out[0]);
  fn::fill_(o, 0.0);
  const int64_t dim = WrapDim(a.Get<int64_t>("dim"), o.ndim(), "index_select_grad");
  const Around os = Split(o.shape(), dim);
  const std::vector<int64_t> idx = IndexValues(in[1], os.n, "index_select_grad", dim);
  const int64_t count = static_cast<int64_t>(idx.size());
  DispatchAll(o.dtype(), "index_select_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = g.data<T>();
    T* po = o.data<T>();
    for (int64_t i = 0; i < os.outer; ++i) {
      for (int64_t j = 0; j < count; ++j) {
        const T* src = pg + (i * count + j) * os.inner;
        T* dst = po + (i * os.n + idx[j]) * os.inner;
        for (int64_t k = 0; k < os.inner; ++k) dst[k] += src[k];
      }
    }
  });
  return {o};
}

}  // namespace

ONEFLOW_REGISTER_OP(gather)
    .Inputs(2)
    .Infer(InferGather)
    .Grad(GatherGrad)
    .NonDiffInputs({1})
    .Kernel(DeviceType::kCPU, GatherCpu);
ONEFLOW_REGISTER_OP(scatter_add)
    .Inputs(2)
    .Infer(InferScatterAdd)
    .Grad(ScatterAddGrad)
    .NonDiffInputs({0})
    .Kernel(DeviceType::kCPU, ScatterAddCpu);
ONEFLOW_REGISTER_OP(index_select)
    .Inputs(2)
    .Infer(InferIndexSelect)
    .Grad(IndexSelectGrad)
    .NonDiffInputs({1})
    .Kernel(DeviceType::kCPU, IndexSelectCpu);
ONEFLOW_REGISTER_OP(index_select_grad)
    .Inputs(2)
    .Infer(InferIndexSelectGrad)
    .Grad(IndexSelectGradGrad)
    .NonDiffInputs({1})
    .Kernel(DeviceType::kCPU, IndexSelectGradCpu);

namespace fn {

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  Attrs a;
  a.Set("dim", dim);
  return CallOp1(OP(index_select), {x, index}, a);
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  Attrs a;
  a.Set("dim", dim);
  return CallOp1(OP(gather), {x, index}, a);
}

}  // namespace fn
}  // namespace oneflow

// ---------------------------------------------------------------- tril / triu, flip, scatter
// (the everyday-API additions: kernels where a composite would be wrong or wasteful)

namespace oneflow {

namespace {

// tril/triu(x, diagonal): keep element (i, j) of each matrix of the last two dims where
// j - i <= diagonal (tril) or j - i >= diagonal (triu), zeros elsewhere.
std::vector<TensorMeta> InferTriangle(const std::vector<TensorMeta>& in, const char* op) {
  ONEFLOW_CHECK(in[0].shape.ndim() >= 2, op, ": expected a tensor with at least 2 dims, got ",
                in[0].shape.ndim(), " (shape ", in[0].shape, ")");
  return {in[0]};
}

template <bool kUpper>
std::vector<Tensor> TriangleCpu(const std::vector<Tensor>& in, const Attrs& a,
                                const std::vector<TensorMeta>& out) {
  Tensor x = Contig(in[0]);
  Tensor o = Tensor::Empty(out[0]);
  const int64_t diag = a.Get<int64_t>("diagonal");
  const int64_t rows = x.shape()[x.ndim() - 2], cols = x.shape()[x.ndim() - 1];
  const int64_t mats = rows * cols ? x.numel() / (rows * cols) : 0;
  DispatchAll(x.dtype(), kUpper ? "triu" : "tril", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    T* po = o.data<T>();
    for (int64_t m = 0; m < mats; ++m)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          const int64_t e = (m * rows + i) * cols + j;
          const bool keep = kUpper ? j - i >= diag : j - i <= diag;
          po[e] = keep ? px[e] : T(0);
        }
  });
  return {o};
}

template <bool kUpper>
std::vector<Tensor> TriangleGrad(const GradCtx& c) {
  Attrs a;
  a.Set("diagonal", c.attrs.Get<int64_t>("diagonal"));
  return {CallOp1(kUpper ? OP(triu) : OP(tril), {c.grad_outputs[0]}, a)};
}

// flip(x, dims): out[..., i, ...] = x[..., n - 1 - i, ...] along each of dims.
std::vector<TensorMeta> InferFlip(const std::vector<TensorMeta>& in, const Attrs& a) {
  const int64_t n = in[0].shape.ndim();
  std::vector<bool> seen(std::max<int64_t>(n, 1), false);  // a 0-dim tensor has dim 0
  for (int64_t d : a.Get<std::vector<int64_t>>("dims")) {
    const int64_t w = WrapDim(d, n, "flip");
    ONEFLOW_CHECK(!seen[w], "flip: dim ", w, " appears more than once in dims");
    seen[w] = true;
  }
  return {in[0]};
}

std::vector<Tensor> FlipCpu(const std::vector<Tensor>& in, const Attrs& a,
                            const std::vector<TensorMeta>& out) {
  Tensor x = Contig(in[0]);
  Tensor o = Tensor::Empty(out[0]);
  const int64_t nd = x.ndim();
  std::vector<bool> flipped(std::max<int64_t>(nd, 1), false);
  for (int64_t d : a.Get<std::vector<int64_t>>("dims")) flipped[WrapDim(d, nd, "flip")] = true;
  const std::vector<int64_t> st = x.strides();
  const size_t es = SizeOf(x.dtype());
  const char* px = static_cast<const char*>(x.raw_data());
  char* po = static_cast<char*>(o.raw_data());
  for (int64_t e = 0; e < o.numel(); ++e) {
    int64_t rest = e, src = 0;
    for (int64_t d = nd - 1; d >= 0; --d) {
      const int64_t n = x.shape()[d], c = rest % n;
      rest /= n;
      src += (flipped[d] ? n - 1 - c : c) * st[d];
    }
    std::memcpy(po + e * es, px + src * es, es);
  }
  return {o};
}

std::vector<Tensor> FlipGrad(const GradCtx& c) {
  Attrs a;
  a.Set("dims", c.attrs.Get<std::vector<int64_t>>("dims"));
  return {CallOp1(OP(flip), {c.grad_outputs[0]}, a)};
}

// scatter(x, index, src) along dim: a copy of x with out[i][index[i][j][k]][k] = src[i][j][k]
// (reduce "none"; where two elements name one place, one of them wins) or += (reduce "add").
// src has index's shape (fn::scatter cuts a larger src down); index may be smaller than x in
// the other dims, as in PyTorch.
std::vector<TensorMeta> InferScatter(const std::vector<TensorMeta>& in, const Attrs& a) {
  const std::string& reduce = a.Get<std::string>("reduce");
  ONEFLOW_CHECK(reduce == "none" || reduce == "add",
                "scatter: reduce must be 'none' or 'add', got '", reduce, "'");
  const char* op = reduce == "add" ? "scatter_add" : "scatter";
  CheckIndex(in[1], op);
  const Shape &s = in[0].shape, &is = in[1].shape;
  ONEFLOW_CHECK(in[2].shape == is, op, ": src shape ", in[2].shape, " differs from index shape ",
                is);
  ONEFLOW_CHECK(in[2].dtype == in[0].dtype, op, ": src dtype ", DTypeName(in[2].dtype),
                " differs from the input's ", DTypeName(in[0].dtype));
  ONEFLOW_CHECK(is.ndim() == s.ndim(), op, ": index has ", is.ndim(), " dims but input has ",
                s.ndim());
  const int64_t dim = s.ndim() ? WrapDim(a.Get<int64_t>("dim"), s.ndim(), op) : 0;
  for (int64_t d = 0; d < s.ndim(); ++d) {
    ONEFLOW_CHECK(d == dim || is[d] <= s[d], op, ": index shape ", is,
                  " must not exceed input shape ", s, " except in dim ", dim);
  }
  return {in[0]};
}

std::vector<Tensor> ScatterCpu(const std::vector<Tensor>& in, const Attrs& a,
                               const std::vector<TensorMeta>& out) {
  const bool add = a.Get<std::string>("reduce") == "add";
  const char* op = add ? "scatter_add" : "scatter";
  Tensor o = fn::contiguous_copy(in[0]);
  Tensor src = Contig(in[2]);
  const Shape& is = src.shape();
  const int64_t nd = o.ndim(), dim = nd ? WrapDim(a.Get<int64_t>("dim"), nd, op) : 0;
  const int64_t bound = nd ? o.shape()[dim] : 1;
  std::vector<int64_t> idx = IndexValues(in[1], bound, op, dim);
  std::vector<int64_t> ost = o.strides();
  DispatchAll(o.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* ps = src.data<T>();
    T* po = o.data<T>();
    for (int64_t e = 0; e < is.numel(); ++e) {
      int64_t rest = e, dst = 0;
      for (int64_t d = nd - 1; d >= 0; --d) {
        const int64_t c = rest % is[d];
        rest /= is[d];
        dst += (d == dim ? idx[e] : c) * ost[d];
      }
      if (add) {
        po[dst] = static_cast<T>(po[dst] + ps[e]);
      } else {
        po[dst] = ps[e];
      }
    }
  });
  return {o};
}

// x[:I, :, :K] for index sizes I, K (every dim but dim): the part of x an index names.
Tensor CutToIndex(const Tensor& x, int64_t dim, const Shape& is) {
  Tensor y = x;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    if (d != dim && is[d] < x.shape()[d]) y = fn::slice(y, d, 0, is[d]);
  }
  return y;
}

std::vector<Tensor> ScatterGrad(const GradCtx& c) {
  const Tensor& g = c.grad_outputs[0];
  const Tensor& index = c.inputs[1];
  const bool add = c.attrs.Get<std::string>("reduce") == "add";
  const int64_t nd = g.ndim();
  const int64_t dim = nd ? WrapDim(c.attrs.Get<int64_t>("dim"), nd, "scatter") : 0;
  Tensor gx, gsrc;
  if (c.needs_input_grad[0]) {
    // Overwritten places take no gradient: scatter zeros into g.
    gx = add ? g : fn::scatter(g, dim, index, fn::zeros_like(c.inputs[2]));
  }
  if (c.needs_input_grad[2]) {
    gsrc = nd ? fn::gather(CutToIndex(g, dim, index.shape()), dim, index) : g;
  }
  return {gx, Tensor(), gsrc};
}

}  // namespace

ONEFLOW_REGISTER_OP(tril)
    .Inputs(1)
    .Infer([](const std::vector<TensorMeta>& in, const Attrs&) {
      return InferTriangle(in, "tril");
    })
    .Grad(TriangleGrad<false>)
    .Kernel(DeviceType::kCPU, TriangleCpu<false>);
ONEFLOW_REGISTER_OP(triu)
    .Inputs(1)
    .Infer([](const std::vector<TensorMeta>& in, const Attrs&) {
      return InferTriangle(in, "triu");
    })
    .Grad(TriangleGrad<true>)
    .Kernel(DeviceType::kCPU, TriangleCpu<true>);
ONEFLOW_REGISTER_OP(flip).Inputs(1).Infer(InferFlip).Grad(FlipGrad).Kernel(DeviceType::kCPU,
                                                                           FlipCpu);
ONEFLOW_REGISTER_OP(scatter)
    .Inputs(3)
    .Infer(InferScatter)
    .Grad(ScatterGrad)
    .NonDiffInputs({1})
    .Kernel(DeviceType::kCPU, ScatterCpu);

namespace fn {

Tensor tril(const Tensor& x, int64_t diagonal) {
  Attrs a;
  a.Set("diagonal", diagonal);
  return CallOp1(OP(tril), {x}, a);
}

Tensor triu(const Tensor& x, int64_t diagonal) {
  Attrs a;
  a.Set("diagonal", diagonal);
  return CallOp1(OP(triu), {x}, a);
}

Tensor flip(const Tensor& x, const IntList& dims) {
  Attrs a;
  a.Set("dims", dims);
  return CallOp1(OP(flip), {x}, a);
}

namespace {
Tensor ScatterCall(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                   const char* reduce) {
  const char* op = std::string(reduce) == "add" ? "scatter_add" : "scatter";
  ONEFLOW_CHECK(index.ndim() == x.ndim(), op, ": index has ", index.ndim(), " dims but input has ",
                x.ndim());
  ONEFLOW_CHECK(src.ndim() == index.ndim(), op, ": src has ", src.ndim(), " dims but index has ",
                index.ndim());
  // Only the part of src that index covers is used (PyTorch's rule).
  Tensor s = src;
  for (int64_t d = 0; d < s.ndim(); ++d) {
    ONEFLOW_CHECK(index.shape()[d] <= s.shape()[d], op, ": index shape ", index.shape(),
                  " must not exceed src shape ", src.shape());
    if (index.shape()[d] < s.shape()[d]) s = fn::slice(s, d, 0, index.shape()[d]);
  }
  if (s.dtype() != x.dtype()) s = fn::to_dtype(s, x.dtype());
  Attrs a;
  a.Set("dim", dim).Set("reduce", std::string(reduce));
  return CallOp1(OP(scatter), {x, index, s}, a);
}
}  // namespace

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return ScatterCall(x, dim, index, src, "none");
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, double value) {
  return ScatterCall(x, dim, index, fn::full(index.shape(), value, x.dtype(), x.device()), "none");
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return ScatterCall(x, dim, index, src, "add");
}

}  // namespace fn
}  // namespace oneflow
