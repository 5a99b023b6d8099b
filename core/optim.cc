#include "core/optim.h"

#include <cmath>

#include "core/kernels/cpu/cpu_util.h"
#include "core/ops/op_util.h"

namespace oneflow {
namespace optim {

namespace {

void CheckSame(const TensorMeta& p, const TensorMeta& t, const char* op, const char* what) {
  ONEFLOW_CHECK(p.shape == t.shape && p.dtype == t.dtype, op, ": ", what, " has shape ", t.shape,
                " and dtype ", DTypeName(t.dtype), " but the parameter has ", p.shape, " and ",
                DTypeName(p.dtype));
}

// Inputs: param, grad[, buf]. Outputs nothing new: the update is in place, and the op
// returns the parameter so the registry's one-output convention holds.
std::vector<TensorMeta> InferSgd(const std::vector<TensorMeta>& in, const Attrs&) {
  ONEFLOW_CHECK(in.size() == 2 || in.size() == 3, "sgd_update: expected 2 or 3 tensors, got ",
                in.size());
  CheckSame(in[0], in[1], "sgd_update", "the gradient");
  if (in.size() == 3) CheckSame(in[0], in[2], "sgd_update", "the momentum buffer");
  return {in[0]};
}

// The flags are loop-invariant: each combination gets its own branch-free loop that the
// compiler vectorises (the plain `p -= lr * g` case is the common one).
template <typename T>
void SgdLoop(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ buf, int64_t n, T lr,
             T sign, T wd, T momentum, T one_minus_dampening, bool first, bool nesterov) {
  if (!buf) {
    if (wd == T(0)) {
      for (int64_t i = 0; i < n; ++i) p[i] -= lr * sign * g[i];
    } else {
      for (int64_t i = 0; i < n; ++i) p[i] -= lr * (sign * g[i] + wd * p[i]);
    }
    return;
  }
  // One pass over p, g and buf (two would read buf and p twice: the update is memory-bound).
  // Each element's arithmetic is the two-pass order's (buf first, then p from it).
  if (nesterov) {
    for (int64_t i = 0; i < n; ++i) {
      const T d = sign * g[i] + wd * p[i];
      const T b = first ? d : momentum * buf[i] + one_minus_dampening * d;
      buf[i] = b;
      p[i] -= lr * (d + momentum * b);
    }
  } else if (first) {
    for (int64_t i = 0; i < n; ++i) {
      const T b = sign * g[i] + wd * p[i];
      buf[i] = b;
      p[i] -= lr * b;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const T b = momentum * buf[i] + one_minus_dampening * (sign * g[i] + wd * p[i]);
      buf[i] = b;
      p[i] -= lr * b;
    }
  }
}

std::vector<Tensor> SgdCpu(const std::vector<Tensor>& in, const Attrs& a,
                           const std::vector<TensorMeta>&) {
  const Tensor& p = in[0];
  ONEFLOW_CHECK(p.is_contiguous(), "sgd_update: the parameter must be contiguous");
  Tensor g = Contig(in[1]);
  double lr = a.Get<double>("lr"), momentum = a.Get<double>("momentum");
  double dampening = a.Get<double>("dampening"), wd = a.Get<double>("weight_decay");
  bool nesterov = a.Get<bool>("nesterov"), first = a.Get<bool>("first_step");
  bool maximize = a.Get<bool>("maximize");
  DispatchFloating(p.dtype(), "sgd_update", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* pb = in.size() == 3 ? in[2].data<T>() : nullptr;
    SgdLoop<T>(p.data<T>(), g.data<T>(), pb, p.numel(), static_cast<T>(lr),
               static_cast<T>(maximize ? -1 : 1), static_cast<T>(wd), static_cast<T>(momentum),
               static_cast<T>(1 - dampening), first, nesterov);
  });
  p.storage()->bump_version();
  return {p};
}

// Inputs: param, grad, exp_avg, exp_avg_sq[, max_exp_avg_sq].
std::vector<TensorMeta> InferAdam(const std::vector<TensorMeta>& in, const Attrs&) {
  ONEFLOW_CHECK(in.size() == 4 || in.size() == 5, "adam_update: expected 4 or 5 tensors, got ",
                in.size());
  for (size_t i = 1; i < in.size(); ++i) CheckSame(in[0], in[i], "adam_update", "a state tensor");
  return {in[0]};
}

std::vector<Tensor> AdamCpu(const std::vector<Tensor>& in, const Attrs& a,
                            const std::vector<TensorMeta>&) {
  const Tensor& p = in[0];
  ONEFLOW_CHECK(p.is_contiguous(), "adam_update: the parameter must be contiguous");
  Tensor g = Contig(in[1]);
  double lr = a.Get<double>("lr"), b1 = a.Get<double>("beta1"), b2 = a.Get<double>("beta2");
  double eps = a.Get<double>("eps"), wd = a.Get<double>("weight_decay");
  int64_t step = a.Get<int64_t>("step");
  bool decoupled = a.Get<bool>("decoupled");
  double bc1 = 1 - std::pow(b1, static_cast<double>(step));
  double bc2 = 1 - std::pow(b2, static_cast<double>(step));
  double step_size = lr / bc1;
  double bc2_sqrt = std::sqrt(bc2);
  DispatchFloating(p.dtype(), "adam_update", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* pp = p.data<T>();
    const T* pg = g.data<T>();
    T* m = in[2].data<T>();
    T* v = in[3].data<T>();
    T* vmax = in.size() == 5 ? in[4].data<T>() : nullptr;
    const int64_t n = p.numel();
    // Flags are hoisted out of the loops; arithmetic in T, in PyTorch's order.
    if (decoupled && wd != 0) {
      const T keep = static_cast<T>(1 - lr * wd);
      for (int64_t i = 0; i < n; ++i) pp[i] *= keep;
    }
    const T coupled_wd = decoupled ? T(0) : static_cast<T>(wd);
    const T tb1 = static_cast<T>(b1), tb2 = static_cast<T>(b2);
    const T c1 = static_cast<T>(1 - b1), c2 = static_cast<T>(1 - b2);
    const T tbc2 = static_cast<T>(bc2_sqrt), teps = static_cast<T>(eps);
    const T neg_step = static_cast<T>(-step_size);
    for (int64_t i = 0; i < n; ++i) {
      T d = pg[i] + coupled_wd * pp[i];
      m[i] = tb1 * m[i] + c1 * d;
      v[i] = tb2 * v[i] + c2 * d * d;
      T vv = v[i];
      if (vmax) {
        vmax[i] = std::max(vmax[i], v[i]);
        vv = vmax[i];
      }
      pp[i] += neg_step * (m[i] / (std::sqrt(vv) / tbc2 + teps));
    }
  });
  p.storage()->bump_version();
  return {p};
}

}  // namespace

