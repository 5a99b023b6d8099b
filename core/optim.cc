#include "core/optim.h"

#include <cmath>

#include "core/kernels/cpu/cpu_util.h"
#include "core/ops/op_util.h"

namespace oneflow {
namespace optim {

namespace {

bool Flag(const Attrs& a, const char* name) { return a.Has(name) && a.Get<bool>(name); }

}  // namespace

UpdateLayout LayoutOf(const std::string& op, const Attrs& a) {
  if (op == "sgd_update") {
    if (Flag(a, "momentum"))
      return {{"momentum_buffer"}, {"lr", "weight_decay", "momentum", "dampening"}};
    return {{}, {"lr", "weight_decay"}};
  }
  if (op == "adam_update") {
    UpdateLayout l{{"exp_avg", "exp_avg_sq"},
                   {"step", "lr", "beta1", "beta2", "eps", "weight_decay"}};
    if (Flag(a, "amsgrad")) l.state.push_back("max_exp_avg_sq");
    return l;
  }
  if (op == "lamb_update") {
    return {{"exp_avg", "exp_avg_sq"}, {"step", "lr", "beta1", "beta2", "eps", "weight_decay"}};
  }
  if (op == "adagrad_update") return {{"sum"}, {"step", "lr", "lr_decay", "eps", "weight_decay"}};
  if (op == "rmsprop_update") {
    UpdateLayout l{{"square_avg"}, {"step", "lr", "alpha", "eps", "weight_decay"}};
    if (Flag(a, "centered")) l.state.push_back("grad_avg");
    if (Flag(a, "momentum")) {
      l.state.push_back("momentum_buffer");
      l.hyper.push_back("momentum");
    }
    return l;
  }
  if (op == "adadelta_update") {
    return {{"square_avg", "acc_delta"}, {"step", "lr", "rho", "eps", "weight_decay"}};
  }
  if (op == "ftrl_update") {
    return {{"accumulate", "z"}, {"lr", "lr_power", "lambda1", "lambda2", "beta", "weight_decay"}};
  }
  throw Error(StrCat("optim: ", op, " is not an optimizer update op"));
}

namespace {

// The tensors of one update call, by role, with the hyper-parameters read on the host (CPU).
struct UpdateArgs {
  const char* op;
  UpdateLayout layout;
  Tensor p, g;
  std::vector<Tensor> state;
  std::vector<Tensor> hyper;
  double H(size_t i) const { return hyper[i].data<double>()[0]; }
};

void CheckSame(const TensorMeta& p, const TensorMeta& t, const std::string& op,
               const std::string& what) {
  ONEFLOW_CHECK(p.shape == t.shape && p.dtype == t.dtype, op, ": ", what, " has shape ", t.shape,
                " and dtype ", DTypeName(t.dtype), " but the parameter has ", p.shape, " and ",
                DTypeName(p.dtype));
}

// Every update op: (param, grad, state..., hyper...) -> param (updated in place).
template <const char* kName>
std::vector<TensorMeta> InferUpdate(const std::vector<TensorMeta>& in, const Attrs& a) {
  const UpdateLayout l = LayoutOf(kName, a);
  const size_t n = 2 + l.state.size() + l.hyper.size();
  ONEFLOW_CHECK(in.size() == n, kName, ": expected ", n, " tensors (param, grad, ", l.state.size(),
                " state, ", l.hyper.size(), " hyper-parameters), got ", in.size());
  CheckSame(in[0], in[1], kName, "the gradient");
  for (size_t i = 0; i < l.state.size(); ++i) CheckSame(in[0], in[2 + i], kName, l.state[i]);
  for (size_t i = 0; i < l.hyper.size(); ++i) {
    const TensorMeta& h = in[2 + l.state.size() + i];
    ONEFLOW_CHECK(h.shape.numel() == 1 && h.dtype == DType::kFloat64, kName, ": ", l.hyper[i],
                  " must be a 0-dim float64 tensor, got shape ", h.shape, " and dtype ",
                  DTypeName(h.dtype));
  }
  return {in[0]};
}

UpdateArgs Unpack(const char* op, const std::vector<Tensor>& in, const Attrs& a) {
  UpdateArgs r{op, LayoutOf(op, a), in[0], Contig(in[1]), {}, {}};
  ONEFLOW_CHECK(r.p.is_contiguous(), op, ": the parameter must be contiguous");
  size_t k = 2;
  for (size_t i = 0; i < r.layout.state.size(); ++i, ++k) {
    ONEFLOW_CHECK(in[k].is_contiguous(), op, ": ", r.layout.state[i], " must be contiguous");
    r.state.push_back(in[k]);
  }
  for (; k < in.size(); ++k) r.hyper.push_back(in[k]);
  return r;
}

// step += 1 (the step hyper-parameter is state too); returns the new count.
double NextStep(const UpdateArgs& u) {
  double* s = u.hyper[0].data<double>();
  *s += 1;
  u.hyper[0].storage()->bump_version();
  return *s;
}

std::vector<Tensor> Done(const UpdateArgs& u) {
  u.p.storage()->bump_version();
  for (const Tensor& s : u.state) s.storage()->bump_version();
  return {u.p};
}

// ---------------------------------------------------------------- the CPU kernels
// Flags are hoisted out of the loops; each loop is one pass over param, grad and state.

constexpr char kSgd[] = "sgd_update";
std::vector<Tensor> SgdCpu(const std::vector<Tensor>& in, const Attrs& a,
                           const std::vector<TensorMeta>&) {
  UpdateArgs u = Unpack(kSgd, in, a);
  const bool momentum = Flag(a, "momentum"), nesterov = Flag(a, "nesterov");
  const double sign = Flag(a, "maximize") ? -1 : 1;
  DispatchFloating(u.p.dtype(), kSgd, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = u.p.data<T>();
    const T* g = u.g.data<T>();
    const T lr = static_cast<T>(u.H(0) * sign), wd = static_cast<T>(u.H(1));
    const int64_t n = u.p.numel();
    if (!momentum) {
      for (int64_t i = 0; i < n; ++i) p[i] -= lr * (g[i] + wd * p[i]);
      return;
    }
    T* buf = u.state[0].data<T>();
    const T beta = static_cast<T>(u.H(2)), keep = static_cast<T>(1 - u.H(3));
    for (int64_t i = 0; i < n; ++i) {
      const T d = g[i] + wd * p[i];
      const T b = beta * buf[i] + keep * d;
      buf[i] = b;
      p[i] -= lr * (nesterov ? d + beta * b : b);
    }
  });
  return Done(u);
}

// Adam's moments for one update (Adam and LAMB): after NextStep, from the hyper-parameters
// (step, lr, beta1, beta2, eps, weight_decay). Direction(i, d) updates m and v (and vmax) at i
// with the gradient d and returns r = m_hat / (sqrt(v_hat) + eps), bias-corrected unless
// do_bias_correction is off.
template <typename T>
struct AdamMoments {
  T *m, *v, *vmax;
  T b1, b2, c1, c2, bc1, sq_bc2, eps;
  AdamMoments(const UpdateArgs& u, const Attrs& a, double step) {
    const bool correct = Flag(a, "do_bias_correction");
    const double db1 = u.H(2), db2 = u.H(3);
    m = u.state[0].data<T>();
    v = u.state[1].data<T>();
    vmax = u.state.size() == 3 ? u.state[2].data<T>() : nullptr;
    b1 = static_cast<T>(db1), b2 = static_cast<T>(db2);
    c1 = static_cast<T>(1 - db1), c2 = static_cast<T>(1 - db2);
    bc1 = static_cast<T>(correct ? 1 - std::pow(db1, step) : 1);
    sq_bc2 = static_cast<T>(std::sqrt(correct ? 1 - std::pow(db2, step) : 1));
    eps = static_cast<T>(u.H(4));
  }
  T Direction(int64_t i, T d) const {
    const T mi = b1 * m[i] + c1 * d;
    const T vi = b2 * v[i] + c2 * d * d;
    m[i] = mi;
    v[i] = vi;
    T vv = vi;
    if (vmax) {
      vv = std::max(vmax[i], vi);
      vmax[i] = vv;
    }
    return (mi / bc1) / (std::sqrt(vv) / sq_bc2 + eps);
  }
};

// Adam (OneFlow's adam_update): d = g + l2 * p; p -= lr * r + lr * wd * p (the old p), with
// l2 = weight_decay unless decoupled (AdamW), wd = weight_decay when decoupled.
constexpr char kAdam[] = "adam_update";
std::vector<Tensor> AdamCpu(const std::vector<Tensor>& in, const Attrs& a,
                            const std::vector<TensorMeta>&) {
  UpdateArgs u = Unpack(kAdam, in, a);
  const double step = NextStep(u), lr = u.H(1), wd = u.H(5);
  const bool decoupled = Flag(a, "decoupled");
  const double sign = Flag(a, "maximize") ? -1 : 1;
  DispatchFloating(u.p.dtype(), kAdam, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const AdamMoments<T> mom(u, a, step);
    T* p = u.p.data<T>();
    const T* g = u.g.data<T>();
    const T l2 = decoupled ? T(0) : static_cast<T>(wd);
    const T dwd = decoupled ? static_cast<T>(lr * wd) : T(0);
    const T tlr = static_cast<T>(lr), tsign = static_cast<T>(sign);
    const int64_t n = u.p.numel();
    for (int64_t i = 0; i < n; ++i) {
      const T pi = p[i];
      p[i] = pi - tlr * mom.Direction(i, tsign * g[i] + l2 * pi) - dwd * pi;
    }
  });
  return Done(u);
}

// LAMB (OneFlow's lamb_update): Adam's direction r (l2 in the gradient unless decoupled),
// trust ratio ||p|| / ||r|| (1 when either is 0), then p -= lr * trust * (r + wd * p) with wd
// only when decoupled. Two passes: the norms need all of r, kept in a scratch buffer.
constexpr char kLamb[] = "lamb_update";
std::vector<Tensor> LambCpu(const std::vector<Tensor>& in, const Attrs& a,
                            const std::vector<TensorMeta>&) {
  UpdateArgs u = Unpack(kLamb, in, a);
  const double step = NextStep(u), lr = u.H(1), wd = u.H(5);
  const bool decoupled = Flag(a, "decoupled");
  DispatchFloating(u.p.dtype(), kLamb, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const AdamMoments<T> mom(u, a, step);
    T* p = u.p.data<T>();
    const T* g = u.g.data<T>();
    const int64_t n = u.p.numel();
    std::vector<T> r(static_cast<size_t>(n));
    const T l2 = decoupled ? T(0) : static_cast<T>(wd);
    double w2 = 0, r2 = 0;
    for (int64_t i = 0; i < n; ++i) {
      r[i] = mom.Direction(i, g[i] + l2 * p[i]);
      w2 += static_cast<double>(p[i]) * p[i];
      r2 += static_cast<double>(r[i]) * r[i];
    }
    const double trust = w2 > 0 && r2 > 0 ? std::sqrt(w2) / std::sqrt(r2) : 1.0;
    const T step_lr = static_cast<T>(lr * trust), dwd = decoupled ? static_cast<T>(wd) : T(0);
    for (int64_t i = 0; i < n; ++i) p[i] -= step_lr * (r[i] + dwd * p[i]);
  });
  return Done(u);
}

