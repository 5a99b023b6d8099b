// 2-d pooling over NCHW input: max_pool2d (which also returns the argmax of each window, flat
// in the H * W plane as PyTorch does, for its backward), avg_pool2d and adaptive_avg_pool2d,
// each with a backward op that takes the input shape as an attribute.

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "core/kernels/cpu/cpu_util.h"
#include "core/ops/nn/geometry.h"
#include "core/ops/nn/nn.h"
#include "core/ops/nn/nn_util.h"
#include "core/ops/op_util.h"

namespace oneflow {

namespace {

using nn_util::CheckPoolInput;
using nn_util::HwAttr;
using nn_util::MakePoolGeom;
using nn_util::PoolGeom;

// The attributes of a backward op: the forward's plus the input shape it produced dx for.
Attrs WithInputShape(const Attrs& attrs, const Tensor& x) {
  Attrs a = attrs;
  a.Set("input_shape", x.shape().dims());
  return a;
}

void CheckGradOutput(const TensorMeta& dy, const Shape& want, const char* op) {
  if (dy.shape != want) {
    throw Error(StrCat(op, ": expected output gradient of shape ", want, ", got ", dy.shape));
  }
}

// ---- max_pool2d(x) -> (y, indices) ----

// The common 2x2, stride 2, unpadded, undilated case with every window inside the input: same
// visiting order and NaN rule as the general loop below, without its bounds checks.
template <typename T>
void MaxPool2x2Forward(const PoolGeom& g, const T* x, T* y, int64_t* idx) {
  for (int64_t p = 0; p < g.planes; ++p) {
    const T* xp = x + p * g.h * g.w;
    T* yp = y + p * g.oh * g.ow;
    int64_t* ip = idx + p * g.oh * g.ow;
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      const int64_t base = 2 * oh * g.w;
      const T* r0 = xp + base;
      const T* r1 = r0 + g.w;
      T* yr = yp + oh * g.ow;
      int64_t* ir = ip + oh * g.ow;
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        const int64_t c = 2 * ow;
        T best = r0[c];
        int64_t bi = base + c;
        T v = r0[c + 1];
        if (v > best || v != v) best = v, bi = base + c + 1;
        v = r1[c];
        if (v > best || v != v) best = v, bi = base + g.w + c;
        v = r1[c + 1];
        if (v > best || v != v) best = v, bi = base + g.w + c + 1;
        yr[ow] = best;
        ir[ow] = bi;
      }
    }
  }
}

template <typename T>
void MaxPoolForward(const PoolGeom& g, const T* x, T* y, int64_t* idx) {
  if (g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0 && g.dh == 1 &&
      g.dw == 1 && 2 * g.oh <= g.h && 2 * g.ow <= g.w) {
    return MaxPool2x2Forward(g, x, y, idx);
  }
  for (int64_t p = 0; p < g.planes; ++p) {
    const T* xp = x + p * g.h * g.w;
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        T best = -std::numeric_limits<T>::infinity();
        int64_t best_idx;
        nn_util::MaxOverWindow(
            g, xp, oh, ow, [](T v) { return v; }, &best, &best_idx);
        const int64_t o = (p * g.oh + oh) * g.ow + ow;
        y[o] = best;
        idx[o] = best_idx;
      }
    }
  }
}

std::vector<TensorMeta> InferMaxPool2d(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  CheckPoolInput(in[0].shape, in[0].dtype, "max_pool2d");
  PoolGeom g = MakePoolGeom(in[0].shape, attrs, "max_pool2d");
  Shape out({in[0].shape[0], in[0].shape[1], g.oh, g.ow});
  return {{out, in[0].dtype, in[0].device}, {out, DType::kInt64, in[0].device}};
}

std::vector<Tensor> MaxPool2dCpu(const std::vector<Tensor>& in, const Attrs& attrs,
                                 const std::vector<TensorMeta>& out) {
  Tensor x = Contig(in[0]);
  PoolGeom g = MakePoolGeom(x.shape(), attrs, "max_pool2d");
  Tensor y = Tensor::Empty(out[0]), idx = Tensor::Empty(out[1]);
  DispatchFloating(x.dtype(), "max_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    MaxPoolForward<T>(g, x.data<T>(), y.data<T>(), idx.data<int64_t>());
  });
  return {y, idx};
}

