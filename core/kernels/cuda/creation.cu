// CUDA kernels of the creation ops (core/ops/creation.cc; arange's and eye's kernels are
// core/kernels/cuda/kernels/creation.cuh) and the random ops (core/ops/random.cc). The random
// ops run their CPU kernel and copy the result over: the documented guarantee is that one seed
// gives the same numbers on every device, and normal's log and cos are not correctly rounded on the
// device.
#include <algorithm>
#include <cmath>

#include "core/functional.h"
#include "core/kernels/cuda/elementwise.cuh"
#include "core/kernels/cuda/kernels/creation.cuh"
#include "core/op_registry.h"

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

std::vector<Tensor> EyeCuda(const std::vector<Tensor>&, const Attrs&,
                            const std::vector<TensorMeta>& out) {
  Tensor t = Tensor::Empty(out[0]);
  const int64_t n = t.shape()[0], m = t.shape()[1], k = std::min(n, m);
  DispatchAll(t.dtype(), "eye", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (t.numel() == 0) return;
    cudaStream_t stream = cuda::StreamFor(t.device());
    ONEFLOW_CUDA_CHECK(cudaMemsetAsync(t.raw_data(), 0, t.numel() * sizeof(T), stream));
    if (k > 0) cuda::LaunchEyeDiagonal(k, t.data<T>(), m, stream);
  });
  return {t};
}

// ---------------------------------------------------------------- random

// Runs op's CPU kernel on host copies of the inputs (or, when the kernel reads only their
// metadata, on uninitialised host tensors of that metadata, sparing a device-to-host copy) and
// copies its outputs to the device. CopyBytes waits for each host-to-device copy, so the host
// results may be freed on return.
std::vector<Tensor> RunCpuKernel(const char* op, bool reads_inputs, const std::vector<Tensor>& in,
                                 const Attrs& a, const std::vector<TensorMeta>& out) {
  KernelFn cpu_kernel = OpRegistry::Global().Get(op).kernels[static_cast<int>(DeviceType::kCPU)];
  ONEFLOW_CHECK(cpu_kernel != nullptr, op, ": no cpu kernel to draw the numbers with");
  std::vector<Tensor> host_in;
  for (const Tensor& t : in) {
    host_in.push_back(reads_inputs ? fn::to_device(t, Device::CPU())
                                   : Tensor::Empty(t.shape(), t.dtype(), Device::CPU()));
  }
  std::vector<TensorMeta> host_out = out;
  for (TensorMeta& m : host_out) m.device = Device::CPU();
  std::vector<Tensor> host = cpu_kernel(host_in, a, host_out);
  std::vector<Tensor> res;
  for (size_t i = 0; i < out.size(); ++i) {
    res.push_back(Tensor::Empty(out[i]));
    cuda::CopyBytes(res.back(), host[i]);
  }
  return res;
}

template <const char* kOp, bool kReadsInputs = true>
std::vector<Tensor> ViaCpuKernel(const std::vector<Tensor>& in, const Attrs& a,
                                 const std::vector<TensorMeta>& out) {
  return RunCpuKernel(kOp, kReadsInputs, in, a, out);
}

constexpr char kUniform[] = "uniform";
constexpr char kNormal[] = "normal";
constexpr char kRandint[] = "randint";
constexpr char kRandperm[] = "randperm";
constexpr char kDropoutMask[] = "dropout_mask";
constexpr char kMultinomial[] = "multinomial";

}  // namespace

ONEFLOW_REGISTER_KERNEL(full, kCUDA, FullCuda);
ONEFLOW_REGISTER_KERNEL(arange, kCUDA, ArangeCuda);
ONEFLOW_REGISTER_KERNEL(eye, kCUDA, EyeCuda);

ONEFLOW_REGISTER_KERNEL(uniform, kCUDA, ViaCpuKernel<kUniform>);
ONEFLOW_REGISTER_KERNEL(normal, kCUDA, ViaCpuKernel<kNormal>);
ONEFLOW_REGISTER_KERNEL(randint, kCUDA, ViaCpuKernel<kRandint>);
ONEFLOW_REGISTER_KERNEL(randperm, kCUDA, ViaCpuKernel<kRandperm>);
// dropout_mask's input only gives the mask its shape, dtype and device.
ONEFLOW_REGISTER_KERNEL(dropout_mask, kCUDA, (ViaCpuKernel<kDropoutMask, /*kReadsInputs=*/false>));
// multinomial draws on the host from the probabilities copied there.
ONEFLOW_REGISTER_KERNEL(multinomial, kCUDA, ViaCpuKernel<kMultinomial>);

}  // namespace oneflow