// Adagrad: step += 1; clr = lr / (1 + (step - 1) * lr_decay); d = g + wd * p; sum += d^2;
// p -= clr * d / (sqrt(sum) + eps).
constexpr char kAdagrad[] = "adagrad_update";
std::vector<Tensor> AdagradCpu(const std::vector<Tensor>& in, const Attrs& a,
                               const std::vector<TensorMeta>&) {
  UpdateArgs u = Unpack(kAdagrad, in, a);
  const double step = NextStep(u);
  const double clr = u.H(1) / (1 + (step - 1) * u.H(2));
  const double sign = Flag(a, "maximize") ? -1 : 1;
  DispatchFloating(u.p.dtype(), kAdagrad, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = u.p.data<T>();
    const T* g = u.g.data<T>();
    T* sum = u.state[0].data<T>();
    const T tclr = static_cast<T>(clr), eps = static_cast<T>(u.H(3)), wd = static_cast<T>(u.H(4));
    const T tsign = static_cast<T>(sign);
    const int64_t n = u.p.numel();
    for (int64_t i = 0; i < n; ++i) {
      const T d = tsign * g[i] + wd * p[i];
      const T s = sum[i] + d * d;
      sum[i] = s;
      p[i] -= tclr * d / (std::sqrt(s) + eps);
    }
  });
  return Done(u);
}