// A pooling gradient dx, tied to the pooled input x with a zero derivative while a graph of the
// gradient is built (create_graph=True). The pooling gradients are piecewise constant in x (max
// pooling routes dy through fixed argmax indices, average pooling ignores x), so d(dx)/dx = 0;
// PyTorch and OneFlow, whose pooling backward ops read x, answer autograd.grad(dx, x) with
// zeros, where x untied would be "not used to compute the outputs". The tie adds
// where(false, sum(x), 0): exactly 0 whatever x holds (inf and NaN included).
Tensor TiedToInput(const Tensor& dx, const Tensor& x) {
  if (!GradModeEnabled() || !x.requires_grad()) return dx;
  Tensor s = fn::sum(x);
  Tensor no = fn::constant_like(s, Shape({}), 0.0, DType::kBool);
  return fn::add(dx, fn::where(no, s, fn::constant_like(s, Shape({}), 0.0, s.dtype())));
}

std::vector<Tensor> MaxPool2dGrad(const GradCtx& ctx) {
  return {TiedToInput(CallOp1(OP(max_pool2d_grad), {ctx.grad_outputs[0], ctx.outputs[1]},
                              WithInputShape(ctx.attrs, ctx.inputs[0])),
                      ctx.inputs[0])};
}

// ---- max_pool2d_grad(dy, indices), attr input_shape: routes dy to each window's argmax ----

std::vector<TensorMeta> InferMaxPool2dGrad(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  Shape x = AttrShape(attrs, "input_shape");
  CheckPoolInput(x, in[0].dtype, "max_pool2d_grad");
  CheckGradOutput(in[1], in[0].shape, "max_pool2d_grad");
  return {{x, in[0].dtype, in[0].device}};
}

std::vector<Tensor> MaxPool2dGradCpu(const std::vector<Tensor>& in, const Attrs&,
                                     const std::vector<TensorMeta>& out) {
  Tensor dy = Contig(in[0]), idx = Contig(in[1]);
  Tensor dx = Tensor::Empty(out[0]);
  const Shape& xs = out[0].shape;
  const int64_t planes = xs[0] * xs[1], in_plane = xs[2] * xs[3];
  const int64_t out_plane = dy.shape()[2] * dy.shape()[3];
  DispatchFloating(dy.dtype(), "max_pool2d_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dxp = dx.data<T>();
    const T* dyp = dy.data<T>();
    const int64_t* ip = idx.data<int64_t>();
    std::fill(dxp, dxp + dx.numel(), T(0));
    for (int64_t p = 0; p < planes; ++p) {
      for (int64_t o = 0; o < out_plane; ++o) {
        const int64_t i = ip[p * out_plane + o];
        if (i >= 0) dxp[p * in_plane + i] += dyp[p * out_plane + o];
      }
    }
  });
  return {dx};
}

// ---- avg_pool2d ----

// Calls f(offset in the plane, 1 / divisor) for every input pixel of output (oh, ow)'s window.
// As in PyTorch, count_include_pad counts the padding but not the overhang of ceil_mode.
template <typename T, typename F>
void ForEachAvgWindowPixel(const PoolGeom& g, int64_t oh, int64_t ow, F&& f) {
  int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
  int64_t h1 = std::min(h0 + g.kh, g.h + g.ph), w1 = std::min(w0 + g.kw, g.w + g.pw);
  const int64_t padded_count = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, g.h), w1 = std::min(w1, g.w);
  const int64_t count = g.count_include_pad ? padded_count : (h1 - h0) * (w1 - w0);
  if (count == 0) return;
  const T scale = T(1) / T(count);
  for (int64_t ih = h0; ih < h1; ++ih) {
    for (int64_t iw = w0; iw < w1; ++iw) f(ih * g.w + iw, scale);
  }
}

std::vector<TensorMeta> InferAvgPool2d(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  CheckPoolInput(in[0].shape, in[0].dtype, "avg_pool2d");
  PoolGeom g = MakePoolGeom(in[0].shape, attrs, "avg_pool2d");
  return {{Shape({in[0].shape[0], in[0].shape[1], g.oh, g.ow}), in[0].dtype, in[0].device}};
}

std::vector<Tensor> AvgPool2dCpu(const std::vector<Tensor>& in, const Attrs& attrs,
                                 const std::vector<TensorMeta>& out) {
  Tensor x = Contig(in[0]);
  PoolGeom g = MakePoolGeom(x.shape(), attrs, "avg_pool2d");
  Tensor y = Tensor::Empty(out[0]);
  DispatchFloating(x.dtype(), "avg_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xd = x.data<T>();
    T* yd = y.data<T>();
    for (int64_t p = 0; p < g.planes; ++p) {
      const T* xp = xd + p * g.h * g.w;
      for (int64_t oh = 0; oh < g.oh; ++oh) {
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          T acc = 0;
          ForEachAvgWindowPixel<T>(g, oh, ow, [&](int64_t i, T scale) { acc += xp[i] * scale; });
          yd[(p * g.oh + oh) * g.ow + ow] = acc;
        }
      }
    }
  });
  return {y};
}