ONEFLOW_REGISTER_OP(sgd_update)
    .Inputs(-1)
    .Infer(InferSgd)
    .NonDifferentiable()
    .Kernel(DeviceType::kCPU, SgdCpu);
ONEFLOW_REGISTER_OP(adam_update)
    .Inputs(-1)
    .Infer(InferAdam)
    .NonDifferentiable()
    .Kernel(DeviceType::kCPU, AdamCpu);

void SgdUpdate(const Tensor& param, const Tensor& grad, const Tensor& buf, double lr,
               double momentum, double dampening, bool nesterov, double weight_decay,
               bool first_step, bool maximize) {
  ONEFLOW_CHECK(momentum == 0 || buf.defined(), "sgd_update: momentum ", momentum,
                " needs a momentum buffer");
  ONEFLOW_CHECK(!nesterov || (momentum > 0 && dampening == 0),
                "SGD: nesterov momentum requires a momentum and zero dampening");
  Attrs a;
  a.Set("lr", lr).Set("momentum", momentum).Set("dampening", dampening);
  a.Set("nesterov", nesterov).Set("weight_decay", weight_decay).Set("first_step", first_step);
  a.Set("maximize", maximize);
  std::vector<Tensor> in = {param, grad};
  if (momentum != 0) in.push_back(buf);
  CallOp(OP(sgd_update), in, a);
}

