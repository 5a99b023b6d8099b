// layer_norm and rms_norm over the last `normalized_ndim` dims, with their fused backwards.
//
//   layer_norm(x, weight, bias) -> (y, mean, rstd)        mean, rstd: x's leading shape
//   layer_norm_grad(dy, x, mean, rstd, weight) -> (dx, dweight, dbias)
//   rms_norm(x, weight) -> (y, rstd)                      y = x rstd weight,
//   rms_norm_grad(dy, x, rstd, weight) -> (dx, dweight)   rstd = 1 / sqrt(mean(x^2) + eps)
//
// Statistics accumulate in eight lanes of x's type per row, summed in double (the variance
// around the mean, two passes); var is the biased variance (PyTorch's). The CUDA kernels
// are in core/kernels/cuda/layer_norm.cu, the SBP rule in sbp/rules/nn.cc.
#include <algorithm>
#include <cmath>

#include "core/kernels/cpu/cpu_util.h"
#include "core/ops/op_util.h"

namespace oneflow {

namespace {

struct Rows {
  int64_t n = 1, d = 1;  // n rows of d normalized elements
};

Rows RowsOf(const Shape& x, int64_t normalized_ndim) {
  Rows r;
  for (int64_t i = 0; i < x.ndim(); ++i) (i < x.ndim() - normalized_ndim ? r.n : r.d) *= x[i];
  return r;
}

// sum of f(x[j]) over a row: eight independent lanes in x's type (vectorised), summed in double.
template <typename T, typename F>
double LaneSum(const T* x, int64_t d, F f) {
  T lane[8] = {};
  int64_t j = 0;
  for (; j + 8 <= d; j += 8) {
    for (int k = 0; k < 8; ++k) lane[k] += f(x[j + k]);
  }
  double s = 0;
  for (int k = 0; k < 8; ++k) s += lane[k];
  for (; j < d; ++j) s += f(x[j]);
  return s;
}

// sum of a[j] * b[j] over a row, in LaneSum's eight lanes.
template <typename T>
double LaneDot(const T* a, const T* b, int64_t d) {
  T lane[8] = {};
  int64_t j = 0;
  for (; j + 8 <= d; j += 8) {
    for (int k = 0; k < 8; ++k) lane[k] += a[j + k] * b[j + k];
  }
  double s = 0;
  for (int k = 0; k < 8; ++k) s += lane[k];
  for (; j < d; ++j) s += a[j] * b[j];
  return s;
}

std::vector<TensorMeta> InferLayerNorm(const std::vector<TensorMeta>& in, const Attrs& a) {
  const TensorMeta& x = in[0];
  const int64_t k = a.Get<int64_t>("normalized_ndim");
  ONEFLOW_CHECK(IsFloating(x.dtype), "layer_norm: expected a floating point input, got ",
                DTypeName(x.dtype));
  ONEFLOW_CHECK(k >= 1 && k <= x.shape.ndim(), "layer_norm: normalized_shape has ", k,
                " dims but the input has shape ", x.shape);
  std::vector<int64_t> lead(x.shape.dims().begin(), x.shape.dims().end() - k);
  std::vector<int64_t> norm(x.shape.dims().end() - k, x.shape.dims().end());
  for (int i = 1; i <= 2; ++i) {
    ONEFLOW_CHECK(in[i].shape == Shape(norm), "layer_norm: expected ", i == 1 ? "weight" : "bias",
                  " of shape ", Shape(norm), " (normalized_shape) for input of shape ", x.shape,
                  ", got ", in[i].shape);
    ONEFLOW_CHECK(in[i].dtype == x.dtype, "layer_norm: ", i == 1 ? "weight" : "bias", " dtype ",
                  DTypeName(in[i].dtype), " differs from the input's ", DTypeName(x.dtype));
  }
  TensorMeta stats{Shape(lead), x.dtype, x.device};
  return {x, stats, stats};
}

std::vector<Tensor> LayerNormCpu(const std::vector<Tensor>& in, const Attrs& a,
                                 const std::vector<TensorMeta>& out) {
  Tensor x = Contig(in[0]), w = Contig(in[1]), b = Contig(in[2]);
  Tensor y = Tensor::Empty(out[0]), mean = Tensor::Empty(out[1]), rstd = Tensor::Empty(out[2]);
  const Rows r = RowsOf(x.shape(), a.Get<int64_t>("normalized_ndim"));
  const double eps = a.Get<double>("eps");
  DispatchFloating(x.dtype(), "layer_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    const T* pw = w.data<T>();
    const T* pb = b.data<T>();
    T* py = y.data<T>();
    for (int64_t i = 0; i < r.n; ++i) {
      const T* xr = px + i * r.d;
      const double m = LaneSum(xr, r.d, [](T v) { return v; }) / r.d;
      const T tm0 = static_cast<T>(m);
      const double v = LaneSum(xr, r.d, [tm0](T e) { return (e - tm0) * (e - tm0); });
      const double rs = 1.0 / std::sqrt(v / r.d + eps);
      mean.data<T>()[i] = static_cast<T>(m);
      rstd.data<T>()[i] = static_cast<T>(rs);
      const T tm = static_cast<T>(m), trs = static_cast<T>(rs);
      T* yr = py + i * r.d;
      for (int64_t j = 0; j < r.d; ++j) yr[j] = (xr[j] - tm) * trs * pw[j] + pb[j];
    }
  });
  return {y, mean, rstd};
}

std::vector<TensorMeta> InferLayerNormGrad(const std::vector<TensorMeta>& in, const Attrs&) {
  return {in[1], in[4], in[4]};
}

// xhat = (x - mean) rstd, g = dy w: dx = rstd (g - mean(g) - xhat mean(g xhat)),
// dweight = sum over rows of dy xhat, dbias = sum over rows of dy.
std::vector<Tensor> LayerNormGradCpu(const std::vector<Tensor>& in, const Attrs& a,
                                     const std::vector<TensorMeta>& out) {
  Tensor dy = Contig(in[0]), x = Contig(in[1]), mean = Contig(in[2]), rstd = Contig(in[3]),
         w = Contig(in[4]);
  Tensor dx = Tensor::Empty(out[0]), dw = Tensor::Empty(out[1]), db = Tensor::Empty(out[2]);
  const Rows r = RowsOf(x.shape(), a.Get<int64_t>("normalized_ndim"));
  DispatchFloating(x.dtype(), "layer_norm backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pdy = dy.data<T>();
    const T* px = x.data<T>();
    const T* __restrict pw = w.data<T>();
    const T* pmean = mean.data<T>();
    const T* prstd = rstd.data<T>();
    T* pdx = dx.data<T>();
    // Column sums in x's type over the rows (every column its own accumulator: vectorised);
    // the row sums in eight lanes (LaneSum's scheme), so no loop carries one serial sum.
    std::vector<T> sw_buf(r.d, T(0)), sb_buf(r.d, T(0)), xhat_buf(r.d), g_buf(r.d);
    T* __restrict sw = sw_buf.data();
    T* __restrict sb = sb_buf.data();
    T* __restrict xhat = xhat_buf.data();
    T* __restrict g = g_buf.data();
    for (int64_t i = 0; i < r.n; ++i) {
      const T* __restrict dyr = pdy + i * r.d;
      const T* __restrict xr = px + i * r.d;
      const T m = pmean[i], rs = prstd[i];
      // Each loop one simple pass the compiler vectorises; the row is in L1 throughout.
      for (int64_t j = 0; j < r.d; ++j) {
        xhat[j] = (xr[j] - m) * rs;
        g[j] = dyr[j] * pw[j];
      }
      const double sg = LaneSum(g, r.d, [](T v) { return v; });
      const double sgx = LaneDot(g, xhat, r.d);
      for (int64_t j = 0; j < r.d; ++j) {
        sw[j] += dyr[j] * xhat[j];
        sb[j] += dyr[j];
      }
      const T mg = static_cast<T>(sg / r.d), mgx = static_cast<T>(sgx / r.d);
      T* __restrict dxr = pdx + i * r.d;
      for (int64_t j = 0; j < r.d; ++j) dxr[j] = rs * (g[j] - mg - xhat[j] * mgx);
    }
    std::copy(sw_buf.begin(), sw_buf.end(), dw.data<T>());
    std::copy(sb_buf.begin(), sb_buf.end(), db.data<T>());
  });
  return {dx, dw, db};
}

