// CUDA kernels of the optimizer update ops in core/optim.h (sgd, adam, lamb, adagrad, rmsprop,
// adadelta, ftrl), each one fused kernel per parameter that reads every tensor once and writes
// the parameter and its state in place (LAMB: two, around its norms). The hyper-parameters are
// 0-dim float64 tensors on the device, read by every thread (no host read, so a CUDA graph
// replays a new learning rate); a step count is incremented by a one-thread kernel first. The
// arithmetic is the CPU kernel's (core/optim.cc), in the parameter's type, so results agree up
// to rounding (nvcc may fuse a multiply-add the CPU rounds twice).
//
//   flow._C.optim_update_("adam_update", [p, g, m, v, step, lr, b1, b2, eps, wd], {...})
#include <cmath>
#include <cstdint>

#include "core/functional.h"
#include "core/kernels/cuda/cuda_util.h"
#include "core/op_registry.h"
#include "core/optim.h"

namespace oneflow {

namespace {

constexpr int kMaxState = 3, kMaxHyper = 6;

// Device pointers of one update call, by role.
template <typename T>
struct Ptrs {
  T* p;
  const T* g;
  T* state[kMaxState];
  const double* hyper[kMaxHyper];
  double* step;  // hyper[0] when the op counts steps, else null
  int64_t n;
};

bool Flag(const Attrs& a, const char* name) { return a.Has(name) && a.Get<bool>(name); }

__global__ void IncrementKernel(double* step) { *step += 1; }

template <typename T>
Ptrs<T> Unpack(const char* op, const std::vector<Tensor>& in, const Attrs& a, const Tensor& g,
               bool counts_steps) {
  const optim::UpdateLayout l = optim::LayoutOf(op, a);
  ONEFLOW_CHECK(in[0].is_contiguous(), op, ": the parameter must be contiguous");
  Ptrs<T> r{};
  r.p = in[0].data<T>();
  r.g = g.data<T>();
  r.n = in[0].numel();
  size_t k = 2;
  for (size_t i = 0; i < l.state.size(); ++i, ++k) {
    ONEFLOW_CHECK(in[k].is_contiguous(), op, ": ", l.state[i], " must be contiguous");
    r.state[i] = in[k].data<T>();
  }
  for (size_t i = 0; k < in.size(); ++i, ++k) r.hyper[i] = in[k].data<double>();
  r.step = counts_steps ? in[2 + l.state.size()].data<double>() : nullptr;
  return r;
}

template <typename K>
std::vector<Tensor> Launch(const char* op, const std::vector<Tensor>& in, const Attrs& a,
                           bool counts_steps, K kernel) {
  Tensor g = fn::contiguous(in[1]);
  DispatchFloating(in[0].dtype(), op, [&](auto tag) {
    using U = typename decltype(tag)::type;
    Ptrs<U> ptrs = Unpack<U>(op, in, a, g, counts_steps);
    cudaStream_t stream = cuda::StreamFor(in[0].device());
    if (ptrs.step) IncrementKernel<<<1, 1, 0, stream>>>(ptrs.step);
    if (ptrs.n > 0) kernel(ptrs, stream);
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
  });
  in[0].storage()->bump_version();
  return {in[0]};
}

// ---------------------------------------------------------------- sgd_update
template <typename T>
__global__ void SgdKernel(Ptrs<T> a, bool momentum, bool nesterov, T sign) {
  const T lr = static_cast<T>(*a.hyper[0]) * sign, wd = static_cast<T>(*a.hyper[1]);
  ONEFLOW_CUDA_GRID_LOOP(i, a.n) {
    const T pi = a.p[i], d = a.g[i] + wd * pi;
    if (!momentum) {
      a.p[i] = pi - lr * d;
      continue;
    }
    const T beta = static_cast<T>(*a.hyper[2]), keep = static_cast<T>(1 - *a.hyper[3]);
    const T b = beta * a.state[0][i] + keep * d;
    a.state[0][i] = b;
    a.p[i] = pi - lr * (nesterov ? d + beta * b : b);
  }
}

std::vector<Tensor> SgdCuda(const std::vector<Tensor>& in, const Attrs& a,
                            const std::vector<TensorMeta>&) {
  const bool momentum = Flag(a, "momentum"), nesterov = Flag(a, "nesterov");
  const double sign = Flag(a, "maximize") ? -1 : 1;
  return Launch("sgd_update", in, a, false, [&](auto ptrs, cudaStream_t s) {
    using T = std::remove_pointer_t<decltype(ptrs.p)>;
    SgdKernel<T><<<cuda::Blocks(ptrs.n), cuda::kThreads, 0, s>>>(ptrs, momentum, nesterov,
                                                                 static_cast<T>(sign));
  });
}

// ---------------------------------------------------------------- adam_update / lamb_update
// Adam's moments and direction r = m_hat / (sqrt(v_hat) + eps) for element i.
template <typename T>
__device__ T AdamDirection(const Ptrs<T>& a, int64_t i, T d, bool correct, T* vmax) {
  const double step = *a.hyper[0], b1 = *a.hyper[2], b2 = *a.hyper[3];
  const T bc1 = correct ? static_cast<T>(1 - pow(b1, step)) : T(1);
  const T sq_bc2 = correct ? static_cast<T>(sqrt(1 - pow(b2, step))) : T(1);
  const T tb1 = static_cast<T>(b1), tb2 = static_cast<T>(b2), eps = static_cast<T>(*a.hyper[4]);
  const T mi = tb1 * a.state[0][i] + (T(1) - tb1) * d;
  const T vi = tb2 * a.state[1][i] + (T(1) - tb2) * d * d;
  a.state[0][i] = mi;
  a.state[1][i] = vi;
  T vv = vi;
  if (vmax) {
    const T old = vmax[i];
    vv = old < vi ? vi : old;
    vmax[i] = vv;
  }
  return (mi / bc1) / (sqrt(vv) / sq_bc2 + eps);
}

template <typename T>
__global__ void AdamKernel(Ptrs<T> a, bool decoupled, bool correct, bool amsgrad, T sign) {
  const T lr = static_cast<T>(*a.hyper[1]), wd = static_cast<T>(*a.hyper[5]);
  const T l2 = decoupled ? T(0) : wd, dwd = decoupled ? lr * wd : T(0);
  ONEFLOW_CUDA_GRID_LOOP(i, a.n) {
    const T pi = a.p[i];
    const T r =
        AdamDirection(a, i, sign * a.g[i] + l2 * pi, correct, amsgrad ? a.state[2] : nullptr);
    a.p[i] = pi - lr * r - dwd * pi;
  }
}

std::vector<Tensor> AdamCuda(const std::vector<Tensor>& in, const Attrs& a,
                             const std::vector<TensorMeta>&) {
  const bool decoupled = Flag(a, "decoupled"), correct = Flag(a, "do_bias_correction");
  const bool amsgrad = Flag(a, "amsgrad");
  const double sign = Flag(a, "maximize") ? -1 : 1;
  return Launch("adam_update", in, a, true, [&](auto ptrs, cudaStream_t s) {
    using T = std::remove_pointer_t<decltype(ptrs.p)>;
    AdamKernel<T><<<cuda::Blocks(ptrs.n), cuda::kThreads, 0, s>>>(ptrs, decoupled, correct, amsgrad,
                                                                  static_cast<T>(sign));
  });
}

// LAMB: pass 1 writes r into the gradient's scratch copy and sums ||p||^2, ||r||^2 (atomics
// into two doubles); pass 2 applies p -= lr * trust * (r + wd * p).
template <typename T>
__global__ void LambDirectionKernel(Ptrs<T> a, T* r, double* norms, bool decoupled, bool correct) {
  const T l2 = decoupled ? T(0) : static_cast<T>(*a.hyper[5]);
  ONEFLOW_CUDA_GRID_LOOP(i, a.n) {
    const T pi = a.p[i];
    const T ri = AdamDirection(a, i, a.g[i] + l2 * pi, correct, static_cast<T*>(nullptr));
    r[i] = ri;
    atomicAdd(&norms[0], static_cast<double>(pi) * static_cast<double>(pi));
    atomicAdd(&norms[1], static_cast<double>(ri) * static_cast<double>(ri));
  }
}

template <typename T>
__global__ void LambApplyKernel(Ptrs<T> a, const T* r, const double* norms, bool decoupled) {
  const double w = sqrt(norms[0]), rn = sqrt(norms[1]);
  const T trust = static_cast<T>(w > 0 && rn > 0 ? w / rn : 1.0);
  const T lr = static_cast<T>(*a.hyper[1]) * trust;
  const T wd = decoupled ? static_cast<T>(*a.hyper[5]) : T(0);
  ONEFLOW_CUDA_GRID_LOOP(i, a.n) { a.p[i] -= lr * (r[i] + wd * a.p[i]); }
}

std::vector<Tensor> LambCuda(const std::vector<Tensor>& in, const Attrs& a,
                             const std::vector<TensorMeta>&) {
  const bool decoupled = Flag(a, "decoupled"), correct = Flag(a, "do_bias_correction");
  Tensor scratch = fn::empty(in[0].shape(), in[0].dtype(), in[0].device());
  Tensor norms = fn::zeros(Shape({2}), DType::kFloat64, in[0].device());
  return Launch("lamb_update", in, a, true, [&](auto ptrs, cudaStream_t s) {
    using T = std::remove_pointer_t<decltype(ptrs.p)>;
    LambDirectionKernel<T><<<cuda::Blocks(ptrs.n), cuda::kThreads, 0, s>>>(
        ptrs, scratch.data<T>(), norms.data<double>(), decoupled, correct);
    LambApplyKernel<T><<<cuda::Blocks(ptrs.n), cuda::kThreads, 0, s>>>(
        ptrs, scratch.data<T>(), norms.data<double>(), decoupled);
  });
}

// ---------------------------------------------------------------- adagrad_update
template <typename T>
__global__ void AdagradKernel(Ptrs<T> a, T sign) {
  const double step = *a.hyper[0];
  const T lr = static_cast<T>(*a.hyper[1] / (1 + (step - 1) * *a.hyper[2]));
  const T eps = static_cast<T>(*a.hyper[3]), wd = static_cast<T>(*a.hyper[4]);
  ONEFLOW_CUDA_GRID_LOOP(i, a.n) {
    const T d = sign * a.g[i] + wd * a.p[i];
    const T s = a.state[0][i] + d * d;
    a.state[0][i] = s;
    a.p[i] -= lr * d / (sqrt(s) + eps);
  }
}

std::vector<Tensor> AdagradCuda(const std::vector<Tensor>& in, const Attrs& a,
                                const std::vector<TensorMeta>&) {
  const double sign = Flag(a, "maximize") ? -1 : 1;
  return Launch("adagrad_update", in, a, true, [&](auto ptrs, cudaStream_t s) {
    using T = std::remove_pointer_t<decltype(ptrs.p)>;
    AdagradKernel<T><<<cuda::Blocks(ptrs.n), cuda::kThreads, 0, s>>>(ptrs, static_cast<T>(sign));
  });
}

// ---------------------------------------------------------------- rmsprop_update
template <typename T>
__global__ void RmspropKernel(Ptrs<T> a, bool centered, bool momentum, T sign) {
  const T lr = static_cast<T>(*a.hyper[1]), alpha = static_cast<T>(*a.hyper[2]);
  const T eps = static_cast<T>(*a.hyper[3]), wd = static_cast<T>(*a.hyper[4]);
  const T beta = momentum ? static_cast<T>(*a.hyper[5]) : T(0), keep = T(1) - alpha;
  T* ga = centered ? a.state[1] : nullptr;
  T* buf = momentum ? a.state[centered ? 2 : 1] : nullptr;
  ONEFLOW_CUDA_GRID_LOOP(i, a.n) {
    const T d = sign * a.g[i] + wd * a.p[i];
    const T s = alpha * a.state[0][i] + keep * d * d;
    a.state[0][i] = s;
    T var = s;
    if (ga) {
      const T m = alpha * ga[i] + keep * d;
      ga[i] = m;
      var = s - m * m;
    }
    const T r = d / sqrt(var + eps);
    if (buf) {
      const T b = beta * buf[i] + r;
      buf[i] = b;
      a.p[i] -= lr * b;
    } else {
      a.p[i] -= lr * r;
    }
  }
}

std::vector<Tensor> RmspropCuda(const std::vector<Tensor>& in, const Attrs& a,
                                const std::vector<TensorMeta>&) {
  const bool centered = Flag(a, "centered"), momentum = Flag(a, "momentum");
  const double sign = Flag(a, "maximize") ? -1 : 1;
  return Launch("rmsprop_update", in, a, true, [&](auto ptrs, cudaStream_t s) {
    using T = std::remove_pointer_t<decltype(ptrs.p)>;
    RmspropKernel<T><<<cuda::Blocks(ptrs.n), cuda::kThreads, 0, s>>>(ptrs, centered, momentum,
                                                                     static_cast<T>(sign));
  });
}

// ---------------------------------------------------------------- adadelta_update
template <typename T>
__global__ void AdadeltaKernel(Ptrs<T> a, T sign) {
  const T lr = static_cast<T>(*a.hyper[1]), rho = static_cast<T>(*a.hyper[2]);
  const T eps = static_cast<T>(*a.hyper[3]), wd = static_cast<T>(*a.hyper[4]);
  const T keep = T(1) - rho;
  ONEFLOW_CUDA_GRID_LOOP(i, a.n) {
    const T d = sign * a.g[i] + wd * a.p[i];
    const T s = rho * a.state[0][i] + keep * d * d;
    a.state[0][i] = s;
    const T acc = a.state[1][i];
    const T delta = sqrt(acc + eps) / sqrt(s + eps) * d;
    a.state[1][i] = rho * acc + keep * delta * delta;
    a.p[i] -= lr * delta;
  }
}

std::vector<Tensor> AdadeltaCuda(const std::vector<Tensor>& in, const Attrs& a,
                                 const std::vector<TensorMeta>&) {
  const double sign = Flag(a, "maximize") ? -1 : 1;
  return Launch("adadelta_update", in, a, true, [&](auto ptrs, cudaStream_t s) {
    using T = std::remove_pointer_t<decltype(ptrs.p)>;
    AdadeltaKernel<T><<<cuda::Blocks(ptrs.n), cuda::kThreads, 0, s>>>(ptrs, static_cast<T>(sign));
  });
}

// ---------------------------------------------------------------- ftrl_update
template <typename T>
__global__ void FtrlKernel(Ptrs<T> a) {
  const T lr = static_cast<T>(*a.hyper[0]), power = static_cast<T>(*a.hyper[1]);
  const T l1 = static_cast<T>(*a.hyper[2]), l2 = static_cast<T>(*a.hyper[3]);
  const T beta = static_cast<T>(*a.hyper[4]), wd = static_cast<T>(*a.hyper[5]);
  const T inv_lr = T(1) / lr;
  ONEFLOW_CUDA_GRID_LOOP(i, a.n) {
    const T pi = a.p[i], d = a.g[i] + wd * pi;
    const T acc = a.state[0][i], next = acc + d * d;
    const T pow_next = pow(next, power);
    const T zi = a.state[1][i] + d - (pow_next - pow(acc, power)) * inv_lr * pi;
    a.p[i] = abs(zi) < l1 ? T(0) : (copysign(l1, zi) - zi) / ((beta + pow_next) * inv_lr + l2);
    a.state[0][i] = next;
    a.state[1][i] = zi;
  }
}

std::vector<Tensor> FtrlCuda(const std::vector<Tensor>& in, const Attrs& a,
                             const std::vector<TensorMeta>&) {
  return Launch("ftrl_update", in, a, false, [&](auto ptrs, cudaStream_t s) {
    using T = std::remove_pointer_t<decltype(ptrs.p)>;
    FtrlKernel<T><<<cuda::Blocks(ptrs.n), cuda::kThreads, 0, s>>>(ptrs);
  });
}

}  // namespace

ONEFLOW_REGISTER_KERNEL(sgd_update, kCUDA, SgdCuda);
ONEFLOW_REGISTER_KERNEL(adam_update, kCUDA, AdamCuda);
ONEFLOW_REGISTER_KERNEL(lamb_update, kCUDA, LambCuda);
ONEFLOW_REGISTER_KERNEL(adagrad_update, kCUDA, AdagradCuda);
ONEFLOW_REGISTER_KERNEL(rmsprop_update, kCUDA, RmspropCuda);
ONEFLOW_REGISTER_KERNEL(adadelta_update, kCUDA, AdadeltaCuda);
ONEFLOW_REGISTER_KERNEL(ftrl_update, kCUDA, FtrlCuda);

}  // namespace oneflow
