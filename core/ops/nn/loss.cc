// Losses: nll_loss over class indices (with its backward op), cross_entropy fused (with its
// backward op), and mse_loss composed from other ops.
//
// nll_loss takes log-probabilities (C,), (N, C) or (N, C, d1, ...) and int64 targets (),
// (N,) or (N, d1, ...). "mean" divides by the number of targets that are not ignore_index
// (so a batch of only ignored targets gives nan, as in PyTorch).
//
// cross_entropy(logits (C,) or (N, C), target () or (N,)) -> (loss, lse): nll_loss of
// log_softmax(logits) in one op, with PyTorch's label smoothing e: a kept target's loss is
// lse - (1 - e) x[t] - e / C sum(x), lse = log(sum(exp(x))) per row (float32, or float64 for
// float64 logits), which the backward op cross_entropy_grad(dy, logits, target, lse) uses:
// dx = scale (softmax(x) - (1 - e) onehot(t) - e / C), scale = 0 for an ignored target, else dy
// (divided by the count of kept targets for "mean"). fn::cross_entropy takes it for local
// logits of up to two dims; class dims beyond that and global logits (whose class dim may be
// split) go through log_softmax and nll_loss.

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
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

// ---- cross_entropy(logits, target) -> (loss, lse), attrs reduction, ignore_index,
// label_smoothing; cross_entropy_grad(dy, logits, target, lse) -> dlogits ----

DType LseDType(DType logits) {
  return logits == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
}

// Validates (logits, target) as nll_loss does (its messages) and returns (rows, classes).
std::pair<int64_t, int64_t> CrossEntropyRows(const Shape& x, DType x_dtype,
                                             const TensorMeta& target, const char* op) {
  if (x.ndim() > 2) {
    throw Error(StrCat(op, ": expected logits of shape (C,) or (N, C), got ", x));
  }
  const NllLayout l = MakeNllLayout(x, x_dtype, target);
  if (l.c == 0) throw Error(StrCat(op, ": expected at least one class, got logits of shape ", x));
  return {l.n, l.c};
}

double SmoothingOf(const Attrs& attrs, const char* op) {
  const double e = attrs.Get<double>("label_smoothing");
  if (!(e >= 0.0 && e <= 1.0)) {
    throw Error(StrCat(op, ": label_smoothing must be in [0, 1], got ", e));
  }
  return e;
}

std::vector<TensorMeta> InferCrossEntropy(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  CrossEntropyRows(in[0].shape, in[0].dtype, in[1], "cross_entropy");
  const std::string& reduction = attrs.Get<std::string>("reduction");
  nn_util::CheckReduction(reduction, "cross_entropy");
  SmoothingOf(attrs, "cross_entropy");
  Shape out = reduction == "none" ? in[1].shape : Shape();
  return {{out, in[0].dtype, in[0].device}, {in[1].shape, LseDType(in[0].dtype), in[0].device}};
}

// The loss of row i (lse given): 0 for an ignored target.
template <typename T, typename A>
A RowLoss(const T* x, int64_t c, int64_t t, A lse, A smoothing) {
  A loss = lse - (A(1) - smoothing) * static_cast<A>(x[t]);
  if (smoothing != A(0)) {
    A sx = 0;
    for (int64_t j = 0; j < c; ++j) sx += static_cast<A>(x[j]);
    loss -= smoothing / static_cast<A>(c) * sx;
  }
  return loss;
}

// log(sum(exp(x))) over a row, as log_softmax computes it: the max ignores NaN, an infinite max
// shifts by 0.
template <typename T>
T RowLse(const T* x, int64_t c) {
  T mx = -std::numeric_limits<T>::infinity();
  for (int64_t j = 0; j < c; ++j) mx = std::max(mx, x[j]);
  if (std::isinf(mx)) mx = 0;
  T sum = 0;
  for (int64_t j = 0; j < c; ++j) sum += std::exp(x[j] - mx);
  return mx + std::log(sum);
}

int64_t CountKeptRows(int64_t n, const int64_t* target, int64_t ignore_index) {
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += target[i] != ignore_index;
  return count;
}

// Calls f(row, target) for every row whose target is not ignored (throwing nll_loss's error for
// one out of range).
template <typename F>
void ForEachKeptRow(int64_t n, int64_t c, const int64_t* target, int64_t ignore_index, F&& f) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = target[i];
    if (t == ignore_index) continue;
    if (t < 0 || t >= c) {
      throw Error(StrCat("nll_loss: target ", t, " is out of bounds for ", c, " classes"));
    }
    f(i, t);
  }
}

std::vector<Tensor> CrossEntropyCpu(const std::vector<Tensor>& in, const Attrs& attrs,
                                    const std::vector<TensorMeta>& out) {
  Tensor x = Contig(in[0]), target = Contig(in[1]);
  const auto [n, c] = CrossEntropyRows(x.shape(), x.dtype(), target.meta(), "cross_entropy");
  const std::string& reduction = attrs.Get<std::string>("reduction");
  const int64_t ignore_index = attrs.Get<int64_t>("ignore_index");
  const double smoothing = SmoothingOf(attrs, "cross_entropy");
  Tensor y = Tensor::Empty(out[0]), lse = Tensor::Empty(out[1]);
  DispatchFloating(x.dtype(), "cross_entropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xd = x.data<T>();
    const int64_t* td = target.data<int64_t>();
    T* ld = lse.data<T>();  // float32 or float64, as T (half logits reach here as float32)
    for (int64_t i = 0; i < n; ++i) ld[i] = RowLse(xd + i * c, c);
    T* yd = y.data<T>();
    if (reduction == "none") std::fill(yd, yd + y.numel(), T(0));  // ignored targets lose 0
    double total = 0;
    int64_t count = 0;
    ForEachKeptRow(n, c, td, ignore_index, [&](int64_t i, int64_t t) {
      const T loss = RowLoss(xd + i * c, c, t, ld[i], static_cast<T>(smoothing));
      if (reduction == "none") yd[i] = loss;
      total += loss;
      ++count;
    });
    if (reduction != "none") {
      yd[0] = static_cast<T>(reduction == "mean" ? total / static_cast<double>(count) : total);
    }
  });
  return {y, lse};
}

