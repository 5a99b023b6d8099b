// CUDA kernels of batch_norm_train, batch_norm_train_grad, batch_norm_elemt and
// batch_norm_elemt_grad (core/ops/nn/batch_norm.cc) on cuDNN's batch normalization (spatial
// mode, NCHW): x (N, C, S...) is cuDNN's 4-d (N, C, prod(S), 1).
//
//   training   cudnnBatchNormalizationForwardTraining: y, the batch mean and 1 / sqrt(var + eps)
//              saved for the backward, and the running statistics updated inside cuDNN when the
//              op gets them (exponentialAverageFactor = momentum, the unbiased variance, as
//              OneFlow and PyTorch keep them); a small kernel turns the saved inverse standard
//              deviation into the biased variance the op returns.
//   backward   cudnnBatchNormalizationBackward from the saved mean and inverse standard
//              deviation; the gradients of the mean and variance outputs (zero in a training
//              step) are added by a kernel whose blocks return at once when they are zero.
//   eval       cudnnBatchNormalizationForwardInference; its backward (frozen statistics) is a
//              composite of reductions and elementwise ops in float.
//
// cuDNN keeps the per-channel tensors (weight, bias, statistics) in float for half inputs and in
// double for double inputs: other dtypes are converted around the call (a half x with float32
// weight and statistics, as under autocast, needs none). bfloat16 inputs go through float32
// copies of x and y.

#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/functional.h"
#include "core/kernels/cuda/cuda_dispatch.h"
#include "core/kernels/cuda/cuda_libs.h"
#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/cuda_util.h"
#include "core/kernels/cuda/dnn_handle.h"
#include "core/kernels/cuda/kernels/batch_norm.cuh"
#include "core/kernels/cuda/launch.cuh"
#include "core/op_registry.h"

