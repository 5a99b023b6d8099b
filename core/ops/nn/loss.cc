// Losses: nll_loss over class indices (with its backward op), and cross_entropy and mse_loss
// composed from other ops.
//
// nll_loss takes log-probabilities (C,), (N, C) or (N, C, d1, ...) and int64 targets (),
// (N,) or (N, d1, ...). "mean" divides by the number of targets that are not ignore_index
// (so a batch of only ignored targets gives nan, as in PyTorch).

#include <algorithm>
#include <string>
#include <vector>

#include "core/kernels/cpu/cpu_util.h"
#include "core/ops/nn/nn_util.h"
#include "core/ops/op_util.h"

namespace oneflow {

namespace {

using nn_util::NllLayout;

// Validates the pair (input, target) and returns its layout.
NllLayout MakeNllLayout(const Shape& x, DType x_dtype, const TensorMeta& target) {
  if (x.ndim() == 0) {
    throw Error(
        StrCat("nll_loss: expected input of shape (C,), (N, C) or (N, C, d1, ...), got ", x));
  }
  if (!IsFloating(x_dtype)) {
    throw Error(StrCat("nll_loss: expected a floating point input, got ", DTypeName(x_dtype)));
  }
  if (target.dtype != DType::kInt64) {
    throw Error(StrCat("nll_loss: expected target of dtype int64 or int32 (class indices), got ",
                       DTypeName(target.dtype)));
  }
  std::vector<int64_t> want;  // the input's dims without the class dim
  for (int64_t i = 0; i < x.ndim(); ++i) {
    if (i != std::min<int64_t>(1, x.ndim() - 1)) want.push_back(x[i]);
  }
  if (target.shape != Shape(want)) {
    throw Error(StrCat("nll_loss: expected target of shape ", Shape(want), " for input of shape ",
                       x, ", got ", target.shape));
  }
  return nn_util::NllLayoutOf(x);
}

// Calls f(input offset, target offset) for every target that is not ignored.
template <typename F>
void ForEachTarget(const NllLayout& l, const int64_t* target, int64_t ignore_index, F&& f) {
  for (int64_t n = 0; n < l.n; ++n) {
    for (int64_t s = 0; s < l.inner; ++s) {
      const int64_t j = n * l.inner + s;
      const int64_t t = target[j];
      if (t == ignore_index) continue;
      if (t < 0 || t >= l.c) {
        throw Error(StrCat("nll_loss: target ", t, " is out of bounds for ", l.c, " classes"));
      }
      f((n * l.c + t) * l.inner + s, j);
    }
  }
}

int64_t CountTargets(const NllLayout& l, const int64_t* target, int64_t ignore_index) {
  int64_t count = 0;
  ForEachTarget(l, target, ignore_index, [&](int64_t, int64_t) { ++count; });
  return count;
}

// ---- nll_loss(log_probs, target), attrs reduction, ignore_index ----

std::vector<TensorMeta> InferNllLoss(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  MakeNllLayout(in[0].shape, in[0].dtype, in[1]);
  const std::string& reduction = attrs.Get<std::string>("reduction");
  nn_util::CheckReduction(reduction, "nll_loss");
  Shape out = reduction == "none" ? in[1].shape : Shape();
  return {{out, in[0].dtype, in[0].device}};
}

std::vector<Tensor> NllLossCpu(const std::vector<Tensor>& in, const Attrs& attrs,
                               const std::vector<TensorMeta>& out) {
  Tensor x = Contig(in[0]), target = Contig(in[1]);
  NllLayout l = MakeNllLayout(x.shape(), x.dtype(), target.meta());
  const std::string& reduction = attrs.Get<std::string>("reduction");
  const int64_t ignore_index = attrs.Get<int64_t>("ignore_index");
  Tensor y = Tensor::Empty(out[0]);
  DispatchFloating(x.dtype(), "nll_loss", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xd = x.data<T>();
    T* yd = y.data<T>();
    const int64_t* td = target.data<int64_t>();
    if (reduction == "none") {
      std::fill(yd, yd + y.numel(), T(0));  // ignored targets lose 0
      ForEachTarget(l, td, ignore_index, [&](int64_t xi, int64_t ti) { yd[ti] = -xd[xi]; });
      return;
    }
    double total = 0;
    int64_t count = 0;
    ForEachTarget(l, td, ignore_index, [&](int64_t xi, int64_t) {
      total -= xd[xi];
      ++count;
    });
    yd[0] = static_cast<T>(reduction == "mean" ? total / static_cast<double>(count) : total);
  });
  return {y};
}

std::vector<Tensor> NllLossGrad(const GradCtx& ctx) {
  Attrs a = ctx.attrs;
  a.Set("input_shape", ctx.inputs[0].shape().dims());
  return {CallOp1(OP(nll_loss_grad), {ctx.grad_outputs[0], ctx.inputs[1]}, a), Tensor()};
}

// ---- nll_loss_grad(dy, target), attrs as nll_loss plus input_shape ----

std::vector<TensorMeta> InferNllLossGrad(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  Shape x = AttrShape(attrs, "input_shape");
  MakeNllLayout(x, in[0].dtype, in[1]);
  const std::string& reduction = attrs.Get<std::string>("reduction");
  Shape want = reduction == "none" ? in[1].shape : Shape();
  if (in[0].shape != want) {
    throw Error(
        StrCat("nll_loss_grad: expected output gradient of shape ", want, ", got ", in[0].shape));
  }
  return {{x, in[0].dtype, in[0].device}};
}

std::vector<Tensor> NllLossGradCpu(const std::vector<Tensor>& in, const Attrs& attrs,
                                   const std::vector<TensorMeta>& out) {
  Tensor dy = Contig(in[0]), target = Contig(in[1]);
  NllLayout l = MakeNllLayout(out[0].shape, out[0].dtype, target.meta());
  const std::string& reduction = attrs.Get<std::string>("reduction");
  const int64_t ignore_index = attrs.Get<int64_t>("ignore_index");
  Tensor dx = Tensor::Empty(out[0]);
  DispatchFloating(dy.dtype(), "nll_loss_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* dyd = dy.data<T>();
    T* dxd = dx.data<T>();
    const int64_t* td = target.data<int64_t>();
    std::fill(dxd, dxd + dx.numel(), T(0));
    if (reduction == "none") {
      ForEachTarget(l, td, ignore_index, [&](int64_t xi, int64_t ti) { dxd[xi] = -dyd[ti]; });
      return;
    }
    T scale = -dyd[0];
    if (reduction == "mean") scale /= static_cast<T>(CountTargets(l, td, ignore_index));
    ForEachTarget(l, td, ignore_index, [&](int64_t xi, int64_t) { dxd[xi] = scale; });
  });
  return {dx};
}

}  // namespace

