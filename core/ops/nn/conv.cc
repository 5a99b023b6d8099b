// conv2d (NCHW, weight (O, C / groups, kh, kw), optional bias) and its two backward ops:
// inference, gradients and the CPU kernels, which run the backends of core/kernels/cpu/conv.h
// (oneDNN, depthwise loops, im2col + gemm); the CUDA kernels are core/kernels/cuda/conv.cu.

#include "core/kernels/cpu/conv.h"

#include <vector>

#include "core/kernels/cpu/cpu_util.h"
#include "core/ops/nn/geometry.h"
#include "core/ops/nn/nn_util.h"
#include "core/ops/op_util.h"

namespace oneflow {

namespace {

using nn_util::ConvGeom;
using nn_util::HwAttr;
using nn_util::MakeConvGeom;

void CheckSameDtype(const TensorMeta& x, const TensorMeta& t, const char* op, const char* what) {
  if (t.dtype != x.dtype) {
    throw Error(StrCat(op, ": expected ", what, " of dtype ", DTypeName(x.dtype),
                       " like the input, got ", DTypeName(t.dtype)));
  }
}

void CheckFloating(const TensorMeta& x, const char* op) {
  if (!IsFloating(x.dtype)) {
    throw Error(StrCat(op, ": expected a floating point input, got ", DTypeName(x.dtype)));
  }
}

// ---- conv2d: inputs (x, weight) or (x, weight, bias) ----

std::vector<TensorMeta> InferConv2d(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  if (in.size() != 2 && in.size() != 3) {
    throw Error(
        StrCat("conv2d: expected 2 or 3 tensor inputs (input, weight[, bias]), got ", in.size()));
  }
  const TensorMeta& x = in[0];
  CheckFloating(x, "conv2d");
  CheckSameDtype(x, in[1], "conv2d", "weight");
  ConvGeom g = MakeConvGeom(x.shape, in[1].shape, attrs);
  if (in.size() == 3) {
    CheckSameDtype(x, in[2], "conv2d", "bias");
    if (in[2].shape != Shape({g.o})) {
      throw Error(StrCat("conv2d: expected bias of shape (", g.o, ",) for ", g.o,
                         " output channels, got ", in[2].shape));
    }
  }
  return {{Shape({g.n, g.o, g.oh, g.ow}), x.dtype, x.device}};
}

std::vector<Tensor> Conv2dCpu(const std::vector<Tensor>& in, const Attrs& attrs,
                              const std::vector<TensorMeta>& out) {
  Tensor x = Contig(in[0]), w = Contig(in[1]);
  Tensor b = in.size() == 3 ? Contig(in[2]) : Tensor();
  ConvGeom g = MakeConvGeom(x.shape(), w.shape(), attrs);
  Tensor y = Tensor::Empty(out[0]);
  if (IsHalf(x.dtype())) {
    const bool native =
        x.dtype() == DType::kBFloat16 &&
        cpu::Conv2dForwardBf16(g, x.data<BFloat16>(), w.data<BFloat16>(),
                               b.defined() ? b.data<BFloat16>() : nullptr, y.data<BFloat16>());
    return native ? std::vector<Tensor>{y}
                  : RunKernelInFloat32(OP(conv2d), Conv2dCpu, in, attrs, out);
  }
  DispatchFloating(x.dtype(), "conv2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* bp = b.defined() ? b.data<T>() : nullptr;
    cpu::Conv2dForward<T>(g, x.data<T>(), w.data<T>(), bp, y.data<T>());
  });
  return {y};
}

std::vector<Tensor> Conv2dGrad(const GradCtx& ctx) {
  const Tensor& x = ctx.inputs[0];
  const Tensor& w = ctx.inputs[1];
  const Tensor& dy = ctx.grad_outputs[0];
  std::vector<Tensor> grads(ctx.inputs.size());
  if (ctx.needs_input_grad[0]) {
    Attrs a = ctx.attrs;
    a.Set("input_shape", x.shape().dims());
    grads[0] = CallOp1(OP(conv2d_grad_input), {dy, w}, a);
  }
  if (ctx.needs_input_grad[1]) {
    Attrs a = ctx.attrs;
    a.Set("weight_shape", w.shape().dims());
    grads[1] = CallOp1(OP(conv2d_grad_weight), {dy, x}, a);
  }
  if (ctx.inputs.size() == 3 && ctx.needs_input_grad[2]) grads[2] = fn::sum(dy, {0, 2, 3});
  return grads;
}

// ---- conv2d_grad_input(dy, weight), attr input_shape: the gradient wrt x ----

// Checks dy against the geometry of the forward call it is the gradient of.
void CheckGradOutput(const TensorMeta& dy, const ConvGeom& g, const char* op) {
  Shape want({g.n, g.o, g.oh, g.ow});
  if (dy.shape != want) {
    throw Error(StrCat(op, ": expected output gradient of shape ", want, ", got ", dy.shape));
  }
}

std::vector<TensorMeta> InferConv2dGradInput(const std::vector<TensorMeta>& in,
                                             const Attrs& attrs) {
  Shape x = AttrShape(attrs, "input_shape");
  CheckSameDtype(in[0], in[1], "conv2d_grad_input", "weight");
  CheckGradOutput(in[0], MakeConvGeom(x, in[1].shape, attrs), "conv2d_grad_input");
  return {{x, in[0].dtype, in[0].device}};
}

std::vector<Tensor> Conv2dGradInputCpu(const std::vector<Tensor>& in, const Attrs& attrs,
                                       const std::vector<TensorMeta>& out) {
  Tensor dy = Contig(in[0]), w = Contig(in[1]);
  ConvGeom g = MakeConvGeom(out[0].shape, w.shape(), attrs);
  Tensor dx = Tensor::Empty(out[0]);
  if (IsHalf(dy.dtype())) {
    const bool native =
        dy.dtype() == DType::kBFloat16 &&
        cpu::Conv2dGradInputBf16(g, dy.data<BFloat16>(), w.data<BFloat16>(), dx.data<BFloat16>());
    return native ? std::vector<Tensor>{dx}
                  : RunKernelInFloat32(OP(conv2d_grad_input), Conv2dGradInputCpu, in, attrs, out);
  }
  DispatchFloating(dy.dtype(), "conv2d_grad_input", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu::Conv2dGradInput<T>(g, dy.data<T>(), w.data<T>(), dx.data<T>());
  });
  return {dx};
}