std::vector<Tensor> AvgPool2dGrad(const GradCtx& ctx) {
  return {TiedToInput(
      CallOp1(OP(avg_pool2d_grad), {ctx.grad_outputs[0]}, WithInputShape(ctx.attrs, ctx.inputs[0])),
      ctx.inputs[0])};
}

std::vector<TensorMeta> InferAvgPool2dGrad(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  Shape x = AttrShape(attrs, "input_shape");
  CheckPoolInput(x, in[0].dtype, "avg_pool2d_grad");
  PoolGeom g = MakePoolGeom(x, attrs, "avg_pool2d_grad");
  CheckGradOutput(in[0], Shape({x[0], x[1], g.oh, g.ow}), "avg_pool2d_grad");
  return {{x, in[0].dtype, in[0].device}};
}

std::vector<Tensor> AvgPool2dGradCpu(const std::vector<Tensor>& in, const Attrs& attrs,
                                     const std::vector<TensorMeta>& out) {
  Tensor dy = Contig(in[0]);
  PoolGeom g = MakePoolGeom(out[0].shape, attrs, "avg_pool2d_grad");
  Tensor dx = Tensor::Empty(out[0]);
  DispatchFloating(dy.dtype(), "avg_pool2d_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* dyd = dy.data<T>();
    T* dxd = dx.data<T>();
    std::fill(dxd, dxd + dx.numel(), T(0));
    for (int64_t p = 0; p < g.planes; ++p) {
      T* dxp = dxd + p * g.h * g.w;
      for (int64_t oh = 0; oh < g.oh; ++oh) {
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          const T d = dyd[(p * g.oh + oh) * g.ow + ow];
          ForEachAvgWindowPixel<T>(g, oh, ow, [&](int64_t i, T scale) { dxp[i] += d * scale; });
        }
      }
    }
  });
  return {dx};
}

// ---- adaptive_avg_pool2d, attr output_size ----

// Output cell o of `out` covers input rows [floor(o * in / out), ceil((o + 1) * in / out)).
int64_t AdaptiveStart(int64_t o, int64_t in, int64_t out) { return o * in / out; }
int64_t AdaptiveEnd(int64_t o, int64_t in, int64_t out) { return ((o + 1) * in + out - 1) / out; }

// Calls f(input plane offset, 1 / window size) for every pixel of output (oh, ow)'s window.
template <typename T, typename F>
void ForEachAdaptiveWindowPixel(const Shape& x, const Shape& y, int64_t oh, int64_t ow, F&& f) {
  const int64_t h0 = AdaptiveStart(oh, x[2], y[2]), h1 = AdaptiveEnd(oh, x[2], y[2]);
  const int64_t w0 = AdaptiveStart(ow, x[3], y[3]), w1 = AdaptiveEnd(ow, x[3], y[3]);
  const T scale = T(1) / T((h1 - h0) * (w1 - w0));
  for (int64_t ih = h0; ih < h1; ++ih) {
    for (int64_t iw = w0; iw < w1; ++iw) f(ih * x[3] + iw, scale);
  }
}

Shape AdaptiveOutputShape(const Shape& x, const Attrs& attrs, const char* op) {
  auto size = nn_util::HwPair(attrs.Get<std::vector<int64_t>>("output_size"), op, "output_size");
  if (size[0] < 1 || size[1] < 1) {
    throw Error(StrCat(op, ": expected output_size of at least 1, got ", Shape(size)));
  }
  // An empty input plane would give windows of no pixels.
  if (x[2] < 1 || x[3] < 1) {
    throw Error(StrCat(op, ": expected an input with non-empty H and W, got ", x));
  }
  return Shape({x[0], x[1], size[0], size[1]});
}

std::vector<TensorMeta> InferAdaptiveAvgPool2d(const std::vector<TensorMeta>& in,
                                               const Attrs& attrs) {
  CheckPoolInput(in[0].shape, in[0].dtype, "adaptive_avg_pool2d");
  return {
      {AdaptiveOutputShape(in[0].shape, attrs, "adaptive_avg_pool2d"), in[0].dtype, in[0].device}};
}

