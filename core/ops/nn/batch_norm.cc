// batch_norm over dim 1 of (N, C) or (N, C, ...) input, as two ops:
//   batch_norm_train(x, weight, bias[, running_mean, running_var]) -> (y, mean, var)   training:
//       normalise with the batch statistics (var biased), which it also returns; given running
//       statistics (attr momentum), it updates them in place:
//       running = (1 - momentum) running + momentum batch, with the unbiased variance
//   batch_norm_elemt(x, mean, var, weight, bias) -> y   eval: normalise with given statistics
// Each backward is one fused kernel: a pass for the per-channel sums, a pass for dx.

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/kernels/cpu/cpu_util.h"
#include "core/ops/op_util.h"

namespace oneflow {

namespace {

// x (N, C, S...) seen as (outer = N, C, inner = prod(S)): channel c of sample n is the
// contiguous run x[(n * C + c) * inner, + inner).
struct ChannelLayout {
  int64_t outer, c, inner;
  explicit ChannelLayout(const Shape& x)
      : outer(x[0]), c(x[1]), inner(x.numel() / std::max<int64_t>(x[0] * x[1], 1)) {}
  int64_t per_channel() const { return outer * inner; }
};

void CheckBatchNormInput(const TensorMeta& x, const char* op) {
  if (x.shape.ndim() < 2) {
    throw Error(StrCat(op, ": expected input of shape (N, C) or (N, C, ...), got ", x.shape));
  }
  if (!IsFloating(x.dtype)) {
    throw Error(StrCat(op, ": expected a floating point input, got ", DTypeName(x.dtype)));
  }
}

// A per-channel argument (statistics, weight, bias) must be (C,) of the input's dtype, or of
// float32 for a float16/bfloat16 input (mixed precision: the statistics and parameters stay
// float32, the output has the input's dtype, as in PyTorch).
void CheckChannelVector(const TensorMeta& t, const char* name, const TensorMeta& x,
                        const char* op) {
  const int64_t c = x.shape[1];
  if (t.shape != Shape({c})) {
    throw Error(StrCat(op, ": expected ", name, " of shape (", c, ",) for an input with ", c,
                       " channels, got ", t.shape));
  }
  if (t.dtype != x.dtype && !(IsHalf(x.dtype) && t.dtype == DType::kFloat32)) {
    throw Error(StrCat(op, ": expected ", name, " of dtype ", DTypeName(x.dtype),
                       IsHalf(x.dtype) ? " or float32" : "", " like the input, got ",
                       DTypeName(t.dtype)));
  }
}

// y = (x - mean) / sqrt(var + eps) * w + b, as y = x * scale + shift per channel.
template <typename T>
void Normalize(const ChannelLayout& l, const T* x, const T* mean, const T* var, const T* w,
               const T* b, double eps, T* y) {
  std::vector<T> scale(l.c), shift(l.c);
  for (int64_t c = 0; c < l.c; ++c) {
    scale[c] = w[c] / std::sqrt(var[c] + static_cast<T>(eps));
    shift[c] = b[c] - mean[c] * scale[c];
  }
  for (int64_t n = 0; n < l.outer; ++n) {
    for (int64_t c = 0; c < l.c; ++c) {
      const int64_t base = (n * l.c + c) * l.inner;
      for (int64_t s = 0; s < l.inner; ++s) y[base + s] = x[base + s] * scale[c] + shift[c];
    }
  }
}

// Per channel: sum(dy) and sum(dy * (x - mean)), the sums every batch_norm gradient needs.
template <typename T>
void GradSums(const ChannelLayout& l, const T* dy, const T* x, const T* mean,
              std::vector<double>* sum_dy, std::vector<double>* sum_dy_xc) {
  sum_dy->assign(l.c, 0.0);
  sum_dy_xc->assign(l.c, 0.0);
  for (int64_t n = 0; n < l.outer; ++n) {
    for (int64_t c = 0; c < l.c; ++c) {
      const int64_t base = (n * l.c + c) * l.inner;
      // Per-row partial sums in T vectorise; the running totals stay in double.
      T a = 0, b = 0;
      for (int64_t s = 0; s < l.inner; ++s) {
        a += dy[base + s];
        b += dy[base + s] * (x[base + s] - mean[c]);
      }
      (*sum_dy)[c] += a;
      (*sum_dy_xc)[c] += b;
    }
  }
}

// ---- batch_norm_train(x, weight, bias[, running_mean, running_var]), attrs eps[, momentum]
//      -> (y, mean, var) ----

std::vector<TensorMeta> InferTrain(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  if (in.size() != 3 && in.size() != 5) {
    throw Error(StrCat("batch_norm_train: expected 3 tensors (x, weight, bias) or 5 (and ",
                       "running_mean, running_var), got ", in.size()));
  }
  const TensorMeta& x = in[0];
  CheckBatchNormInput(x, "batch_norm_train");
  CheckChannelVector(in[1], "weight", x, "batch_norm_train");
  CheckChannelVector(in[2], "bias", x, "batch_norm_train");
  if (in.size() == 5) {
    CheckChannelVector(in[3], "running_mean", x, "batch_norm_train");
    CheckChannelVector(in[4], "running_var", x, "batch_norm_train");
    if (!attrs.Has("momentum")) {
      throw Error("batch_norm_train: running statistics need the attr momentum");
    }
    const int64_t m = x.shape.numel() / std::max<int64_t>(x.shape[1], 1);
    if (m < 2) {
      throw Error(StrCat("batch_norm_train: expected more than 1 value per channel to update ",
                         "the running statistics, got input of shape ", x.shape));
    }
  }
  return {x, in[1], in[1]};
}

std::vector<Tensor> TrainCpu(const std::vector<Tensor>& in, const Attrs& attrs,
                             const std::vector<TensorMeta>& out) {
  Tensor x = Contig(in[0]), w = Contig(in[1]), b = Contig(in[2]);
  Tensor y = Tensor::Empty(out[0]), mean = Tensor::Empty(out[1]), var = Tensor::Empty(out[2]);
  ChannelLayout l(x.shape());
  DispatchFloating(x.dtype(), "batch_norm_train", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xd = x.data<T>();
    // Two passes (mean, then squared deviations): a one-pass E[x^2] - E[x]^2 cancels badly
    // when the mean is large against the spread. Row sums in T, totals in double.
    std::vector<double> sum(l.c, 0.0), sq(l.c, 0.0);
    for (int64_t n = 0; n < l.outer; ++n) {
      for (int64_t c = 0; c < l.c; ++c) {
        const T* xp = xd + (n * l.c + c) * l.inner;
        T acc = 0;
        for (int64_t s = 0; s < l.inner; ++s) acc += xp[s];
        sum[c] += acc;
      }
    }
    const double m = static_cast<double>(l.per_channel());
    T* md = mean.data<T>();
    for (int64_t c = 0; c < l.c; ++c) md[c] = static_cast<T>(sum[c] / m);
    for (int64_t n = 0; n < l.outer; ++n) {
      for (int64_t c = 0; c < l.c; ++c) {
        const T* xp = xd + (n * l.c + c) * l.inner;
        T acc = 0;
        for (int64_t s = 0; s < l.inner; ++s) acc += (xp[s] - md[c]) * (xp[s] - md[c]);
        sq[c] += acc;
      }
    }
    for (int64_t c = 0; c < l.c; ++c) var.data<T>()[c] = static_cast<T>(sq[c] / m);
    if (in.size() == 5) {  // running = (1 - momentum) running + momentum batch, var unbiased
      const double f = attrs.Get<double>("momentum"), unbias = m / (m - 1);
      T* rm = in[3].data<T>();
      T* rv = in[4].data<T>();
      const int64_t sm = in[3].strides()[0], sv = in[4].strides()[0];
      for (int64_t c = 0; c < l.c; ++c) {
        rm[c * sm] = static_cast<T>((1 - f) * rm[c * sm] + f * static_cast<double>(md[c]));
        rv[c * sv] = static_cast<T>((1 - f) * rv[c * sv] + f * unbias * (sq[c] / m));
      }
      in[3].storage()->bump_version();
      in[4].storage()->bump_version();
    }
    Normalize<T>(l, xd, md, var.data<T>(), w.data<T>(), b.data<T>(), attrs.Get<double>("eps"),
                 y.data<T>());
  });
  return {y, mean, var};
}

std::vector<Tensor> TrainGrad(const GradCtx& ctx) {
  const auto& g = ctx.grad_outputs;
  std::vector<Tensor> grads = CallOp(
      OP(batch_norm_train_grad),
      {g[0], g[1], g[2], ctx.inputs[0], ctx.outputs[1], ctx.outputs[2], ctx.inputs[1]}, ctx.attrs);
  grads.resize(ctx.inputs.size());  // none for the running statistics
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!ctx.needs_input_grad[i]) grads[i] = Tensor();
  }
  return grads;
}

