// conv2d (NCHW, weight (O, C / groups, kh, kw), optional bias) and its two backward ops:
// inference, gradients and the CPU kernels, which run the backends of core/kernels/cpu/conv.h
// (oneDNN, depthwise loops, im2col + gemm); the CUDA kernels are core/kernels/cuda/conv.cu.

#include <vector>

#include "core/kernels/cpu/conv.h"
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
  DispatchFloating(dy.dtype(), "conv2d_grad_input", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu::Conv2dGradInput<T>(g, dy.data<T>(), w.data<T>(), dx.data<T>());
  });
  return {dx};
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
  DispatchFloating(dy.dtype(), "conv2d_grad_weight", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu::Conv2dGradWeight<T>(g, dy.data<T>(), x.data<T>(), dw.data<T>());
  });
  return {dw};
}

}  // namespace

ONEFLOW_REGISTER_OP(conv2d).Inputs(-1).Infer(InferConv2d).Grad(Conv2dGrad);
ONEFLOW_REGISTER_KERNEL(conv2d, kCPU, Conv2dCpu);
ONEFLOW_REGISTER_OP(conv2d_grad_input).Inputs(2).Infer(InferConv2dGradInput).Grad(NoDoubleBackward);
ONEFLOW_REGISTER_KERNEL(conv2d_grad_input, kCPU, Conv2dGradInputCpu);
ONEFLOW_REGISTER_OP(conv2d_grad_weight)
    .Inputs(2)
    .Infer(InferConv2dGradWeight)
    .Grad(NoDoubleBackward);
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

}  // namespace fn
}  // namespace oneflow