// RMSprop (OneFlow's rmsprop_update, eps inside the square root): d = g + wd * p;
// sa = alpha * sa + (1 - alpha) * d^2; centered: ga likewise and the variance sa - ga^2;
// r = d / sqrt(var + eps); with momentum buf = momentum * buf + r, p -= lr * buf; else
// p -= lr * r.
constexpr char kRmsprop[] = "rmsprop_update";
std::vector<Tensor> RmspropCpu(const std::vector<Tensor>& in, const Attrs& a,
                               const std::vector<TensorMeta>&) {
  UpdateArgs u = Unpack(kRmsprop, in, a);
  NextStep(u);
  const bool centered = Flag(a, "centered"), momentum = Flag(a, "momentum");
  const double sign = Flag(a, "maximize") ? -1 : 1;
  DispatchFloating(u.p.dtype(), kRmsprop, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = u.p.data<T>();
    const T* g = u.g.data<T>();
    T* sa = u.state[0].data<T>();
    T* ga = centered ? u.state[1].data<T>() : nullptr;
    T* buf = momentum ? u.state.back().data<T>() : nullptr;
    const T lr = static_cast<T>(u.H(1)), alpha = static_cast<T>(u.H(2));
    const T eps = static_cast<T>(u.H(3)), wd = static_cast<T>(u.H(4));
    const T beta = momentum ? static_cast<T>(u.H(5)) : T(0), keep = T(1) - alpha;
    const T tsign = static_cast<T>(sign);
    const int64_t n = u.p.numel();
    for (int64_t i = 0; i < n; ++i) {
      const T d = tsign * g[i] + wd * p[i];
      const T s = alpha * sa[i] + keep * d * d;
      sa[i] = s;
      T var = s;
      if (ga) {
        const T m = alpha * ga[i] + keep * d;
        ga[i] = m;
        var = s - m * m;
      }
      const T r = d / std::sqrt(var + eps);
      if (buf) {
        const T b = beta * buf[i] + r;
        buf[i] = b;
        p[i] -= lr * b;
      } else {
        p[i] -= lr * r;
      }
    }
  });
  return Done(u);
}