std::vector<Tensor> CrossEntropyGrad(const GradCtx& ctx) {
  return {CallOp1(OP(cross_entropy_grad),
                  {ctx.grad_outputs[0], ctx.inputs[0], ctx.inputs[1], ctx.outputs[1]}, ctx.attrs),
          Tensor()};
}

std::vector<TensorMeta> InferCrossEntropyGrad(const std::vector<TensorMeta>& in,
                                              const Attrs& attrs) {
  const auto [n, c] = CrossEntropyRows(in[1].shape, in[1].dtype, in[2], "cross_entropy_grad");
  (void)c;
  const std::string& reduction = attrs.Get<std::string>("reduction");
  nn_util::CheckReduction(reduction, "cross_entropy_grad");
  SmoothingOf(attrs, "cross_entropy_grad");
  const Shape want = reduction == "none" ? in[2].shape : Shape();
  if (in[0].shape != want || in[0].dtype != in[1].dtype) {
    throw Error(StrCat("cross_entropy_grad: expected output gradient of shape ", want,
                       " and dtype ", DTypeName(in[1].dtype), ", got ", in[0].shape, " ",
                       DTypeName(in[0].dtype)));
  }
  if (in[3].shape != in[2].shape || in[3].dtype != LseDType(in[1].dtype)) {
    throw Error(StrCat("cross_entropy_grad: expected lse of shape ", in[2].shape, " and dtype ",
                       DTypeName(LseDType(in[1].dtype)), ", got ", in[3].shape, " ",
                       DTypeName(in[3].dtype)));
  }
  (void)n;
  return {{in[1].shape, in[1].dtype, in[1].device}};
}

std::vector<Tensor> CrossEntropyGradCpu(const std::vector<Tensor>& in, const Attrs& attrs,
                                        const std::vector<TensorMeta>& out) {
  Tensor dy = Contig(in[0]), x = Contig(in[1]), target = Contig(in[2]), lse = Contig(in[3]);
  const auto [n, c] = CrossEntropyRows(x.shape(), x.dtype(), target.meta(), "cross_entropy_grad");
  const std::string& reduction = attrs.Get<std::string>("reduction");
  const int64_t ignore_index = attrs.Get<int64_t>("ignore_index");
  const double smoothing = SmoothingOf(attrs, "cross_entropy_grad");
  Tensor dx = Tensor::Empty(out[0]);
  DispatchFloating(x.dtype(), "cross_entropy_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xd = x.data<T>();
    const T* dyd = dy.data<T>();
    const T* ld = lse.data<T>();
    const int64_t* td = target.data<int64_t>();
    T* dxd = dx.data<T>();
    std::vector<T> scale(n, T(0));
    T shared = reduction == "none" ? T(0) : dyd[0];
    if (reduction == "mean") shared /= static_cast<T>(CountKeptRows(n, td, ignore_index));
    ForEachKeptRow(n, c, td, ignore_index,
                   [&](int64_t i, int64_t) { scale[i] = reduction == "none" ? dyd[i] : shared; });
    const T on = T(1) - static_cast<T>(smoothing), off = static_cast<T>(smoothing) / T(c);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t t = td[i];
      for (int64_t j = 0; j < c; ++j) {
        const T p = std::exp(xd[i * c + j] - ld[i]);
        dxd[i * c + j] = scale[i] * (p - (j == t ? on : T(0)) - off);
      }
    }
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
ONEFLOW_REGISTER_OP(cross_entropy)
    .Inputs(2)
    .Infer(InferCrossEntropy)
    .NonDiffInputs({1})
    .Grad(CrossEntropyGrad)
    .Kernel(DeviceType::kCPU, CrossEntropyCpu);
ONEFLOW_REGISTER_OP(cross_entropy_grad)
    .Inputs(4)
    .Infer(InferCrossEntropyGrad)
    .NonDiffInputs({2, 3})
    .Grad(NoDoubleBackward)
    .Kernel(DeviceType::kCPU, CrossEntropyGradCpu);

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
                     int64_t ignore_index, double label_smoothing) {
  if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0)) {
    throw Error(StrCat("cross_entropy: label_smoothing must be in [0, 1], got ", label_smoothing));
  }
  // int32 class indices are accepted as OneFlow does: widened to the kernel's int64.
  const Tensor t = target.dtype() == DType::kInt32 ? to_dtype(target, DType::kInt64) : target;
  if (logits.ndim() >= 1 && logits.ndim() <= 2 && !logits.is_global() && !t.is_global()) {
    Attrs a;
    a.Set("reduction", reduction)
        .Set("ignore_index", AttrValue(ignore_index))
        .Set("label_smoothing", label_smoothing);
    return CallOp(OP(cross_entropy), {logits, t}, a)[0];
  }
  if (label_smoothing != 0.0) {
    throw Error(
        StrCat("cross_entropy: label_smoothing needs local logits of shape (C,) or (N, C), "
               "got ",
               logits.is_global() ? "global " : "", "logits of shape ", logits.shape()));
  }
  // Classes are dim 1, or dim 0 for a single unbatched (C,) sample.
  const int64_t class_dim = logits.ndim() == 1 ? 0 : 1;
  return nll_loss(log_softmax(logits, class_dim), t, reduction, ignore_index);
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