std::vector<Tensor> LayerNormGrad(const GradCtx& c) {
  auto g =
      CallOp(OP(layer_norm_grad),
             {c.grad_outputs[0], c.inputs[0], c.outputs[1], c.outputs[2], c.inputs[1]}, c.attrs);
  return {c.needs_input_grad[0] ? g[0] : Tensor(), c.needs_input_grad[1] ? g[1] : Tensor(),
          c.needs_input_grad[2] ? g[2] : Tensor()};
}

// ---- rms_norm(x, weight) -> (y, rstd); rms_norm_grad(dy, x, rstd, weight) -> (dx, dweight)

std::vector<TensorMeta> InferRmsNorm(const std::vector<TensorMeta>& in, const Attrs& a) {
  const TensorMeta& x = in[0];
  const int64_t k = a.Get<int64_t>("normalized_ndim");
  ONEFLOW_CHECK(IsFloating(x.dtype), "rms_norm: expected a floating point input, got ",
                DTypeName(x.dtype));
  ONEFLOW_CHECK(k >= 1 && k <= x.shape.ndim(), "rms_norm: normalized_shape has ", k,
                " dims but the input has shape ", x.shape);
  std::vector<int64_t> lead(x.shape.dims().begin(), x.shape.dims().end() - k);
  std::vector<int64_t> norm(x.shape.dims().end() - k, x.shape.dims().end());
  ONEFLOW_CHECK(in[1].shape == Shape(norm), "rms_norm: expected weight of shape ", Shape(norm),
                " (normalized_shape) for input of shape ", x.shape, ", got ", in[1].shape);
  ONEFLOW_CHECK(in[1].dtype == x.dtype, "rms_norm: weight dtype ", DTypeName(in[1].dtype),
                " differs from the input's ", DTypeName(x.dtype));
  return {x, TensorMeta{Shape(lead), x.dtype, x.device}};
}