void AdamUpdate(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, int64_t step, double lr,
                double beta1, double beta2, double eps, double weight_decay, bool amsgrad,
                bool decoupled) {
  ONEFLOW_CHECK(step >= 1, "adam_update: step counts from 1, got ", step);
  ONEFLOW_CHECK(!amsgrad || max_exp_avg_sq.defined(), "adam_update: amsgrad needs max_exp_avg_sq");
  Attrs a;
  a.Set("lr", lr).Set("beta1", beta1).Set("beta2", beta2).Set("eps", eps);
  a.Set("weight_decay", weight_decay).Set("step", step).Set("decoupled", decoupled);
  std::vector<Tensor> in = {param, grad, exp_avg, exp_avg_sq};
  if (amsgrad) in.push_back(max_exp_avg_sq);
  CallOp(OP(adam_update), in, a);
}

Optimizer::Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {
  for (size_t i = 0; i < params_.size(); ++i) {
    ONEFLOW_CHECK(params_[i].is_leaf(), "optimizer: parameter ", i,
                  " is not a leaf tensor; optimizers can only update leaves");
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  for (Tensor& p : params_) {
    if (!p.grad().defined()) continue;
    // A fresh zero tensor rather than an in-place fill: gradients may alias each other.
    p.set_grad(set_to_none ? Tensor() : fn::zeros_like(p.grad()));
  }
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer(std::move(params)), options_(options), momentum_buffers_(params_.size()) {
  ONEFLOW_CHECK(options.lr >= 0, "SGD: invalid learning rate ", options.lr, " (expected lr >= 0)");
  ONEFLOW_CHECK(options.momentum >= 0, "SGD: invalid momentum ", options.momentum,
                " (expected momentum >= 0)");
  ONEFLOW_CHECK(!options.nesterov || (options.momentum > 0 && options.dampening == 0),
                "SGD: nesterov momentum requires a momentum and zero dampening");
}

void SGD::step() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    bool first = false;
    if (options_.momentum != 0 && !momentum_buffers_[i].defined()) {
      momentum_buffers_[i] = fn::zeros_like(params_[i]);
      first = true;
    }
    SgdUpdate(params_[i], g, momentum_buffers_[i], options_.lr, options_.momentum,
              options_.dampening, options_.nesterov, options_.weight_decay, first);
  }
}

Adam::Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled)
    : Optimizer(std::move(params)), options_(options), decoupled_(decoupled) {
  const char* name = decoupled ? "AdamW" : "Adam";
  ONEFLOW_CHECK(options.lr >= 0, name, ": invalid learning rate ", options.lr,
                " (expected lr >= 0)");
  ONEFLOW_CHECK(options.beta1 >= 0 && options.beta1 < 1, name, ": invalid beta1 ", options.beta1,
                " (expected 0 <= beta1 < 1)");
  ONEFLOW_CHECK(options.beta2 >= 0 && options.beta2 < 1, name, ": invalid beta2 ", options.beta2,
                " (expected 0 <= beta2 < 1)");
  ONEFLOW_CHECK(options.eps >= 0, name, ": invalid eps ", options.eps, " (expected eps >= 0)");
  exp_avg_.resize(params_.size());
  exp_avg_sq_.resize(params_.size());
  max_exp_avg_sq_.resize(params_.size());
}

void Adam::step() {
  NoGradGuard no_grad;
  ++step_;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    if (!exp_avg_[i].defined()) {
      exp_avg_[i] = fn::zeros_like(params_[i]);
      exp_avg_sq_[i] = fn::zeros_like(params_[i]);
      if (options_.amsgrad) max_exp_avg_sq_[i] = fn::zeros_like(params_[i]);
    }
    AdamUpdate(params_[i], g, exp_avg_[i], exp_avg_sq_[i], max_exp_avg_sq_[i], step_, options_.lr,
               options_.beta1, options_.beta2, options_.eps, options_.weight_decay,
               options_.amsgrad, decoupled_);
  }
}

}  // namespace optim
}  // namespace oneflow