// conv2d_grad_input is linear in dy and in w: dx = J_x(w)^T dy. Its own gradient (used when it
// runs forward as conv_transpose2d) is, for an incoming g shaped like dx: wrt dy the forward
// convolution of g, wrt w the weight gradient of <conv2d(g, w), dy>.
Attrs ConvOnlyAttrs(const Attrs& attrs) {
  Attrs a;
  a.Set("stride", attrs.Get<std::vector<int64_t>>("stride"))
      .Set("padding", attrs.Get<std::vector<int64_t>>("padding"))
      .Set("dilation", attrs.Get<std::vector<int64_t>>("dilation"))
      .Set("groups", AttrValue(attrs.Get<int64_t>("groups")));
  return a;
}

std::vector<Tensor> Conv2dGradInputGrad(const GradCtx& ctx) {
  const Tensor& dy = ctx.inputs[0];
  const Tensor& w = ctx.inputs[1];
  const Tensor& g = ctx.grad_outputs[0];
  std::vector<Tensor> grads(2);
  Attrs conv = ConvOnlyAttrs(ctx.attrs);
  if (ctx.needs_input_grad[0]) grads[0] = CallOp1(OP(conv2d), {g, w}, conv);
  if (ctx.needs_input_grad[1]) {
    conv.Set("weight_shape", w.shape().dims());
    grads[1] = CallOp1(OP(conv2d_grad_weight), {dy, g}, conv);
  }
  return grads;
}

// ---- conv2d_grad_weight(dy, x), attr weight_shape: the gradient wrt the weight ----