std::vector<Tensor> AdaptiveAvgPool2dCpu(const std::vector<Tensor>& in, const Attrs&,
                                         const std::vector<TensorMeta>& out) {
  Tensor x = Contig(in[0]);
  Tensor y = Tensor::Empty(out[0]);
  const Shape &xs = x.shape(), &ys = out[0].shape;
  DispatchFloating(x.dtype(), "adaptive_avg_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xd = x.data<T>();
    T* yd = y.data<T>();
    for (int64_t p = 0; p < xs[0] * xs[1]; ++p) {
      const T* xp = xd + p * xs[2] * xs[3];
      for (int64_t oh = 0; oh < ys[2]; ++oh) {
        for (int64_t ow = 0; ow < ys[3]; ++ow) {
          T acc = 0;
          ForEachAdaptiveWindowPixel<T>(xs, ys, oh, ow,
                                        [&](int64_t i, T scale) { acc += xp[i] * scale; });
          yd[(p * ys[2] + oh) * ys[3] + ow] = acc;
        }
      }
    }
  });
  return {y};
}

std::vector<Tensor> AdaptiveAvgPool2dGrad(const GradCtx& ctx) {
  return {TiedToInput(CallOp1(OP(adaptive_avg_pool2d_grad), {ctx.grad_outputs[0]},
                              WithInputShape(ctx.attrs, ctx.inputs[0])),
                      ctx.inputs[0])};
}

std::vector<TensorMeta> InferAdaptiveAvgPool2dGrad(const std::vector<TensorMeta>& in,
                                                   const Attrs& attrs) {
  Shape x = AttrShape(attrs, "input_shape");
  CheckPoolInput(x, in[0].dtype, "adaptive_avg_pool2d_grad");
  CheckGradOutput(in[0], AdaptiveOutputShape(x, attrs, "adaptive_avg_pool2d_grad"),
                  "adaptive_avg_pool2d_grad");
  return {{x, in[0].dtype, in[0].device}};
}

std::vector<Tensor> AdaptiveAvgPool2dGradCpu(const std::vector<Tensor>& in, const Attrs&,
                                             const std::vector<TensorMeta>& out) {
  Tensor dy = Contig(in[0]);
  Tensor dx = Tensor::Empty(out[0]);
  const Shape &xs = out[0].shape, &ys = dy.shape();
  DispatchFloating(dy.dtype(), "adaptive_avg_pool2d_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* dyd = dy.data<T>();
    T* dxd = dx.data<T>();
    std::fill(dxd, dxd + dx.numel(), T(0));
    for (int64_t p = 0; p < xs[0] * xs[1]; ++p) {
      T* dxp = dxd + p * xs[2] * xs[3];
      for (int64_t oh = 0; oh < ys[2]; ++oh) {
        for (int64_t ow = 0; ow < ys[3]; ++ow) {
          const T d = dyd[(p * ys[2] + oh) * ys[3] + ow];
          ForEachAdaptiveWindowPixel<T>(xs, ys, oh, ow,
                                        [&](int64_t i, T scale) { dxp[i] += d * scale; });
        }
      }
    }
  });
  return {dx};
}

// The pooling gradient ops are linear in dy (max pooling's routes through fixed indices), so
// their own gradient (second derivatives) is, for an incoming g shaped like x, the forward
// pooling of g: g at each window's argmax, the average of g's window, its adaptive average.
std::vector<Tensor> MaxPool2dGradGrad(const GradCtx& ctx) {
  const Tensor& g = ctx.grad_outputs[0];
  const Tensor& dy = ctx.inputs[0];
  const Tensor& indices = ctx.inputs[1];
  const Shape& xs = g.shape();
  const int64_t planes = xs[0] * xs[1];
  Tensor flat = fn::reshape(g, {planes, xs[2] * xs[3]});
  Tensor picked = fn::gather(flat, 1, fn::reshape(indices, {planes, dy.numel() / planes}));
  return {fn::reshape(picked, dy.shape().dims()), Tensor()};
}

std::vector<Tensor> AvgPool2dGradGrad(const GradCtx& ctx) {
  return {CallOp1(OP(avg_pool2d), {ctx.grad_outputs[0]}, ctx.attrs)};
}

std::vector<Tensor> AdaptiveAvgPool2dGradGrad(const GradCtx& ctx) {
  return {CallOp1(OP(adaptive_avg_pool2d), {ctx.grad_outputs[0]}, ctx.attrs)};
}

