// CUDA kernels of the creation ops (core/ops/creation.cc; arange's and eye's kernels are
// core/kernels/cuda/kernels/creation.cuh) and of multinomial, which draws on the host from the
// probabilities copied there (a host wait). The other random ops draw on the device (random.cu).
#include <algorithm>
#include <cmath>

#include "core/functional.h"
#include "core/kernels/cuda/elementwise.cuh"
#include "core/kernels/cuda/kernels/creation.cuh"
#include "core/op_registry.h"
#include "core/shard_window.h"

namespace oneflow {

namespace {

template <typename A>
struct ConstF {
  A v;
  __device__ A operator()() const { return v; }
};

std::vector<Tensor> FullCuda(const std::vector<Tensor>&, const Attrs& a,
                             const std::vector<TensorMeta>& out) {
  Tensor t = Tensor::Empty(out[0]);
  const double value = a.Get<double>("value");
  if (t.numel() == 0) return {t};
  if (value == 0 && !std::signbit(value)) {  // zeros: all bits zero in every dtype
    ONEFLOW_CUDA_CHECK(cudaMemsetAsync(t.raw_data(), 0, t.numel() * SizeOf(t.dtype()),
                                       cuda::StreamFor(t.device())));
    return {t};
  }
  DispatchWithHalf(t.dtype(), "fill_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    // The half types round from float on the device as Half(float) does on the host.
    using A = cuda::Acc<cuda::DevT<T>>;
    cuda::MapContiguous<T>("full", t, ConstF<A>{static_cast<A>(value)});
  });
  return {t};
}

std::vector<Tensor> ArangeCuda(const std::vector<Tensor>&, const Attrs& a,
                               const std::vector<TensorMeta>& out) {
  Tensor t = Tensor::Empty(out[0]);
  const double start = a.Get<double>("start"), step = a.Get<double>("step");
  DispatchAll(t.dtype(), "arange", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t n = t.numel();
    if (n == 0) return;
    cuda::LaunchArange(n, t.data<T>(), start, step, cuda::StreamFor(t.device()));
  });
  return {t};
}

std::vector<Tensor> EyeCuda(const std::vector<Tensor>&, const Attrs& a,
                            const std::vector<TensorMeta>& out) {
  Tensor t = Tensor::Empty(out[0]);
  const int64_t m = t.shape()[1];
  // Under a shard window only the window's part of the diagonal (core/shard_window.h).
  const auto [first, k] =
      WindowDiagonal(a.Has("shard_start") ? a.Get<std::vector<int64_t>>("shard_start")
                                          : std::vector<int64_t>{0, 0},
                     t.shape());
  DispatchAll(t.dtype(), "eye", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (t.numel() == 0) return;
    cudaStream_t stream = cuda::StreamFor(t.device());
    ONEFLOW_CUDA_CHECK(cudaMemsetAsync(t.raw_data(), 0, t.numel() * sizeof(T), stream));
    if (k > 0) cuda::LaunchEyeDiagonal(k, t.data<T>() + first, m, stream);
  });
  return {t};
}

// ---------------------------------------------------------------- multinomial

// multinomial's CPU kernel on a host copy of the probabilities (a host wait, reported under
// oneflow.cuda.set_sync_debug_mode), its samples copied to the device. CopyBytes waits for the
// host-to-device copy, so the host result may be freed on return.
std::vector<Tensor> MultinomialCuda(const std::vector<Tensor>& in, const Attrs& a,
                                    const std::vector<TensorMeta>& out) {
  KernelFn cpu_kernel =
      OpRegistry::Global().Get("multinomial").kernels[static_cast<int>(DeviceType::kCPU)];
  ONEFLOW_CHECK(cpu_kernel != nullptr, "multinomial: no cpu kernel to draw the numbers with");
  std::vector<TensorMeta> host_out = out;
  host_out[0].device = Device::CPU();
  Tensor host = cpu_kernel({fn::to_device(in[0], Device::CPU())}, a, host_out)[0];
  Tensor res = Tensor::Empty(out[0]);
  cuda::CopyBytes(res, host);
  return {res};
}

}  // namespace

ONEFLOW_REGISTER_KERNEL(full, kCUDA, FullCuda);
ONEFLOW_REGISTER_KERNEL(arange, kCUDA, ArangeCuda);
ONEFLOW_REGISTER_KERNEL(eye, kCUDA, EyeCuda);

// multinomial draws on the host from the probabilities copied there.
ONEFLOW_REGISTER_KERNEL(multinomial, kCUDA, MultinomialCuda);

}  // namespace oneflow