// ---- batch_norm_train_grad(dy, dmean, dvar, x, mean, var, weight) -> (dx, dweight, dbias) ----
// With xc = x - mean, invstd = 1 / sqrt(var + eps), M values per channel and sums over it:
//   dx = w invstd (dy - sum(dy) / M - xc invstd^2 sum(dy xc) / M)   through y
//        + dmean / M + 2 dvar xc / M                                  through mean and var
//   dweight = invstd sum(dy xc)    dbias = sum(dy)

std::vector<TensorMeta> InferTrainGrad(const std::vector<TensorMeta>& in, const Attrs&) {
  const TensorMeta& x = in[3];
  CheckBatchNormInput(x, "batch_norm_train_grad");
  if (in[0].shape != x.shape || in[0].dtype != x.dtype) {
    throw Error(StrCat("batch_norm_train_grad: expected output gradient of shape ", x.shape,
                       ", got ", in[0].shape));
  }
  const char* names[] = {"", "dmean", "dvar", "", "mean", "var", "weight"};
  for (int i : {1, 2, 4, 5, 6}) CheckChannelVector(in[i], names[i], x, "batch_norm_train_grad");
  return {x, in[6], in[6]};
}

std::vector<Tensor> TrainGradCpu(const std::vector<Tensor>& in, const Attrs& attrs,
                                 const std::vector<TensorMeta>& out) {
  Tensor dy = Contig(in[0]), dmean = Contig(in[1]), dvar = Contig(in[2]), x = Contig(in[3]);
  Tensor mean = Contig(in[4]), var = Contig(in[5]), w = Contig(in[6]);
  Tensor dx = Tensor::Empty(out[0]), dw = Tensor::Empty(out[1]), db = Tensor::Empty(out[2]);
  const double eps = attrs.Get<double>("eps");
  ChannelLayout l(x.shape());
  DispatchFloating(x.dtype(), "batch_norm_train_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *dyd = dy.data<T>(), *xd = x.data<T>(), *md = mean.data<T>();
    std::vector<double> sum_dy, sum_dy_xc;
    GradSums<T>(l, dyd, xd, md, &sum_dy, &sum_dy_xc);
    // dx = a * dy + b * xc + k per channel.
    const double inv_m = 1.0 / static_cast<double>(l.per_channel());
    std::vector<T> a(l.c), b(l.c), k(l.c);
    for (int64_t c = 0; c < l.c; ++c) {
      const double invstd = 1.0 / std::sqrt(static_cast<double>(var.data<T>()[c]) + eps);
      const double wi = w.data<T>()[c] * invstd;
      a[c] = static_cast<T>(wi);
      b[c] = static_cast<T>(-wi * invstd * invstd * sum_dy_xc[c] * inv_m +
                            2 * dvar.data<T>()[c] * inv_m);
      k[c] = static_cast<T>(-wi * sum_dy[c] * inv_m + dmean.data<T>()[c] * inv_m);
      dw.data<T>()[c] = static_cast<T>(invstd * sum_dy_xc[c]);
      db.data<T>()[c] = static_cast<T>(sum_dy[c]);
    }
    T* dxd = dx.data<T>();
    for (int64_t n = 0; n < l.outer; ++n) {
      for (int64_t c = 0; c < l.c; ++c) {
        const int64_t base = (n * l.c + c) * l.inner;
        for (int64_t s = 0; s < l.inner; ++s) {
          dxd[base + s] = a[c] * dyd[base + s] + b[c] * (xd[base + s] - md[c]) + k[c];
        }
      }
    }
  });
  return {dx, dw, db};
}