ONEFLOW_REGISTER_OP(nll_loss).Inputs(2).Infer(InferNllLoss).NonDiffInputs({1}).Grad(NllLossGrad);
ONEFLOW_REGISTER_KERNEL(nll_loss, kCPU, NllLossCpu);
ONEFLOW_REGISTER_OP(nll_loss_grad)
    .Inputs(2)
    .Infer(InferNllLossGrad)
    .NonDiffInputs({1})
    .Grad(NoDoubleBackward);
ONEFLOW_REGISTER_KERNEL(nll_loss_grad, kCPU, NllLossGradCpu);

namespace fn {

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const std::string& reduction,
                int64_t ignore_index) {
  Attrs a;
  a.Set("reduction", reduction).Set("ignore_index", AttrValue(ignore_index));
  // int32 class indices are accepted as OneFlow does: widened to the kernel's int64.
  const Tensor t = target.dtype() == DType::kInt32 ? to_dtype(target, DType::kInt64) : target;
  return CallOp1(OP(nll_loss), {log_probs, t}, a);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const std::string& reduction,
                     int64_t ignore_index) {
  // Classes are dim 1, or dim 0 for a single unbatched (C,) sample.
  const int64_t class_dim = logits.ndim() == 1 ? 0 : 1;
  return nll_loss(log_softmax(logits, class_dim), target, reduction, ignore_index);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  nn_util::CheckReduction(reduction, "mse_loss");
  // PyTorch broadcasts here with a warning; a (N, 1) input against an (N,) target is almost
  // always a bug, so it is an error.
  if (input.shape() != target.shape()) {
    throw Error(StrCat("mse_loss: expected target of the input's shape ", input.shape(), ", got ",
                       target.shape()));
  }
  Tensor err = square(sub(input, target));
  if (reduction == "mean") return mean(err);
  if (reduction == "sum") return sum(err);
  return err;
}

}  // namespace fn
}  // namespace oneflow