std::vector<Tensor> RmsNormCpu(const std::vector<Tensor>& in, const Attrs& a,
                               const std::vector<TensorMeta>& out) {
  Tensor x = Contig(in[0]), w = Contig(in[1]);
  Tensor y = Tensor::Empty(out[0]), rstd = Tensor::Empty(out[1]);
  const Rows r = RowsOf(x.shape(), a.Get<int64_t>("normalized_ndim"));
  const double eps = a.Get<double>("eps");
  DispatchFloating(x.dtype(), "rms_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    const T* pw = w.data<T>();
    T* py = y.data<T>();
    for (int64_t i = 0; i < r.n; ++i) {
      const T* xr = px + i * r.d;
      const double ms = LaneSum(xr, r.d, [](T e) { return e * e; }) / r.d;
      const T trs = static_cast<T>(1.0 / std::sqrt(ms + eps));
      rstd.data<T>()[i] = trs;
      T* yr = py + i * r.d;
      for (int64_t j = 0; j < r.d; ++j) yr[j] = xr[j] * trs * pw[j];
    }
  });
  return {y, rstd};
}

std::vector<TensorMeta> InferRmsNormGrad(const std::vector<TensorMeta>& in, const Attrs&) {
  return {in[1], in[3]};
}

// xhat = x rstd, g = dy w: dx = rstd (g - xhat mean(g xhat)), dweight = sum over rows of dy xhat.
std::vector<Tensor> RmsNormGradCpu(const std::vector<Tensor>& in, const Attrs& a,
                                   const std::vector<TensorMeta>& out) {
  Tensor dy = Contig(in[0]), x = Contig(in[1]), rstd = Contig(in[2]), w = Contig(in[3]);
  Tensor dx = Tensor::Empty(out[0]), dw = Tensor::Empty(out[1]);
  const Rows r = RowsOf(x.shape(), a.Get<int64_t>("normalized_ndim"));
  DispatchFloating(x.dtype(), "rms_norm backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pdy = dy.data<T>();
    const T* px = x.data<T>();
    const T* pw = w.data<T>();
    const T* prstd = rstd.data<T>();
    T* pdx = dx.data<T>();
    std::vector<T> sw(r.d, T(0)), xhat(r.d), g(r.d);
    for (int64_t i = 0; i < r.n; ++i) {
      const T* dyr = pdy + i * r.d;
      const T* xr = px + i * r.d;
      const T rs = prstd[i];
      for (int64_t j = 0; j < r.d; ++j) {
        xhat[j] = xr[j] * rs;
        g[j] = dyr[j] * pw[j];
        sw[j] += dyr[j] * xhat[j];
      }
      const T mgx = static_cast<T>(LaneDot(g.data(), xhat.data(), r.d) / r.d);
      T* dxr = pdx + i * r.d;
      for (int64_t j = 0; j < r.d; ++j) dxr[j] = rs * (g[j] - xhat[j] * mgx);
    }
    std::copy(sw.begin(), sw.end(), dw.data<T>());
  });
  return {dx, dw};
}

