// CUDA kernels of the 2-d pooling ops (core/ops/nn/pool.cc): max_pool2d returns the flat argmax
// of each window, which cuDNN's pooling cannot, and the average poolings must count the padding
// exactly as the CPU does, so all of them are own kernels. The backward kernels gather: one
// thread per input pixel sums over the output windows that hold it, in the CPU's order, so
// there are no atomics and the results are deterministic. The kernels are
// core/kernels/cuda/kernels/pool.cuh (run by the host stand-in, tests/cuda_host/pool_test.cc).

#include <array>
#include <climits>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "core/functional.h"
#include "core/kernels/cuda/cuda_dispatch.h"
#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/cuda_util.h"
#include "core/kernels/cuda/kernels/pool.cuh"
#include "core/op_registry.h"
#include "core/ops/nn/geometry.h"
#include "core/ops/nn/nn_util.h"

namespace oneflow {

namespace {

using cuda::DevT;

using cuda::ZeroFill;

using nn_util::MakePoolGeom;
using nn_util::PoolGeom;

std::vector<Tensor> MaxPool2dCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                  const std::vector<TensorMeta>& out) {
  Tensor y = Tensor::Empty(out[0]), idx = Tensor::Empty(out[1]);
  cuda::DispatchFloatingWithHalf(in[0].dtype(), "max_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (y.numel() == 0) return;
    Tensor x = fn::contiguous(in[0]);
    PoolGeom g = MakePoolGeom(x.shape(), attrs, "max_pool2d");
    cudaStream_t stream = cuda::StreamFor(y.device());
    OF_CUDA_LAUNCH(cuda::MaxPoolKernel<DevT<T>>, cuda::PoolBlocks(y.numel()), cuda::kPoolThreads, 0,
                   stream, y.numel(), g, cuda::Ptr<T>(x), cuda::Ptr<T>(y), idx.data<int64_t>());
  });
  return {y, idx};
}

// max_pool2d_grad(dy, indices), attrs input_shape and the forward's window attributes.
std::vector<Tensor> MaxPool2dGradCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                      const std::vector<TensorMeta>& out) {
  Tensor dx = Tensor::Empty(out[0]);
  cuda::DispatchFloatingWithHalf(in[0].dtype(), "max_pool2d_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (dx.numel() == 0) return;
    cudaStream_t stream = cuda::StreamFor(dx.device());
    Tensor dy = fn::contiguous(in[0]), idx = fn::contiguous(in[1]);
    if (dy.numel() == 0) {
      ZeroFill(dx, stream);
      return;
    }
    PoolGeom g = MakePoolGeom(dx.shape(), attrs, "max_pool2d_grad");
    OF_CUDA_LAUNCH(cuda::MaxPoolGradKernel<DevT<T>>, cuda::PoolBlocks(dx.numel()),
                   cuda::kPoolThreads, 0, stream, dx.numel(), g, cuda::Ptr<T>(dy),
                   idx.data<int64_t>(), cuda::Ptr<T>(dx));
  });
  return {dx};
}

// ---- avg_pool2d ----

std::vector<Tensor> AvgPool2dCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                  const std::vector<TensorMeta>& out) {
  Tensor y = Tensor::Empty(out[0]);
  cuda::DispatchFloatingWithHalf(in[0].dtype(), "avg_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (y.numel() == 0) return;
    Tensor x = fn::contiguous(in[0]);
    PoolGeom g = MakePoolGeom(x.shape(), attrs, "avg_pool2d");
    OF_CUDA_LAUNCH(cuda::AvgPoolKernel<DevT<T>>, cuda::PoolBlocks(y.numel()), cuda::kPoolThreads, 0,
                   cuda::StreamFor(y.device()), y.numel(), g, cuda::Ptr<T>(x), cuda::Ptr<T>(y));
  });
  return {y};
}

// avg_pool2d_grad(dy), attrs input_shape and the forward's window attributes.
std::vector<Tensor> AvgPool2dGradCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                      const std::vector<TensorMeta>& out) {
  Tensor dx = Tensor::Empty(out[0]);
  cuda::DispatchFloatingWithHalf(in[0].dtype(), "avg_pool2d_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (dx.numel() == 0) return;
    Tensor dy = fn::contiguous(in[0]);
    PoolGeom g = MakePoolGeom(dx.shape(), attrs, "avg_pool2d_grad");
    OF_CUDA_LAUNCH(cuda::AvgPoolGradKernel<DevT<T>>, cuda::PoolBlocks(dx.numel()),
                   cuda::kPoolThreads, 0, cuda::StreamFor(dx.device()), dx.numel(), g,
                   cuda::Ptr<T>(dy), cuda::Ptr<T>(dx));
  });
  return {dx};
}

// ---- adaptive_avg_pool2d ----
std::vector<Tensor> AdaptiveAvgPool2dCuda(const std::vector<Tensor>& in, const Attrs&,
                                          const std::vector<TensorMeta>& out) {
  Tensor y = Tensor::Empty(out[0]);
  cuda::DispatchFloatingWithHalf(in[0].dtype(), "adaptive_avg_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (y.numel() == 0) return;
    Tensor x = fn::contiguous(in[0]);
    PoolGeom g = nn_util::MakePlaneGeom(x.shape(), y.shape());
    OF_CUDA_LAUNCH(cuda::AdaptiveAvgPoolKernel<DevT<T>>, cuda::PoolBlocks(y.numel()),
                   cuda::kPoolThreads, 0, cuda::StreamFor(y.device()), y.numel(), g,
                   cuda::Ptr<T>(x), cuda::Ptr<T>(y));
  });
  return {y};
}

// adaptive_avg_pool2d_grad(dy), attrs input_shape and output_size.
std::vector<Tensor> AdaptiveAvgPool2dGradCuda(const std::vector<Tensor>& in, const Attrs&,
                                              const std::vector<TensorMeta>& out) {
  Tensor dx = Tensor::Empty(out[0]);
  cuda::DispatchFloatingWithHalf(in[0].dtype(), "adaptive_avg_pool2d_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (dx.numel() == 0) return;
    Tensor dy = fn::contiguous(in[0]);
    PoolGeom g = nn_util::MakePlaneGeom(dx.shape(), dy.shape());
    OF_CUDA_LAUNCH(cuda::AdaptiveAvgPoolGradKernel<DevT<T>>, cuda::PoolBlocks(dx.numel()),
                   cuda::kPoolThreads, 0, cuda::StreamFor(dx.device()), dx.numel(), g,
                   cuda::Ptr<T>(dy), cuda::Ptr<T>(dx));
  });
  return {dx};
}

}  // namespace

ONEFLOW_REGISTER_KERNEL(max_pool2d, kCUDA, MaxPool2dCuda);
ONEFLOW_REGISTER_KERNEL(max_pool2d_grad, kCUDA, MaxPool2dGradCuda);
ONEFLOW_REGISTER_KERNEL(avg_pool2d, kCUDA, AvgPool2dCuda);
ONEFLOW_REGISTER_KERNEL(avg_pool2d_grad, kCUDA, AvgPool2dGradCuda);
ONEFLOW_REGISTER_KERNEL(adaptive_avg_pool2d, kCUDA, AdaptiveAvgPool2dCuda);
ONEFLOW_REGISTER_KERNEL(adaptive_avg_pool2d_grad, kCUDA, AdaptiveAvgPool2dGradCuda);

}  // namespace oneflow