// Adadelta: d = g + wd * p; sa = rho * sa + (1 - rho) * d^2;
// delta = sqrt(acc + eps) / sqrt(sa + eps) * d; acc = rho * acc + (1 - rho) * delta^2;
// p -= lr * delta.
constexpr char kAdadelta[] = "adadelta_update";
std::vector<Tensor> AdadeltaCpu(const std::vector<Tensor>& in, const Attrs& a,
                                const std::vector<TensorMeta>&) {
  UpdateArgs u = Unpack(kAdadelta, in, a);
  NextStep(u);
  const double sign = Flag(a, "maximize") ? -1 : 1;
  DispatchFloating(u.p.dtype(), kAdadelta, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = u.p.data<T>();
    const T* g = u.g.data<T>();
    T* sa = u.state[0].data<T>();
    T* acc = u.state[1].data<T>();
    const T lr = static_cast<T>(u.H(1)), rho = static_cast<T>(u.H(2));
    const T eps = static_cast<T>(u.H(3)), wd = static_cast<T>(u.H(4)), keep = T(1) - rho;
    const T tsign = static_cast<T>(sign);
    const int64_t n = u.p.numel();
    for (int64_t i = 0; i < n; ++i) {
      const T d = tsign * g[i] + wd * p[i];
      const T s = rho * sa[i] + keep * d * d;
      sa[i] = s;
      const T delta = std::sqrt(acc[i] + eps) / std::sqrt(s + eps) * d;
      acc[i] = rho * acc[i] + keep * delta * delta;
      p[i] -= lr * delta;
    }
  });
  return Done(u);
}

