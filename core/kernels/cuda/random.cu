// CUDA kernels of the random ops (core/ops/random.cc): drawn on the device by the generator the
// CPU uses (core/ops/counter_rng.h, kernels in kernels/random.cuh), with the seed and counter
// offset as kernel arguments (or an RngCapture's device state, core/ops/random_state.h): no host
// draw, no copy, no host wait. multinomial still draws on the host (creation.cu).
#include "core/kernels/cuda/kernels/random.cuh"
#include "core/op_registry.h"
#include "core/ops/random_state.h"

namespace oneflow {
namespace {

// Launches kernel<DevT<T>> over t's elements for each floating dtype (half types included).
template <typename Launch>
void ForFloating(const Tensor& t, const char* op, Launch launch) {
  DispatchFloatingWithHalf(t.dtype(), op, [&](auto tag) {
    using T = cuda::DevT<typename decltype(tag)::type>;
    launch(reinterpret_cast<T*>(t.raw_data()), T{});
  });
}

std::vector<Tensor> UniformCuda(const std::vector<Tensor>&, const Attrs& a,
                                const std::vector<TensorMeta>& out) {
  Tensor t = Tensor::Empty(out[0]);
  const int64_t n = t.numel();
  if (n == 0) return {t};
  const rng::Source src = RngSource(a, t.device());
  const rng::Window w = RngWindow(a, t.shape(), "uniform");
  const double low = a.Get<double>("low"), high = a.Get<double>("high");
  cudaStream_t s = cuda::StreamFor(t.device());
  ForFloating(t, "uniform", [&](auto* p, auto tag) {
    using T = decltype(tag);
    OF_CUDA_LAUNCH(cuda::UniformKernel<T>, cuda::Blocks(n), cuda::kThreads, 0, s, n, p, src, w, low,
                   high);
  });
  return {t};
}

std::vector<Tensor> NormalCuda(const std::vector<Tensor>&, const Attrs& a,
                               const std::vector<TensorMeta>& out) {
  Tensor t = Tensor::Empty(out[0]);
  const int64_t n = t.numel();
  if (n == 0) return {t};
  const rng::Source src = RngSource(a, t.device());
  const rng::Window w = RngWindow(a, t.shape(), "normal");
  const double mean = a.Get<double>("mean"), std = a.Get<double>("std");
  cudaStream_t s = cuda::StreamFor(t.device());
  ForFloating(t, "normal", [&](auto* p, auto tag) {
    using T = decltype(tag);
    OF_CUDA_LAUNCH(cuda::NormalKernel<T>, cuda::Blocks(n), cuda::kThreads, 0, s, n, p, src, w, mean,
                   std);
  });
  return {t};
}

std::vector<Tensor> RandintCuda(const std::vector<Tensor>&, const Attrs& a,
                                const std::vector<TensorMeta>& out) {
  Tensor t = Tensor::Empty(out[0]);
  const int64_t n = t.numel();
  if (n == 0) return {t};
  const rng::Source src = RngSource(a, t.device());
  const rng::Window w = RngWindow(a, t.shape(), "randint");
  const int64_t low = a.Get<int64_t>("low"), high = a.Get<int64_t>("high");
  cudaStream_t s = cuda::StreamFor(t.device());
  DispatchAll(t.dtype(), "randint", [&](auto tag) {
    using T = typename decltype(tag)::type;
    OF_CUDA_LAUNCH(cuda::RandintKernel<T>, cuda::Blocks(n), cuda::kThreads, 0, s, n, t.data<T>(),
                   src, w, low, high);
  });
  return {t};
}

std::vector<Tensor> RandpermCuda(const std::vector<Tensor>&, const Attrs& a,
                                 const std::vector<TensorMeta>& out) {
  Tensor t = Tensor::Empty(out[0]);
  const int64_t n = t.numel();
  if (n == 0) return {t};
  OF_CUDA_LAUNCH(cuda::RandpermKernel, 1, 1, 0, cuda::StreamFor(t.device()), n, t.data<int64_t>(),
                 RngSource(a, t.device()));
  return {t};
}

std::vector<Tensor> DropoutMaskCuda(const std::vector<Tensor>&, const Attrs& a,
                                    const std::vector<TensorMeta>& out) {
  Tensor t = Tensor::Empty(out[0]);
  const int64_t n = t.numel();
  if (n == 0) return {t};
  const rng::Source src = RngSource(a, t.device());
  const rng::Window w = RngWindow(a, t.shape(), "dropout");
  const double p = a.Get<double>("p"), scale = 1.0 / (1.0 - p);
  cudaStream_t s = cuda::StreamFor(t.device());
  ForFloating(t, "dropout", [&](auto* q, auto tag) {
    using T = decltype(tag);
    OF_CUDA_LAUNCH(cuda::DropoutMaskKernel<T>, cuda::Blocks(n), cuda::kThreads, 0, s, n, q, src, w,
                   p, scale);
  });
  return {t};
}

}  // namespace

ONEFLOW_REGISTER_KERNEL(uniform, kCUDA, UniformCuda);
ONEFLOW_REGISTER_KERNEL(normal, kCUDA, NormalCuda);
ONEFLOW_REGISTER_KERNEL(randint, kCUDA, RandintCuda);
ONEFLOW_REGISTER_KERNEL(randperm, kCUDA, RandpermCuda);
ONEFLOW_REGISTER_KERNEL(dropout_mask, kCUDA, DropoutMaskCuda);

}  // namespace oneflow