std::vector<TensorMeta> InferConv2dGradWeight(const std::vector<TensorMeta>& in,
                                              const Attrs& attrs) {
  Shape w = AttrShape(attrs, "weight_shape");
  CheckSameDtype(in[0], in[1], "conv2d_grad_weight", "input");
  CheckGradOutput(in[0], MakeConvGeom(in[1].shape, w, attrs), "conv2d_grad_weight");
  return {{w, in[0].dtype, in[0].device}};
}

std::vector<Tensor> Conv2dGradWeightCpu(const std::vector<Tensor>& in, const Attrs& attrs,
                                        const std::vector<TensorMeta>& out) {
  Tensor dy = Contig(in[0]), x = Contig(in[1]);
  ConvGeom g = MakeConvGeom(x.shape(), out[0].shape, attrs);
  Tensor dw = Tensor::Empty(out[0]);
  if (IsHalf(dy.dtype())) {
    const bool native =
        dy.dtype() == DType::kBFloat16 &&
        cpu::Conv2dGradWeightBf16(g, dy.data<BFloat16>(), x.data<BFloat16>(), dw.data<BFloat16>());
    return native ? std::vector<Tensor>{dw}
                  : RunKernelInFloat32(OP(conv2d_grad_weight), Conv2dGradWeightCpu, in, attrs, out);
  }
  DispatchFloating(dy.dtype(), "conv2d_grad_weight", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu::Conv2dGradWeight<T>(g, dy.data<T>(), x.data<T>(), dw.data<T>());
  });
  return {dw};
}

// conv2d_grad_weight is linear in dy and in x: dw = J_w(x)^T dy. Its own gradient (second
// derivatives), for an incoming g shaped like the weight: wrt dy the forward convolution
// conv2d(x, g), wrt x the input gradient of <conv2d(x, g), dy>, conv2d_grad_input(dy, g).
std::vector<Tensor> Conv2dGradWeightGrad(const GradCtx& ctx) {
  const Tensor& dy = ctx.inputs[0];
  const Tensor& x = ctx.inputs[1];
  const Tensor& g = ctx.grad_outputs[0];
  std::vector<Tensor> grads(2);
  Attrs conv = ConvOnlyAttrs(ctx.attrs);
  if (ctx.needs_input_grad[0]) grads[0] = CallOp1(OP(conv2d), {x, g}, conv);
  if (ctx.needs_input_grad[1]) {
    conv.Set("input_shape", x.shape().dims());
    grads[1] = CallOp1(OP(conv2d_grad_input), {dy, g}, conv);
  }
  return grads;
}

}  // namespace

// The CPU kernels take bfloat16 on oneDNN (and hand float16 and the rest to float32 themselves).
ONEFLOW_REGISTER_OP(conv2d).Inputs(-1).Infer(InferConv2d).Grad(Conv2dGrad).CpuHalf();
ONEFLOW_REGISTER_KERNEL(conv2d, kCPU, Conv2dCpu);
ONEFLOW_REGISTER_OP(conv2d_grad_input)
    .Inputs(2)
    .Infer(InferConv2dGradInput)
    .Grad(Conv2dGradInputGrad)
    .CpuHalf();
ONEFLOW_REGISTER_KERNEL(conv2d_grad_input, kCPU, Conv2dGradInputCpu);
ONEFLOW_REGISTER_OP(conv2d_grad_weight)
    .Inputs(2)
    .Infer(InferConv2dGradWeight)
    .Grad(Conv2dGradWeightGrad)
    .CpuHalf();
ONEFLOW_REGISTER_KERNEL(conv2d_grad_weight, kCPU, Conv2dGradWeightCpu);