// Pooling arguments as attributes; an empty stride means the kernel size, as in PyTorch.
Attrs WindowAttrs(const char* op, const fn::IntList& kernel, const fn::IntList& stride,
                  const fn::IntList& padding, bool ceil_mode) {
  Attrs a;
  a.Set("kernel", nn_util::HwPair(kernel, op, "kernel"))
      .Set("stride", nn_util::HwPair(stride.empty() ? kernel : stride, op, "stride"))
      .Set("padding", nn_util::HwPair(padding, op, "padding"))
      .Set("ceil_mode", AttrValue(ceil_mode));
  return a;
}

}  // namespace

ONEFLOW_REGISTER_OP(max_pool2d).Inputs(1).Infer(InferMaxPool2d).Grad(MaxPool2dGrad);
ONEFLOW_REGISTER_KERNEL(max_pool2d, kCPU, MaxPool2dCpu);
ONEFLOW_REGISTER_OP(max_pool2d_grad)
    .Inputs(2)
    .Infer(InferMaxPool2dGrad)
    .NonDiffInputs({1})
    .Grad(MaxPool2dGradGrad);
ONEFLOW_REGISTER_KERNEL(max_pool2d_grad, kCPU, MaxPool2dGradCpu);

ONEFLOW_REGISTER_OP(avg_pool2d).Inputs(1).Infer(InferAvgPool2d).Grad(AvgPool2dGrad);
ONEFLOW_REGISTER_KERNEL(avg_pool2d, kCPU, AvgPool2dCpu);
ONEFLOW_REGISTER_OP(avg_pool2d_grad).Inputs(1).Infer(InferAvgPool2dGrad).Grad(AvgPool2dGradGrad);
ONEFLOW_REGISTER_KERNEL(avg_pool2d_grad, kCPU, AvgPool2dGradCpu);

ONEFLOW_REGISTER_OP(adaptive_avg_pool2d)
    .Inputs(1)
    .Infer(InferAdaptiveAvgPool2d)
    .Grad(AdaptiveAvgPool2dGrad);
ONEFLOW_REGISTER_KERNEL(adaptive_avg_pool2d, kCPU, AdaptiveAvgPool2dCpu);
ONEFLOW_REGISTER_OP(adaptive_avg_pool2d_grad)
    .Inputs(1)
    .Infer(InferAdaptiveAvgPool2dGrad)
    .Grad(AdaptiveAvgPool2dGradGrad);
ONEFLOW_REGISTER_KERNEL(adaptive_avg_pool2d_grad, kCPU, AdaptiveAvgPool2dGradCpu);

namespace fn {

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const IntList& kernel,
                                                  const IntList& stride, const IntList& padding,
                                                  const IntList& dilation, bool ceil_mode) {
  Attrs a = WindowAttrs("max_pool2d", kernel, stride, padding, ceil_mode);
  a.Set("dilation", nn_util::HwPair(dilation, "max_pool2d", "dilation"));
  if (x.ndim() == 3) {
    std::vector<Tensor> out = CallOp(OP(max_pool2d), {fn::unsqueeze(x, 0)}, a);
    return {fn::squeeze(out[0], 0), fn::squeeze(out[1], 0)};
  }
  std::vector<Tensor> out = CallOp(OP(max_pool2d), {x}, a);
  return {out[0], out[1]};
}

Tensor max_pool2d(const Tensor& x, const IntList& kernel, const IntList& stride,
                  const IntList& padding, const IntList& dilation, bool ceil_mode) {
  return max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil_mode).first;
}

Tensor avg_pool2d(const Tensor& x, const IntList& kernel, const IntList& stride,
                  const IntList& padding, bool ceil_mode, bool count_include_pad) {
  Attrs a = WindowAttrs("avg_pool2d", kernel, stride, padding, ceil_mode);
  a.Set("count_include_pad", AttrValue(count_include_pad));
  return nn_util::WithBatchDim(x,
                               [&](const Tensor& xb) { return CallOp1(OP(avg_pool2d), {xb}, a); });
}

Tensor adaptive_avg_pool2d(const Tensor& x, const IntList& output_size) {
  Attrs a;
  a.Set("output_size", nn_util::HwPair(output_size, "adaptive_avg_pool2d", "output_size"));
  return nn_util::WithBatchDim(
      x, [&](const Tensor& xb) { return CallOp1(OP(adaptive_avg_pool2d), {xb}, a); });
}

}  // namespace fn
}  // namespace oneflow