namespace oneflow {

namespace {

using cuda::CheckDnn;
using cuda::DevT;
using cuda::DnnInt;
using cuda::DnnTensorDesc;
using cuda::WithDnn;

// x (N, C, S...) as (n, c, s).
struct Layout {
  int64_t n, c, s;
  explicit Layout(const Shape& x) : n(x[0]), c(x[1]), s(1) {
    for (int64_t d = 2; d < x.ndim(); ++d) s *= x[d];
  }
};

// The dtype cuDNN reads x in (bfloat16 through float32) and the dtype of its per-channel tensors.
DType DataDType(DType t) { return t == DType::kBFloat16 ? DType::kFloat32 : t; }
DType ParamDType(DType t) { return t == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32; }

cudnnDataType_t DnnType(DType t) {
  switch (t) {
    case DType::kFloat16:
      return CUDNN_DATA_HALF;
    case DType::kFloat64:
      return CUDNN_DATA_DOUBLE;
    default:
      return CUDNN_DATA_FLOAT;
  }
}

// t contiguous in dtype d: t itself when it already is.
Tensor As(const Tensor& t, DType d) {
  return t.dtype() == d ? fn::contiguous(t) : fn::contiguous(fn::to_dtype(t, d));
}

// The descriptors of one call: x (and y, dy, dx) in dtype `data`, the per-channel tensors.
struct Descs {
  DnnTensorDesc x, param;
  Descs(const Layout& l, DType data, const char* op) {
    // cuDNN indexes x with int: refuse what it cannot address.
    DnnInt(l.n * l.c * l.s, op);
    CheckDnn(
        CUDNN(cudnnSetTensor4dDescriptor)(x.get(), CUDNN_TENSOR_NCHW, DnnType(data),
                                          DnnInt(l.n, op), DnnInt(l.c, op), DnnInt(l.s, op), 1),
        "batch_norm: cudnnSetTensor4dDescriptor (input)");
    CheckDnn(CUDNN(cudnnSetTensor4dDescriptor)(param.get(), CUDNN_TENSOR_NCHW,
                                               DnnType(ParamDType(data)), 1, DnnInt(l.c, op), 1, 1),
             "batch_norm: cudnnSetTensor4dDescriptor (per-channel)");
  }
};

// cuDNN's blend factors: double for double data, float otherwise.
struct Blend {
  double d[2] = {1, 0};
  float f[2] = {1, 0};
  bool is_double;
  explicit Blend(DType data) : is_double(data == DType::kFloat64) {}
  const void* one() const { return is_double ? static_cast<const void*>(&d[0]) : &f[0]; }
  const void* zero() const { return is_double ? static_cast<const void*>(&d[1]) : &f[1]; }
};

// Calls f(TypeTag<U>{}, TypeTag<P>{}) with U the device type of dtype t and P its cuDNN
// per-channel type.
template <typename F>
void DispatchBn(DType t, const char* op, F&& f) {
  cuda::DispatchFloatingWithHalf(t, op, [&](auto tag) {
    using U = DevT<typename decltype(tag)::type>;
    using P = std::conditional_t<std::is_same_v<U, double>, double, float>;
    f(TypeTag<U>{}, TypeTag<P>{});
  });
}

// Blocks for one pass over n elements, a grid-stride loop covering the rest.
unsigned BlocksFor(int64_t n) { return cuda::Blocks(n); }

// ---------------------------------------------------------------- batch_norm_train

// batch_norm_train(x, weight, bias[, running_mean, running_var]), attrs eps[, momentum]
//   -> (y, mean, var); var is biased; the running statistics are updated in place.
std::vector<Tensor> TrainCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                              const std::vector<TensorMeta>& out) {
  const char* op = "batch_norm_train";
  Tensor y = Tensor::Empty(out[0]), mean = Tensor::Empty(out[1]), var = Tensor::Empty(out[2]);
  const Layout l(in[0].shape());
  const bool running = in.size() == 5;
  if (l.c == 0) return {y, mean, var};
  if (in[0].numel() == 0) {  // as on CPU: statistics of no values
    fn::fill_(mean, std::numeric_limits<double>::quiet_NaN());
    fn::fill_(var, std::numeric_limits<double>::quiet_NaN());
    return {y, mean, var};
  }
  const double eps = attrs.Get<double>("eps");
  const DType t = in[0].dtype(), data = DataDType(t), param = ParamDType(t);
  const Device device = y.device();
  Tensor x = As(in[0], data), w = As(in[1], param), b = As(in[2], param);
  Tensor y_data = data == t ? y : Tensor::Empty(y.shape(), data, device);
  // The statistics outputs have the weight's dtype: x's, or float32 for a half x (mixed).
  const DType stats = mean.dtype();
  Tensor save_mean = stats == param ? mean : Tensor::Empty(Shape({l.c}), param, device);
  Tensor invstd = Tensor::Empty(Shape({l.c}), param, device);
  Tensor rm, rv;
  double momentum = 0;
  if (running) {
    rm = As(in[3], param);
    rv = As(in[4], param);
    momentum = attrs.Get<double>("momentum");
  }
  const Descs desc(l, data, op);
  const Blend blend(data);
  WithDnn(device, [&](cudnnHandle_t h) {
    CheckDnn(CUDNN(cudnnBatchNormalizationForwardTraining)(
                 h, CUDNN_BATCHNORM_SPATIAL, blend.one(), blend.zero(), desc.x.get(), x.raw_data(),
                 desc.x.get(), y_data.raw_data(), desc.param.get(), w.raw_data(), b.raw_data(),
                 momentum, running ? rm.raw_data() : nullptr, running ? rv.raw_data() : nullptr,
                 eps, save_mean.raw_data(), invstd.raw_data()),
             "batch_norm_train: cudnnBatchNormalizationForwardTraining");
  });
  cudaStream_t stream = cuda::StreamFor(device);
  DispatchBn(stats, op, [&](auto utag, auto ptag) {
    using U = typename decltype(utag)::type;
    using P = typename decltype(ptag)::type;
    auto* kernel = cuda::BatchNormStatsKernel<U, P>;
    OF_CUDA_LAUNCH(kernel, BlocksFor(l.c), cuda::kThreads, 0, stream, l.c, save_mean.data<P>(),
                   invstd.data<P>(), eps,
                   stats == param ? nullptr : reinterpret_cast<U*>(mean.raw_data()),
                   reinterpret_cast<U*>(var.raw_data()));
  });
  if (data != t) fn::copy_(y, y_data);
  if (running) {
    for (int i : {3, 4}) {
      const Tensor& work = i == 3 ? rm : rv;
      if (work.impl() != in[i].impl()) fn::copy_(in[i], work);
      in[i].storage()->bump_version();
    }
  }
  return {y, mean, var};
}

// ---------------------------------------------------------------- batch_norm_train_grad

// Blocks per channel for a pass over its values: enough blocks in all to fill the GPU, each
// with at least 16 values per thread.
int64_t ChunksPerChannel(const Layout& l) {
  const int64_t by_size = std::max<int64_t>(1, l.n * l.s / (cuda::kThreads * 16));
  const int64_t by_grid = std::max<int64_t>(1, 2048 / std::max<int64_t>(l.c, 1));
  return std::min<int64_t>(by_size, by_grid);
}

// batch_norm_train_grad(dy, dmean, dvar, x, mean, var, weight), attr eps -> (dx, dw, db).
std::vector<Tensor> TrainGradCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                  const std::vector<TensorMeta>& out) {
  const char* op = "batch_norm_train_grad";
  Tensor dx = Tensor::Empty(out[0]), dw = Tensor::Empty(out[1]), db = Tensor::Empty(out[2]);
  const Layout l(in[3].shape());
  if (l.c == 0) return {dx, dw, db};
  if (dx.numel() == 0) {  // sums over no values
    fn::fill_(dw, 0.0);
    fn::fill_(db, 0.0);
    return {dx, dw, db};
  }
  const double eps = attrs.Get<double>("eps");
  const DType t = in[3].dtype(), data = DataDType(t), param = ParamDType(t);
  const Device device = dx.device();
  Tensor dy = As(in[0], data), x = As(in[3], data), w = As(in[6], param);
  Tensor mean = fn::contiguous(in[4]), var = fn::contiguous(in[5]);
  Tensor dx_data = data == t ? dx : Tensor::Empty(dx.shape(), data, device);
  // Per-channel tensors have the weight's dtype: x's, or float32 for a half x (mixed).
  const DType stats = mean.dtype(), grads = dw.dtype();
  Tensor dw_p = grads == param ? dw : Tensor::Empty(Shape({l.c}), param, device);
  Tensor db_p = grads == param ? db : Tensor::Empty(Shape({l.c}), param, device);
  Tensor mean_p = stats == param ? mean : Tensor::Empty(Shape({l.c}), param, device);
  Tensor invstd = Tensor::Empty(Shape({l.c}), param, device);
  cudaStream_t stream = cuda::StreamFor(device);
  DispatchBn(stats, op, [&](auto utag, auto ptag) {
    using U = typename decltype(utag)::type;
    using P = typename decltype(ptag)::type;
    auto* kernel = cuda::BatchNormInvStdKernel<U, P>;
    OF_CUDA_LAUNCH(kernel, BlocksFor(l.c), cuda::kThreads, 0, stream, l.c,
                   reinterpret_cast<const U*>(mean.raw_data()),
                   reinterpret_cast<const U*>(var.raw_data()), eps,
                   stats == param ? nullptr : mean_p.data<P>(), invstd.data<P>());
  });
  const Descs desc(l, data, op);
  const Blend blend(data);
  WithDnn(device, [&](cudnnHandle_t h) {
    CheckDnn(CUDNN(cudnnBatchNormalizationBackward)(
                 h, CUDNN_BATCHNORM_SPATIAL, blend.one(), blend.zero(), blend.one(), blend.zero(),
                 desc.x.get(), x.raw_data(), desc.x.get(), dy.raw_data(), desc.x.get(),
                 dx_data.raw_data(), desc.param.get(), w.raw_data(), dw_p.raw_data(),
                 db_p.raw_data(), eps, mean_p.raw_data(), invstd.raw_data()),
             "batch_norm_train_grad: cudnnBatchNormalizationBackward");
  });
  // Through the mean and var outputs, in x's compute dtype.
  Tensor dmean = As(in[1], data), dvar = As(in[2], data);
  const int64_t chunks = ChunksPerChannel(l);
  DispatchBn(data, op, [&](auto utag, auto ptag) {
    using U = typename decltype(utag)::type;
    using P = typename decltype(ptag)::type;
    auto* kernel = cuda::BatchNormStatsGradKernel<U, P>;
    OF_CUDA_LAUNCH(kernel, static_cast<unsigned>(l.c * chunks), cuda::kThreads, 0, stream, l.n, l.c,
                   l.s, chunks, reinterpret_cast<const U*>(dmean.raw_data()),
                   reinterpret_cast<const U*>(dvar.raw_data()),
                   reinterpret_cast<const U*>(x.raw_data()), mean_p.data<P>(),
                   reinterpret_cast<U*>(dx_data.raw_data()));
  });
  if (data != t) fn::copy_(dx, dx_data);
  if (grads != param) {
    fn::copy_(dw, dw_p);
    fn::copy_(db, db_p);
  }
  return {dx, dw, db};
}