// ---- batch_norm_elemt(x, mean, var, weight, bias), attr eps ----

std::vector<TensorMeta> InferElemt(const std::vector<TensorMeta>& in, const Attrs&) {
  const TensorMeta& x = in[0];
  CheckBatchNormInput(x, "batch_norm_elemt");
  CheckChannelVector(in[1], "mean", x, "batch_norm_elemt");
  CheckChannelVector(in[2], "var", x, "batch_norm_elemt");
  CheckChannelVector(in[3], "weight", x, "batch_norm_elemt");
  CheckChannelVector(in[4], "bias", x, "batch_norm_elemt");
  return {x};
}

std::vector<Tensor> ElemtCpu(const std::vector<Tensor>& in, const Attrs& attrs,
                             const std::vector<TensorMeta>& out) {
  Tensor x = Contig(in[0]), mean = Contig(in[1]), var = Contig(in[2]);
  Tensor w = Contig(in[3]), b = Contig(in[4]);
  Tensor y = Tensor::Empty(out[0]);
  ChannelLayout l(x.shape());
  DispatchFloating(x.dtype(), "batch_norm_elemt", [&](auto tag) {
    using T = typename decltype(tag)::type;
    Normalize<T>(l, x.data<T>(), mean.data<T>(), var.data<T>(), w.data<T>(), b.data<T>(),
                 attrs.Get<double>("eps"), y.data<T>());
  });
  return {y};
}