// FTRL-proximal (OneFlow's ftrl_update; lr_power is negative, -0.5 by default):
// d = g + wd * p; n' = n + d^2; sigma = (n'^lr_power - n^lr_power) / lr; z += d - sigma * p;
// p = |z| < lambda1 ? 0 : (sign(z) * lambda1 - z) / ((beta + n'^lr_power) / lr + lambda2).
constexpr char kFtrl[] = "ftrl_update";
std::vector<Tensor> FtrlCpu(const std::vector<Tensor>& in, const Attrs& a,
                            const std::vector<TensorMeta>&) {
  UpdateArgs u = Unpack(kFtrl, in, a);
  DispatchFloating(u.p.dtype(), kFtrl, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = u.p.data<T>();
    const T* g = u.g.data<T>();
    T* acc = u.state[0].data<T>();
    T* z = u.state[1].data<T>();
    const T lr = static_cast<T>(u.H(0)), power = static_cast<T>(u.H(1));
    const T l1 = static_cast<T>(u.H(2)), l2 = static_cast<T>(u.H(3));
    const T beta = static_cast<T>(u.H(4)), wd = static_cast<T>(u.H(5));
    const T inv_lr = T(1) / lr;
    const int64_t n = u.p.numel();
    for (int64_t i = 0; i < n; ++i) {
      const T pi = p[i], d = g[i] + wd * pi;
      const T next = acc[i] + d * d;
      const T pow_next = std::pow(next, power);
      const T sigma = (pow_next - std::pow(acc[i], power)) * inv_lr;
      const T zi = z[i] + d - sigma * pi;
      p[i] = std::abs(zi) < l1 ? T(0)
                               : (std::copysign(l1, zi) - zi) / ((beta + pow_next) * inv_lr + l2);
      acc[i] = next;
      z[i] = zi;
    }
  });
  return Done(u);
}

// ---------------------------------------------------------------- multi-tensor forms
// multi_tensor_sgd_update / multi_tensor_adam_update, attrs count and the single op's flags:
// `count` records (param, grad, state...[, step]) and then the single op's hyper-parameters
// without the step, shared by every record. The update of each record is the single op's.

size_t RecordSize(const UpdateLayout& l) {
  const bool counts_steps = !l.hyper.empty() && l.hyper[0] == "step";
  return 2 + l.state.size() + (counts_steps ? 1 : 0);
}

// The single op's inputs for record k.
std::vector<Tensor> RecordInputs(const std::vector<Tensor>& in, int64_t count, size_t per,
                                 int64_t k) {
  std::vector<Tensor> one(in.begin() + k * per, in.begin() + (k + 1) * per);
  one.insert(one.end(), in.begin() + count * per, in.end());
  return one;
}

template <const char* kName, const char* kSingle>
std::vector<TensorMeta> InferMulti(const std::vector<TensorMeta>& in, const Attrs& a) {
  ONEFLOW_CHECK(a.Has("count"), kName, ": needs the attr count");
  const int64_t count = a.Get<int64_t>("count");
  const UpdateLayout l = LayoutOf(kSingle, a);
  const size_t per = RecordSize(l), shared = l.hyper.size() - (per - 2 - l.state.size());
  ONEFLOW_CHECK(count >= 1 && in.size() == count * per + shared, kName, ": expected ", count,
                " records of ", per, " tensors and ", shared, " hyper-parameters, got ", in.size(),
                " tensors");
  std::vector<TensorMeta> out;
  std::vector<TensorMeta> one(per + shared);
  for (int64_t k = 0; k < count; ++k) {
    for (size_t i = 0; i < per; ++i) one[i] = in[k * per + i];
    for (size_t i = 0; i < shared; ++i) one[per + i] = in[count * per + i];
    InferUpdate<kSingle>(one, a);
    ONEFLOW_CHECK(in[k * per].dtype == in[0].dtype && in[k * per].device == in[0].device, kName,
                  ": every parameter must have one dtype and device; parameter ", k, " is ",
                  DTypeName(in[k * per].dtype), " on ", in[k * per].device.ToString(),
                  ", parameter 0 ", DTypeName(in[0].dtype), " on ", in[0].device.ToString());
    out.push_back(in[k * per]);
  }
  return out;
}

