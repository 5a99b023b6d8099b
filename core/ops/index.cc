// Index ops: gather and scatter_add along a dim (each the other's gradient), index_select.
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
  int64_t dim = WrapDim(c.attrs.Get<int64_t>("dim"), x.ndim(), "index_select");
  // Spread the 1-D index over g's shape and scatter-add the rows back.
  std::vector<int64_t> view(x.ndim(), 1);
  view[dim] = g.shape()[dim];
  Tensor idx = fn::expand(fn::reshape(c.inputs[1], view), g.shape().dims());
  Attrs a;
  a.Set("dim", dim).Set("shape", x.shape().dims());
  return {CallOp1(OP(scatter_add), {idx, g}, a), Tensor()};
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