std::vector<Tensor> ElemtGrad(const GradCtx& ctx) {
  const auto& in = ctx.inputs;
  std::vector<Tensor> g = CallOp(OP(batch_norm_elemt_grad),
                                 {ctx.grad_outputs[0], in[0], in[1], in[2], in[3]}, ctx.attrs);
  for (size_t i = 0; i < g.size(); ++i) {
    if (!ctx.needs_input_grad[i]) g[i] = Tensor();
  }
  return g;
}

// ---- batch_norm_elemt_grad(dy, x, mean, var, weight) -> (dx, dmean, dvar, dweight, dbias) ----
// With invstd = 1 / sqrt(var + eps) and sums over the channel:
//   dx = dy w invstd                 dmean = -w invstd sum(dy)
//   dvar = -w invstd^3 / 2 sum(dy (x - mean))
//   dweight = invstd sum(dy (x - mean))   dbias = sum(dy)

std::vector<TensorMeta> InferElemtGrad(const std::vector<TensorMeta>& in, const Attrs&) {
  const TensorMeta& x = in[1];
  CheckBatchNormInput(x, "batch_norm_elemt_grad");
  if (in[0].shape != x.shape || in[0].dtype != x.dtype) {
    throw Error(StrCat("batch_norm_elemt_grad: expected output gradient of shape ", x.shape,
                       ", got ", in[0].shape));
  }
  CheckChannelVector(in[2], "mean", x, "batch_norm_elemt_grad");
  CheckChannelVector(in[3], "var", x, "batch_norm_elemt_grad");
  CheckChannelVector(in[4], "weight", x, "batch_norm_elemt_grad");
  return {x, in[2], in[2], in[2], in[2]};
}

std::vector<Tensor> ElemtGradCpu(const std::vector<Tensor>& in, const Attrs& attrs,
                                 const std::vector<TensorMeta>& out) {
  Tensor dy = Contig(in[0]), x = Contig(in[1]), mean = Contig(in[2]), var = Contig(in[3]);
  Tensor w = Contig(in[4]);
  std::vector<Tensor> res;
  for (const TensorMeta& m : out) res.push_back(Tensor::Empty(m));
  const double eps = attrs.Get<double>("eps");
  ChannelLayout l(x.shape());
  DispatchFloating(x.dtype(), "batch_norm_elemt_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<double> sum_dy, sum_dy_xc;
    GradSums<T>(l, dy.data<T>(), x.data<T>(), mean.data<T>(), &sum_dy, &sum_dy_xc);
    std::vector<T> scale(l.c);
    for (int64_t c = 0; c < l.c; ++c) {
      const double invstd = 1.0 / std::sqrt(static_cast<double>(var.data<T>()[c]) + eps);
      const double wc = w.data<T>()[c];
      scale[c] = static_cast<T>(wc * invstd);
      res[1].data<T>()[c] = static_cast<T>(-wc * invstd * sum_dy[c]);
      res[2].data<T>()[c] = static_cast<T>(-0.5 * wc * invstd * invstd * invstd * sum_dy_xc[c]);
      res[3].data<T>()[c] = static_cast<T>(invstd * sum_dy_xc[c]);
      res[4].data<T>()[c] = static_cast<T>(sum_dy[c]);
    }
    for (int64_t n = 0; n < l.outer; ++n) {
      for (int64_t c = 0; c < l.c; ++c) {
        const int64_t base = (n * l.c + c) * l.inner;
        const T* dyp = dy.data<T>() + base;
        T* dxp = res[0].data<T>() + base;
        for (int64_t s = 0; s < l.inner; ++s) dxp[s] = dyp[s] * scale[c];
      }
    }
  });
  return res;
}

}  // namespace