template <const char* kSingle,
          std::vector<Tensor> (*kKernel)(const std::vector<Tensor>&, const Attrs&,
                                         const std::vector<TensorMeta>&)>
std::vector<Tensor> MultiCpu(const std::vector<Tensor>& in, const Attrs& a,
                             const std::vector<TensorMeta>& out) {
  const int64_t count = a.Get<int64_t>("count");
  const size_t per = RecordSize(LayoutOf(kSingle, a));
  std::vector<Tensor> res;
  for (int64_t k = 0; k < count; ++k) {
    res.push_back(kKernel(RecordInputs(in, count, per, k), a, {out[k]})[0]);
  }
  return res;
}

constexpr char kMultiSgd[] = "multi_tensor_sgd_update";
constexpr char kMultiAdam[] = "multi_tensor_adam_update";

}  // namespace

ONEFLOW_REGISTER_OP(multi_tensor_sgd_update)
    .Inputs(-1)
    .Infer(InferMulti<kMultiSgd, kSgd>)
    .NonDifferentiable()
    .Kernel(DeviceType::kCPU, MultiCpu<kSgd, SgdCpu>);
ONEFLOW_REGISTER_OP(multi_tensor_adam_update)
    .Inputs(-1)
    .Infer(InferMulti<kMultiAdam, kAdam>)
    .NonDifferentiable()
    .Kernel(DeviceType::kCPU, MultiCpu<kAdam, AdamCpu>);

#define ONEFLOW_REGISTER_UPDATE(name, var, kernel) \
  ONEFLOW_REGISTER_OP(name)                        \
      .Inputs(-1)                                  \
      .Infer(InferUpdate<var>)                     \
      .NonDifferentiable()                         \
      .Kernel(DeviceType::kCPU, kernel)

ONEFLOW_REGISTER_UPDATE(sgd_update, kSgd, SgdCpu);
ONEFLOW_REGISTER_UPDATE(adam_update, kAdam, AdamCpu);
ONEFLOW_REGISTER_UPDATE(lamb_update, kLamb, LambCpu);
ONEFLOW_REGISTER_UPDATE(adagrad_update, kAdagrad, AdagradCpu);
ONEFLOW_REGISTER_UPDATE(rmsprop_update, kRmsprop, RmspropCpu);
ONEFLOW_REGISTER_UPDATE(adadelta_update, kAdadelta, AdadeltaCpu);
ONEFLOW_REGISTER_UPDATE(ftrl_update, kFtrl, FtrlCpu);
#undef ONEFLOW_REGISTER_UPDATE

Attrs UpdateFlags(const std::string& op, const std::map<std::string, bool>& flags) {
  // Attr names are stored by pointer: the op's flags as literals.
  static const std::map<std::string, std::vector<const char*>> kFlags = {
      {"sgd_update", {"momentum", "nesterov", "maximize"}},
      {"adam_update", {"amsgrad", "decoupled", "do_bias_correction", "maximize"}},
      {"lamb_update", {"decoupled", "do_bias_correction"}},
      {"adagrad_update", {"maximize"}},
      {"rmsprop_update", {"centered", "momentum", "maximize"}},
      {"adadelta_update", {"maximize"}},
      {"ftrl_update", {}}};
  auto it = kFlags.find(op);
  ONEFLOW_CHECK(it != kFlags.end(), "optim: ", op, " is not an optimizer update op");
  // (multi-tensor forms: MultiUpdate adds their count)
  Attrs a;
  for (const auto& [name, value] : flags) {
    const char* literal = nullptr;
    for (const char* f : it->second) {
      if (name == f) literal = f;
    }
    ONEFLOW_CHECK(literal != nullptr, op, ": no flag named '", name, "'");
    a.Set(literal, value);
  }
  return a;
}