// ---------------------------------------------------------------- batch_norm_elemt

// batch_norm_elemt(x, mean, var, weight, bias), attr eps -> y.
std::vector<Tensor> ElemtCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                              const std::vector<TensorMeta>& out) {
  const char* op = "batch_norm_elemt";
  Tensor y = Tensor::Empty(out[0]);
  const Layout l(in[0].shape());
  if (y.numel() == 0) return {y};
  const DType t = in[0].dtype(), data = DataDType(t), param = ParamDType(t);
  Tensor x = As(in[0], data), mean = As(in[1], param), var = As(in[2], param);
  Tensor w = As(in[3], param), b = As(in[4], param);
  Tensor y_data = data == t ? y : Tensor::Empty(y.shape(), data, y.device());
  const Descs desc(l, data, op);
  const Blend blend(data);
  WithDnn(y.device(), [&](cudnnHandle_t h) {
    CheckDnn(CUDNN(cudnnBatchNormalizationForwardInference)(
                 h, CUDNN_BATCHNORM_SPATIAL, blend.one(), blend.zero(), desc.x.get(), x.raw_data(),
                 desc.x.get(), y_data.raw_data(), desc.param.get(), w.raw_data(), b.raw_data(),
                 mean.raw_data(), var.raw_data(), attrs.Get<double>("eps")),
             "batch_norm_elemt: cudnnBatchNormalizationForwardInference");
  });
  if (data != t) fn::copy_(y, y_data);
  return {y};
}

