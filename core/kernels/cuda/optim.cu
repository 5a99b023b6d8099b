// CUDA kernels of the optimizer updates in core/optim.cc: sgd_update and adam_update, each one
// fused kernel per parameter that reads every tensor once and writes the parameter and its
// state in place. The arithmetic is the CPU kernel's, in the parameter's type and in the same
// order, so results agree up to rounding (nvcc may fuse a multiply-add the CPU rounds twice).
#include <cmath>
#include <cstdint>

#include "core/functional.h"
#include "core/kernels/cuda/cuda_util.h"
#include "core/op_registry.h"

namespace oneflow {

namespace {

void CheckContiguousState(const Tensor& t, const char* op, const char* what) {
  ONEFLOW_CHECK(t.is_contiguous(), op, ": ", what, " must be contiguous");
}

// ---------------------------------------------------------------- sgd_update

template <typename T>
struct SgdArgs {
  T lr, sign, wd, momentum, one_minus_dampening;
  bool first, nesterov;
};

// buf is null without momentum.
template <typename T>
__global__ void SgdKernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ buf,
                          int64_t n, SgdArgs<T> a) {
  ONEFLOW_CUDA_GRID_LOOP(i, n) {
    const T pi = p[i];
    if (!buf) {
      p[i] = a.wd == T(0) ? pi - a.lr * a.sign * g[i] : pi - a.lr * (a.sign * g[i] + a.wd * pi);
      continue;
    }
    const T d = a.sign * g[i] + a.wd * pi;
    const T b = a.first ? d : a.momentum * buf[i] + a.one_minus_dampening * d;
    buf[i] = b;
    p[i] = a.nesterov ? pi - a.lr * (d + a.momentum * b) : pi - a.lr * b;
  }
}

// Inputs: param, grad[, momentum buffer]; attrs as the CPU kernel's.
std::vector<Tensor> SgdCuda(const std::vector<Tensor>& in, const Attrs& a,
                            const std::vector<TensorMeta>&) {
  const Tensor& p = in[0];
  ONEFLOW_CHECK(p.is_contiguous(), "sgd_update: the parameter must be contiguous");
  if (in.size() == 3) CheckContiguousState(in[2], "sgd_update", "the momentum buffer");
  Tensor g = fn::contiguous(in[1]);
  const double lr = a.Get<double>("lr"), momentum = a.Get<double>("momentum");
  const double dampening = a.Get<double>("dampening"), wd = a.Get<double>("weight_decay");
  const bool nesterov = a.Get<bool>("nesterov"), first = a.Get<bool>("first_step");
  const bool maximize = a.Get<bool>("maximize");
  DispatchFloating(p.dtype(), "sgd_update", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (p.numel() == 0) return;
    SgdArgs<T> args;
    args.lr = static_cast<T>(lr);
    args.sign = static_cast<T>(maximize ? -1 : 1);
    args.wd = static_cast<T>(wd);
    args.momentum = static_cast<T>(momentum);
    args.one_minus_dampening = static_cast<T>(1 - dampening);
    args.first = first;
    args.nesterov = nesterov;
    T* buf = in.size() == 3 ? in[2].data<T>() : nullptr;
    cudaStream_t stream = cuda::StreamFor(p.device());
    SgdKernel<<<cuda::Blocks(p.numel()), cuda::kThreads, 0, stream>>>(p.data<T>(), g.data<T>(), buf,
                                                                      p.numel(), args);
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
  });
  p.storage()->bump_version();
  return {p};
}

// ---------------------------------------------------------------- adam_update

template <typename T>
struct AdamArgs {
  bool decay;  // decoupled weight decay: p *= keep first
  T keep, coupled_wd, b1, b2, c1, c2, bc2_sqrt, eps, neg_step;
};

// vmax is null without amsgrad.
template <typename T>
__global__ void AdamKernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ m,
                           T* __restrict__ v, T* __restrict__ vmax, int64_t n, AdamArgs<T> a) {
  ONEFLOW_CUDA_GRID_LOOP(i, n) {
    T pi = p[i];
    if (a.decay) pi *= a.keep;
    const T d = g[i] + a.coupled_wd * pi;
    const T mi = a.b1 * m[i] + a.c1 * d;
    const T vi = a.b2 * v[i] + a.c2 * d * d;
    m[i] = mi;
    v[i] = vi;
    T vv = vi;
    if (vmax) {
      const T old = vmax[i];
      vv = old < vi ? vi : old;  // std::max, as on CPU
      vmax[i] = vv;
    }
    p[i] = pi + a.neg_step * (mi / (sqrt(vv) / a.bc2_sqrt + a.eps));
  }
}

// Inputs: param, grad, exp_avg, exp_avg_sq[, max_exp_avg_sq]; attrs as the CPU kernel's.
std::vector<Tensor> AdamCuda(const std::vector<Tensor>& in, const Attrs& a,
                             const std::vector<TensorMeta>&) {
  const Tensor& p = in[0];
  ONEFLOW_CHECK(p.is_contiguous(), "adam_update: the parameter must be contiguous");
  for (size_t i = 2; i < in.size(); ++i) CheckContiguousState(in[i], "adam_update", "a state");
  Tensor g = fn::contiguous(in[1]);
  const double lr = a.Get<double>("lr"), b1 = a.Get<double>("beta1"), b2 = a.Get<double>("beta2");
  const double eps = a.Get<double>("eps"), wd = a.Get<double>("weight_decay");
  const int64_t step = a.Get<int64_t>("step");
  const bool decoupled = a.Get<bool>("decoupled");
  const double bc1 = 1 - std::pow(b1, static_cast<double>(step));
  const double bc2 = 1 - std::pow(b2, static_cast<double>(step));
  const double step_size = lr / bc1;
  DispatchFloating(p.dtype(), "adam_update", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (p.numel() == 0) return;
    AdamArgs<T> args;
    args.decay = decoupled && wd != 0;
    args.keep = static_cast<T>(1 - lr * wd);
    args.coupled_wd = decoupled ? T(0) : static_cast<T>(wd);
    args.b1 = static_cast<T>(b1);
    args.b2 = static_cast<T>(b2);
    args.c1 = static_cast<T>(1 - b1);
    args.c2 = static_cast<T>(1 - b2);
    args.bc2_sqrt = static_cast<T>(std::sqrt(bc2));
    args.eps = static_cast<T>(eps);
    args.neg_step = static_cast<T>(-step_size);
    T* vmax = in.size() == 5 ? in[4].data<T>() : nullptr;
    cudaStream_t stream = cuda::StreamFor(p.device());
    AdamKernel<<<cuda::Blocks(p.numel()), cuda::kThreads, 0, stream>>>(
        p.data<T>(), g.data<T>(), in[2].data<T>(), in[3].data<T>(), vmax, p.numel(), args);
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
  });
  p.storage()->bump_version();
  return {p};
}

}  // namespace

ONEFLOW_REGISTER_KERNEL(sgd_update, kCUDA, SgdCuda);
ONEFLOW_REGISTER_KERNEL(adam_update, kCUDA, AdamCuda);

}  // namespace oneflow