void Update(const std::string& op, const std::vector<Tensor>& tensors, const Attrs& attrs) {
  const OpDef& def = OpRegistry::Global().Get(op);
  LayoutOf(op, attrs);  // refuses ops that are not updates
  CallOp(def, tensors, attrs);
}

void MultiUpdate(const std::string& op, const std::vector<Tensor>& tensors, int64_t count,
                 const Attrs& attrs) {
  ONEFLOW_CHECK(op == "sgd_update" || op == "adam_update", "optim: ", op,
                " has no multi-tensor form (sgd_update and adam_update have)");
  Attrs a = attrs;
  a.Set("count", count);
  CallOp(OpRegistry::Global().Get("multi_tensor_" + op), tensors, a);
}

Tensor HyperLike(const Tensor& t, double value) {
  return fn::constant_like(t, Shape({}), value, DType::kFloat64);
}

void SgdUpdate(const Tensor& param, const Tensor& grad, const Tensor& buf, double lr,
               double momentum, double dampening, bool nesterov, double weight_decay,
               bool maximize) {
  ONEFLOW_CHECK(momentum == 0 || buf.defined(), "sgd_update: momentum ", momentum,
                " needs a momentum buffer");
  Attrs a;
  a.Set("momentum", momentum != 0).Set("nesterov", nesterov).Set("maximize", maximize);
  std::vector<Tensor> in = {param, grad};
  if (momentum != 0) in.push_back(buf);
  in.push_back(HyperLike(param, lr));
  in.push_back(HyperLike(param, weight_decay));
  if (momentum != 0) {
    in.push_back(HyperLike(param, momentum));
    in.push_back(HyperLike(param, dampening));
  }
  CallOp(OP(sgd_update), in, a);
}

void AdamUpdate(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const Tensor& step,
                double lr, double beta1, double beta2, double eps, double weight_decay,
                bool amsgrad, bool decoupled) {
  ONEFLOW_CHECK(!amsgrad || max_exp_avg_sq.defined(), "adam_update: amsgrad needs max_exp_avg_sq");
  Attrs a;
  a.Set("amsgrad", amsgrad).Set("decoupled", decoupled).Set("do_bias_correction", true);
  std::vector<Tensor> in = {param, grad, exp_avg, exp_avg_sq};
  if (amsgrad) in.push_back(max_exp_avg_sq);
  in.push_back(step);
  for (double h : {lr, beta1, beta2, eps, weight_decay}) in.push_back(HyperLike(param, h));
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
}

void SGD::step() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    if (options_.momentum != 0 && !momentum_buffers_[i].defined()) {
      momentum_buffers_[i] = fn::zeros_like(params_[i]);
    }
    SgdUpdate(params_[i], g, momentum_buffers_[i], options_.lr, options_.momentum,
              options_.dampening, options_.nesterov, options_.weight_decay);
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
  step_.resize(params_.size());
  exp_avg_.resize(params_.size());
  exp_avg_sq_.resize(params_.size());
  max_exp_avg_sq_.resize(params_.size());
}

void Adam::step() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    if (!exp_avg_[i].defined()) {
      step_[i] = HyperLike(params_[i], 0);
      exp_avg_[i] = fn::zeros_like(params_[i]);
      exp_avg_sq_[i] = fn::zeros_like(params_[i]);
      if (options_.amsgrad) max_exp_avg_sq_[i] = fn::zeros_like(params_[i]);
    }
    AdamUpdate(params_[i], g, exp_avg_[i], exp_avg_sq_[i], max_exp_avg_sq_[i], step_[i],
               options_.lr, options_.beta1, options_.beta2, options_.eps, options_.weight_decay,
               options_.amsgrad, decoupled_);
  }
}

}  // namespace optim
}  // namespace oneflow