std::vector<Tensor> RmsNormGrad(const GradCtx& c) {
  auto g = CallOp(OP(rms_norm_grad), {c.grad_outputs[0], c.inputs[0], c.outputs[1], c.inputs[1]},
                  c.attrs);
  return {c.needs_input_grad[0] ? g[0] : Tensor(), c.needs_input_grad[1] ? g[1] : Tensor()};
}

}  // namespace

ONEFLOW_REGISTER_OP(layer_norm)
    .Inputs(3)
    .Infer(InferLayerNorm)
    .Grad(LayerNormGrad)
    .Kernel(DeviceType::kCPU, LayerNormCpu);
ONEFLOW_REGISTER_OP(layer_norm_grad)
    .Inputs(5)
    .Infer(InferLayerNormGrad)
    .Grad(NoDoubleBackward)
    .Kernel(DeviceType::kCPU, LayerNormGradCpu);
ONEFLOW_REGISTER_OP(rms_norm)
    .Inputs(2)
    .Infer(InferRmsNorm)
    .Grad(RmsNormGrad)
    .Kernel(DeviceType::kCPU, RmsNormCpu);
ONEFLOW_REGISTER_OP(rms_norm_grad)
    .Inputs(4)
    .Infer(InferRmsNormGrad)
    .Grad(NoDoubleBackward)
    .Kernel(DeviceType::kCPU, RmsNormGradCpu);

namespace fn {

Tensor layer_norm(const Tensor& x, const IntList& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  ONEFLOW_CHECK(k >= 1 && k <= x.ndim(), "layer_norm: normalized_shape ", Shape(normalized_shape),
                " does not fit an input of shape ", x.shape());
  for (int64_t i = 0; i < k; ++i) {
    ONEFLOW_CHECK(x.shape()[x.ndim() - k + i] == normalized_shape[i], "layer_norm: input of shape ",
                  x.shape(), " does not end with normalized_shape ", Shape(normalized_shape));
  }
  // A missing weight is ones, a missing bias zeros, made like the other (global when it is).
  Tensor w = weight, b = bias;
  if (!w.defined() && b.defined()) w = ones_like(b);
  if (!b.defined() && w.defined()) b = zeros_like(w);
  if (!w.defined()) {
    w = constant_like(x, Shape(normalized_shape), 1.0, x.dtype());
    b = constant_like(x, Shape(normalized_shape), 0.0, x.dtype());
  }
  Attrs a;
  a.Set("normalized_ndim", k).Set("eps", eps);
  return CallOp(OP(layer_norm), {x, w, b}, a)[0];
}

Tensor rms_norm(const Tensor& x, const IntList& normalized_shape, const Tensor& weight,
                double eps) {
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  ONEFLOW_CHECK(k >= 1 && k <= x.ndim(), "rms_norm: normalized_shape ", Shape(normalized_shape),
                " does not fit an input of shape ", x.shape());
  for (int64_t i = 0; i < k; ++i) {
    ONEFLOW_CHECK(x.shape()[x.ndim() - k + i] == normalized_shape[i], "rms_norm: input of shape ",
                  x.shape(), " does not end with normalized_shape ", Shape(normalized_shape));
  }
  // A missing weight is ones, made like x (global when it is).
  Tensor w = weight.defined() ? weight : constant_like(x, Shape(normalized_shape), 1.0, x.dtype());
  Attrs a;
  a.Set("normalized_ndim", k).Set("eps", eps);
  return CallOp(OP(rms_norm), {x, w}, a)[0];
}

}  // namespace fn
}  // namespace oneflow