// ---------------------------------------------------------------- batch_norm_elemt_grad

// batch_norm_elemt_grad(dy, x, mean, var, weight), attr eps -> (dx, dmean, dvar, dw, db). With
// invstd = 1 / sqrt(var + eps) and sums over every value of a channel:
//   dx = dy w invstd;  dmean = -w invstd sum(dy);  dvar = -w invstd^3 / 2 sum(dy (x - mean));
//   dweight = invstd sum(dy (x - mean));  dbias = sum(dy).
// cuDNN has no backward for given statistics: reductions and elementwise ops in float (double
// for double), the eval-mode backward of frozen batch norm layers.
std::vector<Tensor> ElemtGradCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                  const std::vector<TensorMeta>& out) {
  std::vector<Tensor> res;
  for (const TensorMeta& m : out) res.push_back(Tensor::Empty(m));
  const Layout l(in[1].shape());
  if (l.c == 0) return res;
  const DType t = in[1].dtype(), p = ParamDType(t);
  std::vector<int64_t> channel_shape(in[1].ndim(), 1), dims;
  channel_shape[1] = l.c;
  for (int64_t d = 0; d < in[1].ndim(); ++d) {
    if (d != 1) dims.push_back(d);
  }
  auto per_channel = [&](const Tensor& v) { return fn::reshape(v, channel_shape); };
  Tensor dy = As(in[0], p), x = As(in[1], p), mean = As(in[2], p), var = As(in[3], p);
  Tensor w = As(in[4], p);
  Tensor invstd = fn::rsqrt(fn::add_scalar(var, attrs.Get<double>("eps")));
  Tensor wi = fn::mul(w, invstd);
  Tensor sum_dy = fn::sum(dy, dims);
  Tensor sum_dy_xc = fn::sum(fn::mul(dy, fn::sub(x, per_channel(mean))), dims);
  fn::copy_(res[0], fn::mul(dy, per_channel(wi)));
  fn::copy_(res[1], fn::neg(fn::mul(wi, sum_dy)));
  fn::copy_(res[2], fn::mul_scalar(fn::mul(fn::mul(wi, fn::mul(invstd, invstd)), sum_dy_xc), -0.5));
  fn::copy_(res[3], fn::mul(invstd, sum_dy_xc));
  fn::copy_(res[4], sum_dy);
  return res;
}

}  // namespace

ONEFLOW_REGISTER_KERNEL(batch_norm_train, kCUDA, TrainCuda);
ONEFLOW_REGISTER_KERNEL(batch_norm_train_grad, kCUDA, TrainGradCuda);
ONEFLOW_REGISTER_KERNEL(batch_norm_elemt, kCUDA, ElemtCuda);
ONEFLOW_REGISTER_KERNEL(batch_norm_elemt_grad, kCUDA, ElemtGradCuda);

}  // namespace oneflow
