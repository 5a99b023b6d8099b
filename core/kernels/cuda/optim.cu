// CUDA kernels of the optimizer update ops in core/optim.h. SGD and Adam/AdamW (sgd_update,
// adam_update and their multi-tensor forms multi_tensor_sgd_update, multi_tensor_adam_update)
// run the multi-tensor kernels of kernels/optim.cuh: every parameter of a call in one launch per
// kOptimMaxBlocks chunks, after one launch that increments the step counts; float32, float64,
// float16 and bfloat16 parameters (the half types computed in float). LAMB, Adagrad, RMSprop,
// Adadelta and FTRL are one fused kernel per parameter (LAMB: two, around its norms). The
// hyper-parameters are 0-dim float64 tensors on the device, read by every thread (no host read,
// so a CUDA graph replays a new learning rate). The arithmetic is the CPU kernel's
// (core/optim.cc), so results agree up to rounding (nvcc may fuse a multiply-add the CPU rounds
// twice).
//
//   flow._C.optim_update_("adam_update", [p, g, m, v, step, lr, b1, b2, eps, wd], {...})
#include <cmath>
#include <cstdint>

#include "core/functional.h"
#include "core/kernels/cuda/cuda_dispatch.h"
#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/cuda_util.h"
#include "core/kernels/cuda/kernels/optim.cuh"
#include "core/kernels/cuda/launch.cuh"
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

// ---------------------------------------------------------------- sgd and adam, multi-tensor

// The tensors of a (multi-tensor) update call: `count` records (param, grad, state...[, step])
// followed by the shared hyper-parameters; the single-tensor ops are the count-1 case.
struct MultiArgs {
  std::vector<Tensor> p, g, step;
  std::vector<std::vector<Tensor>> state;  // state[i][k]: state i of parameter k
  std::vector<Tensor> hyper;
};

MultiArgs UnpackMulti(const char* op, const std::vector<Tensor>& in, int64_t count, size_t states,
                      bool counts_steps) {
  MultiArgs r;
  r.state.resize(states);
  const size_t per = 2 + states + (counts_steps ? 1 : 0);
  for (int64_t k = 0; k < count; ++k) {
    const size_t base = k * per;
    ONEFLOW_CHECK(in[base].is_contiguous(), op, ": parameter ", k, " must be contiguous");
    r.p.push_back(in[base]);
    r.g.push_back(fn::contiguous(in[base + 1]));
    for (size_t i = 0; i < states; ++i) {
      ONEFLOW_CHECK(in[base + 2 + i].is_contiguous(), op, ": the state of parameter ", k,
                    " must be contiguous");
      r.state[i].push_back(in[base + 2 + i]);
    }
    if (counts_steps) r.step.push_back(in[base + 2 + states]);
  }
  for (size_t i = count * per; i < in.size(); ++i) r.hyper.push_back(in[i]);
  return r;
}

// Increments every step count (one thread each).
void IncrementSteps(const std::vector<Tensor>& steps, cudaStream_t stream) {
  for (size_t first = 0; first < steps.size(); first += cuda::kOptimMaxSteps) {
    cuda::StepList list{};
    for (size_t k = first; k < steps.size() && list.count < cuda::kOptimMaxSteps; ++k) {
      list.step[list.count++] = steps[k].data<double>();
    }
    OF_CUDA_LAUNCH(cuda::IncrementStepsKernel, 1, cuda::kOptimMaxSteps, 0, stream, list);
  }
  for (const Tensor& s : steps) s.storage()->bump_version();
}

// Launches launch(list, blocks) over OptimList<U, kState> lists of every parameter's chunks.
template <typename U, int kState, typename Launch>
void ForEachLaunch(const MultiArgs& a, Launch&& launch) {
  using List = cuda::OptimList<U, kState>;
  cuda::ForEachOptimLaunch<List>(
      static_cast<int64_t>(a.p.size()), [&](int64_t k) { return a.p[k].numel(); },
      [&](List* list, int s, int64_t k) {
        list->p[s] = reinterpret_cast<U*>(a.p[k].raw_data());
        list->g[s] = reinterpret_cast<const U*>(a.g[k].raw_data());
        for (int i = 0; i < kState && i < static_cast<int>(a.state.size()); ++i) {
          list->state[i][s] = reinterpret_cast<U*>(a.state[i][k].raw_data());
        }
        list->step[s] = a.step.empty() ? nullptr : a.step[k].data<double>();
        list->n[s] = a.p[k].numel();
      },
      launch);
}

bool Flag(const Attrs& a, const char* name) { return a.Has(name) && a.Get<bool>(name); }

int64_t CountOf(const Attrs& a) { return a.Has("count") ? a.Get<int64_t>("count") : 1; }

