// CUDA kernels of layer_norm, rms_norm and their backwards (core/ops/nn/layer_norm.cc),
// float32, float64, float16 and bfloat16 (computing in float): the kernels are in
// kernels/norm.cuh (a warp per row with the row in registers, a block per row beyond 1024
// elements; dweight and dbias by a deterministic two-stage column reduction).
#include "core/functional.h"
#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/cuda_util.h"
#include "core/kernels/cuda/kernels/norm.cuh"
#include "core/op_registry.h"
#include "core/ops/op_util.h"

namespace oneflow {

namespace {

// x as n rows of d (the last k dims).
int64_t RowsOf(const Tensor& x, int64_t k, int64_t* d) {
  int64_t n = 1;
  *d = 1;
  for (int64_t i = 0; i < x.ndim(); ++i) (i < x.ndim() - k ? n : *d) *= x.shape()[i];
  return n;
}

std::vector<Tensor> LayerNormCuda(const std::vector<Tensor>& in, const Attrs& a,
                                  const std::vector<TensorMeta>& out) {
  Tensor x = fn::contiguous(in[0]), w = fn::contiguous(in[1]), b = fn::contiguous(in[2]);
  Tensor y = Tensor::Empty(out[0]), mean = Tensor::Empty(out[1]), rstd = Tensor::Empty(out[2]);
  int64_t d;
  const int64_t n = RowsOf(x, a.Get<int64_t>("normalized_ndim"), &d);
  if (n == 0 || d == 0) return {y, mean, rstd};
  cudaStream_t stream = cuda::StreamFor(x.device());
  DispatchFloatingWithHalf(x.dtype(), "layer_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda::norm::Forward(cuda::Ptr<T>(x), cuda::Ptr<T>(w), cuda::Ptr<T>(b), cuda::Ptr<T>(y),
                        cuda::Ptr<T>(mean), cuda::Ptr<T>(rstd), n, d, a.Get<double>("eps"),
                        /*rms=*/false, stream);
  });
  return {y, mean, rstd};
}

std::vector<Tensor> LayerNormGradCuda(const std::vector<Tensor>& in, const Attrs& a,
                                      const std::vector<TensorMeta>& out) {
  Tensor dy = fn::contiguous(in[0]), x = fn::contiguous(in[1]), mean = fn::contiguous(in[2]),
         rstd = fn::contiguous(in[3]), w = fn::contiguous(in[4]);
  Tensor dx = Tensor::Empty(out[0]), dw = Tensor::Empty(out[1]), db = Tensor::Empty(out[2]);
  int64_t d;
  const int64_t n = RowsOf(x, a.Get<int64_t>("normalized_ndim"), &d);
  if (d == 0) return {dx, dw, db};
  cudaStream_t stream = cuda::StreamFor(x.device());
  DispatchFloatingWithHalf(x.dtype(), "layer_norm backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = cuda::Acc<cuda::DevT<T>>;
    if (n > 0) {
      cuda::norm::BackwardInput(cuda::Ptr<T>(dy), cuda::Ptr<T>(x), cuda::Ptr<T>(mean),
                                cuda::Ptr<T>(rstd), cuda::Ptr<T>(w), cuda::Ptr<T>(dx), n, d,
                                /*rms=*/false, stream);
    }
    Tensor partial = Tensor::Empty(Shape({cuda::norm::ParamPartialElems(n, d)}),
                                   sizeof(A) == 8 ? DType::kFloat64 : DType::kFloat32, x.device());
    cuda::norm::BackwardParams(cuda::Ptr<T>(dy), cuda::Ptr<T>(x), cuda::Ptr<T>(mean),
                               cuda::Ptr<T>(rstd), cuda::Ptr<T>(dw), cuda::Ptr<T>(db), n, d,
                               /*rms=*/false, static_cast<A*>(partial.raw_data()), stream);
  });
  return {dx, dw, db};
}

std::vector<Tensor> RmsNormCuda(const std::vector<Tensor>& in, const Attrs& a,
                                const std::vector<TensorMeta>& out) {
  Tensor x = fn::contiguous(in[0]), w = fn::contiguous(in[1]);
  Tensor y = Tensor::Empty(out[0]), rstd = Tensor::Empty(out[1]);
  int64_t d;
  const int64_t n = RowsOf(x, a.Get<int64_t>("normalized_ndim"), &d);
  if (n == 0 || d == 0) return {y, rstd};
  cudaStream_t stream = cuda::StreamFor(x.device());
  DispatchFloatingWithHalf(x.dtype(), "rms_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using D = cuda::DevT<T>;
    cuda::norm::Forward(cuda::Ptr<T>(x), cuda::Ptr<T>(w), static_cast<const D*>(nullptr),
                        cuda::Ptr<T>(y), static_cast<D*>(nullptr), cuda::Ptr<T>(rstd), n, d,
                        a.Get<double>("eps"), /*rms=*/true, stream);
  });
  return {y, rstd};
}

std::vector<Tensor> RmsNormGradCuda(const std::vector<Tensor>& in, const Attrs& a,
                                    const std::vector<TensorMeta>& out) {
  Tensor dy = fn::contiguous(in[0]), x = fn::contiguous(in[1]), rstd = fn::contiguous(in[2]),
         w = fn::contiguous(in[3]);
  Tensor dx = Tensor::Empty(out[0]), dw = Tensor::Empty(out[1]);
  int64_t d;
  const int64_t n = RowsOf(x, a.Get<int64_t>("normalized_ndim"), &d);
  if (d == 0) return {dx, dw};
  cudaStream_t stream = cuda::StreamFor(x.device());
  DispatchFloatingWithHalf(x.dtype(), "rms_norm backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using D = cuda::DevT<T>;
    using A = cuda::Acc<D>;
    if (n > 0) {
      cuda::norm::BackwardInput(cuda::Ptr<T>(dy), cuda::Ptr<T>(x), static_cast<const D*>(nullptr),
                                cuda::Ptr<T>(rstd), cuda::Ptr<T>(w), cuda::Ptr<T>(dx), n, d,
                                /*rms=*/true, stream);
    }
    Tensor partial = Tensor::Empty(Shape({cuda::norm::ParamPartialElems(n, d)}),
                                   sizeof(A) == 8 ? DType::kFloat64 : DType::kFloat32, x.device());
    cuda::norm::BackwardParams(cuda::Ptr<T>(dy), cuda::Ptr<T>(x), static_cast<const D*>(nullptr),
                               cuda::Ptr<T>(rstd), cuda::Ptr<T>(dw), static_cast<D*>(nullptr), n, d,
                               /*rms=*/true, static_cast<A*>(partial.raw_data()), stream);
  });
  return {dx, dw};
}

}  // namespace

ONEFLOW_REGISTER_KERNEL(layer_norm, kCUDA, LayerNormCuda);
ONEFLOW_REGISTER_KERNEL(rms_norm, kCUDA, RmsNormCuda);
ONEFLOW_REGISTER_KERNEL(rms_norm_grad, kCUDA, RmsNormGradCuda);
ONEFLOW_REGISTER_KERNEL(layer_norm_grad, kCUDA, LayerNormGradCuda);

}  // namespace oneflow