namespace fn {

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const IntList& stride,
              const IntList& padding, const IntList& dilation, int64_t groups) {
  // Scalars go in as AttrValue: a bare int64_t or double would pick Set(name, int).
  Attrs attrs;
  attrs.Set("stride", nn_util::HwPair(stride, "conv2d", "stride"))
      .Set("padding", nn_util::HwPair(padding, "conv2d", "padding"))
      .Set("dilation", nn_util::HwPair(dilation, "conv2d", "dilation"))
      .Set("groups", AttrValue(groups));
  return nn_util::WithBatchDim(x, [&](const Tensor& xb) {
    if (bias.defined()) return CallOp1(OP(conv2d), {xb, weight, bias}, attrs);
    return CallOp1(OP(conv2d), {xb, weight}, attrs);
  });
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const IntList& stride, const IntList& padding,
                        const IntList& output_padding, int64_t groups, const IntList& dilation) {
  const char* op = "conv_transpose2d";
  std::vector<int64_t> s = nn_util::HwPair(stride, op, "stride");
  std::vector<int64_t> p = nn_util::HwPair(padding, op, "padding");
  std::vector<int64_t> op_pad = nn_util::HwPair(output_padding, op, "output_padding");
  std::vector<int64_t> d = nn_util::HwPair(dilation, op, "dilation");
  if (x.ndim() != 3 && x.ndim() != 4) {
    throw Error(StrCat(op, ": expected input of shape (N, C, H, W) or (C, H, W), got ", x.shape()));
  }
  if (weight.ndim() != 4) {
    throw Error(
        StrCat(op, ": expected weight of shape (in_channels, out_channels / groups, kh, kw), got ",
               weight.shape()));
  }
  CheckFloating(x.meta(), op);
  CheckSameDtype(x.meta(), weight.meta(), op, "weight");
  if (bias.defined()) CheckSameDtype(x.meta(), bias.meta(), op, "bias");
  if (groups < 1) throw Error(StrCat(op, ": expected groups of at least 1, got ", groups));
  for (int i = 0; i < 2; ++i) {
    if (s[i] < 1) throw Error(StrCat(op, ": expected stride of at least 1, got ", Shape(s)));
    if (d[i] < 1) throw Error(StrCat(op, ": expected dilation of at least 1, got ", Shape(d)));
    if (p[i] < 0) throw Error(StrCat(op, ": expected padding of at least 0, got ", Shape(p)));
    if (op_pad[i] < 0 || op_pad[i] >= s[i]) {
      throw Error(StrCat(op, ": output_padding ", Shape(op_pad),
                         " must be at least 0 and smaller than the stride ", Shape(s)));
    }
  }
  const Shape& xs = x.shape();
  const int64_t c_in = xs[x.ndim() - 3];
  if (weight.shape()[0] != c_in) {
    throw Error(StrCat(op, ": input has ", c_in, " channels but weight ", weight.shape(),
                       " expects ", weight.shape()[0], " (in_channels)"));
  }
  if (c_in % groups != 0) {
    throw Error(StrCat(op, ": in_channels ", c_in, " is not divisible by groups ", groups));
  }
  const int64_t c_out = weight.shape()[1] * groups;
  std::vector<int64_t> out_hw(2);
  for (int i = 0; i < 2; ++i) {
    const int64_t in = xs[x.ndim() - 2 + i];
    out_hw[i] = (in - 1) * s[i] - 2 * p[i] + d[i] * (weight.shape()[2 + i] - 1) + op_pad[i] + 1;
  }
  if (out_hw[0] < 1 || out_hw[1] < 1) {
    throw Error(StrCat(op, ": the output size ", Shape(out_hw), " for input ", xs,
                       " is too small (padding too large)"));
  }
  if (bias.defined() && bias.shape() != Shape({c_out})) {
    throw Error(StrCat(op, ": expected bias of shape (", c_out, ",) for ", c_out,
                       " output channels, got ", bias.shape()));
  }
  Attrs attrs;
  attrs.Set("stride", s).Set("padding", p).Set("dilation", d).Set("groups", AttrValue(groups));
  return nn_util::WithBatchDim(x, [&](const Tensor& xb) {
    attrs.Set("input_shape", std::vector<int64_t>{xb.shape()[0], c_out, out_hw[0], out_hw[1]});
    Tensor y = CallOp1(OP(conv2d_grad_input), {xb, weight}, attrs);
    if (bias.defined()) y = fn::add(y, fn::reshape(bias, {1, c_out, 1, 1}));
    return y;
  });
}

}  // namespace fn
}  // namespace oneflow