// sgd_update and multi_tensor_sgd_update: hyper lr, weight_decay[, momentum, dampening].
std::vector<Tensor> SgdMultiCuda(const std::vector<Tensor>& in, const Attrs& a,
                                 const std::vector<TensorMeta>&) {
  const char* op = a.Has("count") ? "multi_tensor_sgd_update" : "sgd_update";
  const bool momentum = Flag(a, "momentum");
  const MultiArgs args = UnpackMulti(op, in, CountOf(a), momentum ? 1 : 0, false);
  cuda::SgdHyper h{};
  h.lr = args.hyper[0].data<double>();
  h.weight_decay = args.hyper[1].data<double>();
  if (momentum) {
    h.momentum = args.hyper[2].data<double>();
    h.dampening = args.hyper[3].data<double>();
  }
  h.sign = Flag(a, "maximize") ? -1 : 1;
  h.nesterov = Flag(a, "nesterov");
  cudaStream_t stream = cuda::StreamFor(in[0].device());
  cuda::DispatchFloatingWithHalf(in[0].dtype(), op, [&](auto tag) {
    using U = cuda::DevT<typename decltype(tag)::type>;
    ForEachLaunch<U, 1>(args, [&](const cuda::OptimList<U, 1>& list, int blocks) {
      if (momentum) {
        auto* kernel = cuda::SgdMultiKernel<U, true>;
        OF_CUDA_LAUNCH(kernel, blocks, cuda::kOptimThreads, 0, stream, list, h);
      } else {
        auto* kernel = cuda::SgdMultiKernel<U, false>;
        OF_CUDA_LAUNCH(kernel, blocks, cuda::kOptimThreads, 0, stream, list, h);
      }
    });
  });
  std::vector<Tensor> out;
  for (const Tensor& p : args.p) {
    p.storage()->bump_version();
    out.push_back(p);
  }
  for (const auto& states : args.state) {
    for (const Tensor& s : states) s.storage()->bump_version();
  }
  return out;
}

// adam_update and multi_tensor_adam_update: per parameter a step count; shared hyper lr, beta1,
// beta2, eps, weight_decay.
std::vector<Tensor> AdamMultiCuda(const std::vector<Tensor>& in, const Attrs& a,
                                  const std::vector<TensorMeta>&) {
  const char* op = a.Has("count") ? "multi_tensor_adam_update" : "adam_update";
  const bool amsgrad = Flag(a, "amsgrad");
  const MultiArgs args = UnpackMulti(op, in, CountOf(a), amsgrad ? 3 : 2, true);
  cuda::AdamHyper h{};
  h.lr = args.hyper[0].data<double>();
  h.beta1 = args.hyper[1].data<double>();
  h.beta2 = args.hyper[2].data<double>();
  h.eps = args.hyper[3].data<double>();
  h.weight_decay = args.hyper[4].data<double>();
  h.sign = Flag(a, "maximize") ? -1 : 1;
  h.decoupled = Flag(a, "decoupled");
  h.correct = Flag(a, "do_bias_correction");
  cudaStream_t stream = cuda::StreamFor(in[0].device());
  IncrementSteps(args.step, stream);
  cuda::DispatchFloatingWithHalf(in[0].dtype(), op, [&](auto tag) {
    using U = cuda::DevT<typename decltype(tag)::type>;
    if (amsgrad) {
      ForEachLaunch<U, 3>(args, [&](const cuda::OptimList<U, 3>& list, int blocks) {
        auto* kernel = cuda::AdamMultiKernel<U, true>;
        OF_CUDA_LAUNCH(kernel, blocks, cuda::kOptimThreads, 0, stream, list, h);
      });
    } else {
      ForEachLaunch<U, 2>(args, [&](const cuda::OptimList<U, 2>& list, int blocks) {
        auto* kernel = cuda::AdamMultiKernel<U, false>;
        OF_CUDA_LAUNCH(kernel, blocks, cuda::kOptimThreads, 0, stream, list, h);
      });
    }
  });
  std::vector<Tensor> out;
  for (const Tensor& p : args.p) {
    p.storage()->bump_version();
    out.push_back(p);
  }
  for (const auto& states : args.state) {
    for (const Tensor& s : states) s.storage()->bump_version();
  }
  return out;
}

// ---------------------------------------------------------------- lamb_update
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

ONEFLOW_REGISTER_KERNEL(sgd_update, kCUDA, SgdMultiCuda);
ONEFLOW_REGISTER_KERNEL(adam_update, kCUDA, AdamMultiCuda);
ONEFLOW_REGISTER_KERNEL(multi_tensor_sgd_update, kCUDA, SgdMultiCuda);
ONEFLOW_REGISTER_KERNEL(multi_tensor_adam_update, kCUDA, AdamMultiCuda);
ONEFLOW_REGISTER_KERNEL(lamb_update, kCUDA, LambCuda);
ONEFLOW_REGISTER_KERNEL(adagrad_update, kCUDA, AdagradCuda);
ONEFLOW_REGISTER_KERNEL(rmsprop_update, kCUDA, RmspropCuda);
ONEFLOW_REGISTER_KERNEL(adadelta_update, kCUDA, AdadeltaCuda);
ONEFLOW_REGISTER_KERNEL(ftrl_update, kCUDA, FtrlCuda);

}  // namespace oneflow