ONEFLOW_REGISTER_OP(batch_norm_train)
    .Inputs(-1)
    .Infer(InferTrain)
    .Grad(TrainGrad)
    .NonDiffInputs({3, 4});  // the running statistics
ONEFLOW_REGISTER_KERNEL(batch_norm_train, kCPU, TrainCpu);
ONEFLOW_REGISTER_OP(batch_norm_train_grad).Inputs(7).Infer(InferTrainGrad).Grad(NoDoubleBackward);
ONEFLOW_REGISTER_KERNEL(batch_norm_train_grad, kCPU, TrainGradCpu);
ONEFLOW_REGISTER_OP(batch_norm_elemt).Inputs(5).Infer(InferElemt).Grad(ElemtGrad);
ONEFLOW_REGISTER_KERNEL(batch_norm_elemt, kCPU, ElemtCpu);
ONEFLOW_REGISTER_OP(batch_norm_elemt_grad).Inputs(5).Infer(InferElemtGrad).Grad(NoDoubleBackward);
ONEFLOW_REGISTER_KERNEL(batch_norm_elemt_grad, kCPU, ElemtGradCpu);

namespace fn {

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  // Checked here too, so that messages name batch_norm and the caller's argument names.
  const TensorMeta xm = x.meta();
  CheckBatchNormInput(xm, "batch_norm");
  const std::pair<const Tensor*, const char*> channel_args[] = {{&running_mean, "running_mean"},
                                                                {&running_var, "running_var"},
                                                                {&weight, "weight"},
                                                                {&bias, "bias"}};
  for (const auto& [t, name] : channel_args) {
    if (t->defined()) CheckChannelVector(t->meta(), name, xm, "batch_norm");
  }
  if (!training && (!running_mean.defined() || !running_var.defined())) {
    throw Error("batch_norm: running_mean and running_var are required when training is false");
  }
  // Missing affine parameters are the identity, in the dtype of the given per-channel tensors
  // (float32 ones for a half input under mixed precision).
  const int64_t c = x.shape()[1];
  DType pd = x.dtype();
  for (const auto& [t, name] : channel_args) {
    if (t->defined()) {
      pd = t->dtype();
      break;
    }
  }
  Tensor w = weight.defined() ? weight : fn::ones(Shape({c}), pd, x.device());
  Tensor b = bias.defined() ? bias : fn::zeros(Shape({c}), pd, x.device());
  Attrs a;
  a.Set("eps", AttrValue(eps));  // AttrValue: a bare double would pick Set(name, int)
  if (!training) return CallOp1(OP(batch_norm_elemt), {x, running_mean, running_var, w, b}, a);

  const int64_t m = x.numel() / c;
  if (m < 2) {
    throw Error(StrCat("batch_norm: expected more than 1 value per channel when training, got ",
                       "input of shape ", x.shape()));
  }
  // The op updates the running statistics itself (inside cuDNN on CUDA); a lone one gets a
  // scratch partner.
  std::vector<Tensor> in = {x, w, b};
  if (running_mean.defined() || running_var.defined()) {
    in.push_back(running_mean.defined() ? running_mean : fn::zeros(Shape({c}), pd, x.device()));
    in.push_back(running_var.defined() ? running_var : fn::ones(Shape({c}), pd, x.device()));
    a.Set("momentum", AttrValue(momentum));
  }
  std::vector<Tensor> out = CallOp(OP(batch_norm_train), in, a);
  return out[0];
}

}  // namespace fn
}  // namespace oneflow
