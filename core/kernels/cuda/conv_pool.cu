// CUDA kernels of conv2d and its two backward ops (core/ops/nn/conv.cc) on cuDNN, and of the
// 2-d pooling ops (core/ops/nn/pool.cc) as plain kernels.
//
// Convolutions: one cuDNN handle per device; per geometry the descriptors and the algorithm
// (the first of cuDNN's heuristic ranking that runs with a workspace within budget) are chosen
// once and cached. Float32 keeps full precision (FMA math) unless TF32 is allowed.
//
// Pooling: max_pool2d returns the flat argmax of each window, which cuDNN's pooling cannot, and
// the average poolings must count the padding exactly as the CPU does, so all of them are own
// kernels. The backward kernels gather: one thread per input pixel sums over the output windows
// that hold it, in the CPU's order, so there are no atomics and the results are deterministic.

#include <cudnn.h>

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
#include "core/kernels/cuda/cuda_libs.h"
#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/cuda_util.h"
#include "core/op_registry.h"
#include "core/ops/nn/geometry.h"
#include "core/ops/nn/nn_util.h"

namespace oneflow {

namespace {

using cuda::Acc;
using cuda::DevT;
using cuda::Load;
using cuda::Store;

void ZeroFill(const Tensor& t, cudaStream_t stream) {
  ONEFLOW_CUDA_CHECK(cudaMemsetAsync(t.raw_data(), 0, t.numel() * SizeOf(t.dtype()), stream));
}

// ================================================================ convolution (cuDNN)

// Throws "cuda: <what> failed: <status>: <cuDNN's last error message>" (on one line).
void CheckDnn(cudnnStatus_t status, const char* what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  char detail[1024] = {0};
  CUDNN(cudnnGetLastErrorString)(detail, sizeof(detail));
  std::string last = detail;
  for (char& c : last) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  throw Error(StrCat("cuda: ", what, " failed: ", CUDNN(cudnnGetErrorString)(status),
                     last.empty() ? "" : ": ", last));
}

// The cuDNN handle of a device (cuda::PerDevice).
struct DnnContext {
  std::mutex mu;  // the handle's stream is set per call
  cudnnHandle_t handle = nullptr;
};

// Runs f(handle) with the device's handle bound to its compute stream, holding the handle's lock.
template <typename F>
void WithDnn(const Device& device, F&& f) {
  cudaStream_t stream = cuda::StreamFor(device);  // checks the device and makes it current
  DnnContext& ctx = cuda::PerDevice<DnnContext>(device.index);
  std::lock_guard<std::mutex> lock(ctx.mu);
  if (!ctx.handle) CheckDnn(CUDNN(cudnnCreate)(&ctx.handle), "cudnnCreate");
  CheckDnn(CUDNN(cudnnSetStream)(ctx.handle, stream), "cudnnSetStream");
  f(ctx.handle);
}

// Largest workspace an algorithm may ask for; beyond it the next one in the ranking is taken.
constexpr size_t kMaxConvWorkspaceBytes = size_t(1) << 30;

enum class ConvKind : int64_t { kForward, kGradInput, kGradWeight };

// Shared with the CPU ops (core/ops/nn/geometry.h): one validation and output size for both.
using nn_util::ConvGeom;
using nn_util::MakeConvGeom;
using nn_util::MakePoolGeom;
using nn_util::PoolGeom;

int DnnInt(int64_t v, const char* op) {
  if (v > INT_MAX) throw Error(StrCat(op, ": size ", v, " is beyond cuDNN's int range"));
  return static_cast<int>(v);
}

cudnnDataType_t DnnType(DType t) {
  switch (t) {
    case DType::kFloat16:
      return CUDNN_DATA_HALF;
    case DType::kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    case DType::kFloat64:
      return CUDNN_DATA_DOUBLE;
    default:
      return CUDNN_DATA_FLOAT;
  }
}

// Descriptors and algorithm of one geometry and kind; built once and cached for good (the
// destructor only runs when building one fails).
struct ConvPlan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = 0;  // the kind's algorithm enum
  size_t workspace = 0;
  ~ConvPlan() {
    if (x) CUDNN(cudnnDestroyTensorDescriptor)(x);
    if (y) CUDNN(cudnnDestroyTensorDescriptor)(y);
    if (w) CUDNN(cudnnDestroyFilterDescriptor)(w);
    if (conv) CUDNN(cudnnDestroyConvolutionDescriptor)(conv);
  }
};

// FFT and Winograd transform the operands, which costs float32 more error than the direct and
// GEMM algorithms (beyond the tests' float32 tolerance); exact float32 does without them.
bool Transforms(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool Transforms(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
bool Transforms(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

// Takes the first algorithm of cuDNN's ranking `perfs` that runs here within the workspace
// budget. exact (float32 without TF32): the descriptor's math type stays and the algorithms
// that trade precision (tensor-core math, FFT, Winograd) are skipped; otherwise the descriptor
// takes the algorithm's math type, which cuDNN needs to pick tensor-core kernels.
template <typename Perf, typename WorkspaceFn>
void PickAlgo(const Perf* perfs, int count, bool exact, ConvPlan* plan,
              WorkspaceFn&& workspace_size, const char* op) {
  for (int i = 0; i < count; ++i) {
    const Perf& p = perfs[i];
    if (p.status != CUDNN_STATUS_SUCCESS || p.memory > kMaxConvWorkspaceBytes) continue;
    if (exact) {
      if (Transforms(p.algo)) continue;
      if (p.mathType == CUDNN_TENSOR_OP_MATH ||
          p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) {
        continue;
      }
    } else {
      CheckDnn(CUDNN(cudnnSetConvolutionMathType)(plan->conv, p.mathType),
               "cudnnSetConvolutionMathType");
    }
    size_t bytes = 0;
    if (workspace_size(p.algo, &bytes) != CUDNN_STATUS_SUCCESS || bytes > kMaxConvWorkspaceBytes) {
      continue;
    }
    plan->algo = static_cast<int>(p.algo);
    plan->workspace = bytes;
    return;
  }
  throw Error(StrCat(op, ": cuDNN offers no algorithm for this convolution within a ",
                     kMaxConvWorkspaceBytes >> 20, " MiB workspace",
                     exact ? " in exact float32 (no TF32, FFT or Winograd)" : ""));
}

ConvPlan* BuildPlan(cudnnHandle_t handle, ConvKind kind, const ConvGeom& g, DType dtype,
                    const char* op) {
  auto plan = std::make_unique<ConvPlan>();
  const cudnnDataType_t type = DnnType(dtype);
  CheckDnn(CUDNN(cudnnCreateTensorDescriptor)(&plan->x), "cudnnCreateTensorDescriptor");
  CheckDnn(CUDNN(cudnnCreateTensorDescriptor)(&plan->y), "cudnnCreateTensorDescriptor");
  CheckDnn(CUDNN(cudnnCreateFilterDescriptor)(&plan->w), "cudnnCreateFilterDescriptor");
  CheckDnn(CUDNN(cudnnCreateConvolutionDescriptor)(&plan->conv),
           "cudnnCreateConvolutionDescriptor");
  CheckDnn(CUDNN(cudnnSetTensor4dDescriptor)(plan->x, CUDNN_TENSOR_NCHW, type, DnnInt(g.n, op),
                                             DnnInt(g.c, op), DnnInt(g.h, op), DnnInt(g.w, op)),
           "cudnnSetTensor4dDescriptor");
  CheckDnn(CUDNN(cudnnSetTensor4dDescriptor)(plan->y, CUDNN_TENSOR_NCHW, type, DnnInt(g.n, op),
                                             DnnInt(g.o, op), DnnInt(g.oh, op), DnnInt(g.ow, op)),
           "cudnnSetTensor4dDescriptor");
  CheckDnn(CUDNN(cudnnSetFilter4dDescriptor)(plan->w, type, CUDNN_TENSOR_NCHW, DnnInt(g.o, op),
                                             DnnInt(g.c / g.groups, op), DnnInt(g.kh, op),
                                             DnnInt(g.kw, op)),
           "cudnnSetFilter4dDescriptor");
  // Half types accumulate in float.
  const cudnnDataType_t compute = dtype == DType::kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  CheckDnn(CUDNN(cudnnSetConvolution2dDescriptor)(
               plan->conv, DnnInt(g.ph, op), DnnInt(g.pw, op), DnnInt(g.sh, op), DnnInt(g.sw, op),
               DnnInt(g.dh, op), DnnInt(g.dw, op), CUDNN_CROSS_CORRELATION, compute),
           "cudnnSetConvolution2dDescriptor");
  CheckDnn(CUDNN(cudnnSetConvolutionGroupCount)(plan->conv, DnnInt(g.groups, op)),
           "cudnnSetConvolutionGroupCount");
  // Float32 stays float32 (FMA kernels only) unless TF32 is allowed, as PyTorch does.
  const bool fp32_exact = dtype == DType::kFloat32 && !cuda::AllowCudnnTf32();
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  if (fp32_exact) math = CUDNN_FMA_MATH;
  if (dtype == DType::kFloat16 || dtype == DType::kBFloat16) math = CUDNN_TENSOR_OP_MATH;
  CheckDnn(CUDNN(cudnnSetConvolutionMathType)(plan->conv, math), "cudnnSetConvolutionMathType");

  ConvPlan* p = plan.get();
  int returned = 0;
  if (kind == ConvKind::kForward) {
    cudnnConvolutionFwdAlgoPerf_t perfs[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    CheckDnn(
        CUDNN(cudnnGetConvolutionForwardAlgorithm_v7)(
            handle, p->x, p->w, p->conv, p->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perfs),
        "cudnnGetConvolutionForwardAlgorithm_v7");
    PickAlgo(
        perfs, returned, fp32_exact, p,
        [&](cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
          return CUDNN(cudnnGetConvolutionForwardWorkspaceSize)(handle, p->x, p->w, p->conv, p->y,
                                                                algo, bytes);
        },
        op);
  } else if (kind == ConvKind::kGradInput) {
    cudnnConvolutionBwdDataAlgoPerf_t perfs[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    CheckDnn(CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7)(
                 handle, p->w, p->y, p->conv, p->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                 &returned, perfs),
             "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    PickAlgo(
        perfs, returned, fp32_exact, p,
        [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
          return CUDNN(cudnnGetConvolutionBackwardDataWorkspaceSize)(handle, p->w, p->y, p->conv,
                                                                     p->x, algo, bytes);
        },
        op);
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perfs[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    CheckDnn(CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7)(
                 handle, p->x, p->y, p->conv, p->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                 &returned, perfs),
             "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    PickAlgo(
        perfs, returned, fp32_exact, p,
        [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
          return CUDNN(cudnnGetConvolutionBackwardFilterWorkspaceSize)(handle, p->x, p->y, p->conv,
                                                                       p->w, algo, bytes);
        },
        op);
  }
  return plan.release();
}

// The cached plan of (kind, geometry, dtype, device, TF32 setting).
const ConvPlan& PlanFor(cudnnHandle_t handle, ConvKind kind, const ConvGeom& g, DType dtype,
                        int device, const char* op) {
  using Key = std::array<int64_t, 20>;
  const int64_t tf32 = cuda::AllowCudnnTf32();
  // clang-format off
  const Key key = {static_cast<int64_t>(kind), static_cast<int64_t>(dtype), device, tf32,
                   g.n, g.c, g.h, g.w, g.o, g.kh, g.kw, g.oh, g.ow,
                   g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, g.groups};
  // clang-format on
  static std::mutex mu;
  static auto* plans = new std::map<Key, const ConvPlan*>();  // never freed, as the handles
  std::lock_guard<std::mutex> lock(mu);
  auto it = plans->find(key);
  if (it != plans->end()) return *it->second;
  const ConvPlan* plan = BuildPlan(handle, kind, g, dtype, op);
  plans->emplace(key, plan);
  return *plan;
}

// Runs one convolution of `kind`: forward (a = x, b = w, out = y), grad input (a = dy, b = w,
// out = dx) or grad weight (a = dy, b = x, out = dw). All contiguous, none empty.
void RunConv(ConvKind kind, const ConvGeom& g, const Tensor& a, const Tensor& b, const Tensor& out,
             const char* op) {
  const Device& device = out.device();
  const DType dtype = out.dtype();
  // alpha and beta in the compute precision: double for double, float otherwise.
  const double alpha_d = 1, beta_d = 0;
  const float alpha_f = 1, beta_f = 0;
  const void* alpha = dtype == DType::kFloat64 ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta = dtype == DType::kFloat64 ? static_cast<const void*>(&beta_d) : &beta_f;
  WithDnn(device, [&](cudnnHandle_t handle) {
    const ConvPlan& p = PlanFor(handle, kind, g, dtype, device.index, op);
    Tensor workspace;
    if (p.workspace > 0) {
      workspace = Tensor::Empty(Shape({static_cast<int64_t>(p.workspace)}), DType::kUInt8, device);
    }
    void* ws = p.workspace > 0 ? workspace.raw_data() : nullptr;
    if (kind == ConvKind::kForward) {
      CheckDnn(
          CUDNN(cudnnConvolutionForward)(handle, alpha, p.x, a.raw_data(), p.w, b.raw_data(),
                                         p.conv, static_cast<cudnnConvolutionFwdAlgo_t>(p.algo), ws,
                                         p.workspace, beta, p.y, out.raw_data()),
          "cudnnConvolutionForward");
    } else if (kind == ConvKind::kGradInput) {
      CheckDnn(CUDNN(cudnnConvolutionBackwardData)(
                   handle, alpha, p.w, b.raw_data(), p.y, a.raw_data(), p.conv,
                   static_cast<cudnnConvolutionBwdDataAlgo_t>(p.algo), ws, p.workspace, beta, p.x,
                   out.raw_data()),
               "cudnnConvolutionBackwardData");
    } else {
      CheckDnn(CUDNN(cudnnConvolutionBackwardFilter)(
                   handle, alpha, p.x, b.raw_data(), p.y, a.raw_data(), p.conv,
                   static_cast<cudnnConvolutionBwdFilterAlgo_t>(p.algo), ws, p.workspace, beta, p.w,
                   out.raw_data()),
               "cudnnConvolutionBackwardFilter");
    }
    // The workspace goes back to the caching allocator here, which may hand it to the next op
    // at once: that op runs on the same stream, after the convolution.
  });
}

// y (n, o, plane) += bias[o].
template <typename T>
__global__ void AddBiasKernel(int64_t total, int64_t plane, int64_t channels, const T* bias,
                              int64_t bias_stride, T* y) {
  ONEFLOW_CUDA_GRID_LOOP(i, total) {
    const int64_t ch = (i / plane) % channels;
    y[i] = Store<T>(Load(y[i]) + Load(bias[ch * bias_stride]));
  }
}

std::vector<Tensor> Conv2dCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                               const std::vector<TensorMeta>& out) {
  Tensor y = Tensor::Empty(out[0]);
  cuda::DispatchFloatingWithHalf(in[0].dtype(), "conv2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (y.numel() == 0) return;
    cudaStream_t stream = cuda::StreamFor(y.device());
    Tensor x = fn::contiguous(in[0]), w = fn::contiguous(in[1]);
    ConvGeom g = MakeConvGeom(x.shape(), w.shape(), attrs);
    if (x.numel() == 0 || w.numel() == 0) {
      ZeroFill(y, stream);  // a sum over no input channels (or an empty input plane)
    } else {
      RunConv(ConvKind::kForward, g, x, w, y, "conv2d");
    }
    if (in.size() == 3) {
      const Tensor& b = in[2];
      AddBiasKernel<<<cuda::Blocks(y.numel()), cuda::kThreads, 0, stream>>>(
          y.numel(), g.oh * g.ow, g.o, cuda::Ptr<T>(b), b.strides()[0], cuda::Ptr<T>(y));
      ONEFLOW_CUDA_CHECK(cudaGetLastError());
    }
  });
  return {y};
}

// conv2d_grad_input(dy, weight), attr input_shape.
std::vector<Tensor> Conv2dGradInputCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                        const std::vector<TensorMeta>& out) {
  Tensor dx = Tensor::Empty(out[0]);
  cuda::DispatchFloatingWithHalf(in[0].dtype(), "conv2d_grad_input", [&](auto) {
    if (dx.numel() == 0) return;
    Tensor dy = fn::contiguous(in[0]), w = fn::contiguous(in[1]);
    if (dy.numel() == 0 || w.numel() == 0) {
      ZeroFill(dx, cuda::StreamFor(dx.device()));
      return;
    }
    ConvGeom g = MakeConvGeom(dx.shape(), w.shape(), attrs);
    RunConv(ConvKind::kGradInput, g, dy, w, dx, "conv2d_grad_input");
  });
  return {dx};
}

// conv2d_grad_weight(dy, x), attr weight_shape.
std::vector<Tensor> Conv2dGradWeightCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                         const std::vector<TensorMeta>& out) {
  Tensor dw = Tensor::Empty(out[0]);
  cuda::DispatchFloatingWithHalf(in[0].dtype(), "conv2d_grad_weight", [&](auto) {
    if (dw.numel() == 0) return;
    Tensor dy = fn::contiguous(in[0]), x = fn::contiguous(in[1]);
    if (dy.numel() == 0 || x.numel() == 0) {
      ZeroFill(dw, cuda::StreamFor(dw.device()));
      return;
    }
    ConvGeom g = MakeConvGeom(x.shape(), dw.shape(), attrs);
    RunConv(ConvKind::kGradWeight, g, dy, x, dw, "conv2d_grad_weight");
  });
  return {dw};
}

// ================================================================ pooling

// Along one axis: the first and last output whose window (kernel taps at o * stride - pad +
// t * dilation, t < kernel) can reach input position i, clipped to [0, out).
struct OutRange {
  int64_t lo, hi;  // inclusive; empty when lo > hi
};
__device__ __forceinline__ OutRange WindowsAt(int64_t i, int64_t kernel, int64_t stride,
                                              int64_t pad, int64_t dilation, int64_t out) {
  const int64_t first = i + pad - (kernel - 1) * dilation;  // o * stride >= first
  OutRange r;
  r.lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  r.hi = min((i + pad) / stride, out - 1);
  return r;
}

// ---- max_pool2d(x) -> (y, indices): the flat argmax in the H * W plane ----

template <typename T>
__global__ void MaxPoolKernel(int64_t total, PoolGeom g, const T* x, T* y, int64_t* idx) {
  using A = Acc<T>;
  ONEFLOW_CUDA_GRID_LOOP(o, total) {
    const int64_t ow = o % g.ow, oh = (o / g.ow) % g.oh, p = o / (g.ow * g.oh);
    const T* xp = x + p * g.h * g.w;
    A best = -std::numeric_limits<A>::infinity();
    int64_t best_idx;
    nn_util::MaxOverWindow(g, xp, oh, ow, [](T v) { return Load(v); }, &best, &best_idx);
    y[o] = Store<T>(best);
    idx[o] = best_idx;
  }
}

std::vector<Tensor> MaxPool2dCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                  const std::vector<TensorMeta>& out) {
  Tensor y = Tensor::Empty(out[0]), idx = Tensor::Empty(out[1]);
  cuda::DispatchFloatingWithHalf(in[0].dtype(), "max_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (y.numel() == 0) return;
    Tensor x = fn::contiguous(in[0]);
    PoolGeom g = MakePoolGeom(x.shape(), attrs, "max_pool2d");
    cudaStream_t stream = cuda::StreamFor(y.device());
    MaxPoolKernel<<<cuda::Blocks(y.numel()), cuda::kThreads, 0, stream>>>(
        y.numel(), g, cuda::Ptr<T>(x), cuda::Ptr<T>(y), idx.data<int64_t>());
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
  });
  return {y, idx};
}

// dx at each input pixel: the sum of dy over the windows whose argmax it is.
template <typename T>
__global__ void MaxPoolGradKernel(int64_t total, PoolGeom g, const T* dy, const int64_t* idx,
                                  T* dx) {
  ONEFLOW_CUDA_GRID_LOOP(i, total) {
    const int64_t iw = i % g.w, ih = (i / g.w) % g.h, p = i / (g.w * g.h);
    const int64_t flat = ih * g.w + iw;
    const OutRange rh = WindowsAt(ih, g.kh, g.sh, g.ph, g.dh, g.oh);
    const OutRange rw = WindowsAt(iw, g.kw, g.sw, g.pw, g.dw, g.ow);
    const int64_t base = p * g.oh * g.ow;
    Acc<T> acc = 0;
    for (int64_t oh = rh.lo; oh <= rh.hi; ++oh) {
      for (int64_t ow = rw.lo; ow <= rw.hi; ++ow) {
        const int64_t o = base + oh * g.ow + ow;
        if (idx[o] == flat) acc += Load(dy[o]);
      }
    }
    dx[i] = Store<T>(acc);
  }
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
    MaxPoolGradKernel<<<cuda::Blocks(dx.numel()), cuda::kThreads, 0, stream>>>(
        dx.numel(), g, cuda::Ptr<T>(dy), idx.data<int64_t>(), cuda::Ptr<T>(dx));
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
  });
  return {dx};
}

// ---- avg_pool2d ----

// The input rows [h0, h1) and columns [w0, w1) of output (oh, ow)'s window and the divisor.
// As on CPU (and in PyTorch), count_include_pad counts the padding but not the overhang of
// ceil_mode.
struct AvgWindow {
  int64_t h0, h1, w0, w1, count;
};
__device__ __forceinline__ AvgWindow AvgWindowOf(const PoolGeom& g, int64_t oh, int64_t ow) {
  AvgWindow r;
  r.h0 = oh * g.sh - g.ph, r.w0 = ow * g.sw - g.pw;
  r.h1 = min(r.h0 + g.kh, g.h + g.ph), r.w1 = min(r.w0 + g.kw, g.w + g.pw);
  const int64_t padded_count = (r.h1 - r.h0) * (r.w1 - r.w0);
  r.h0 = max(r.h0, int64_t(0)), r.w0 = max(r.w0, int64_t(0));
  r.h1 = min(r.h1, g.h), r.w1 = min(r.w1, g.w);
  r.count = g.count_include_pad ? padded_count : (r.h1 - r.h0) * (r.w1 - r.w0);
  return r;
}

template <typename T>
__global__ void AvgPoolKernel(int64_t total, PoolGeom g, const T* x, T* y) {
  using A = Acc<T>;
  ONEFLOW_CUDA_GRID_LOOP(o, total) {
    const int64_t ow = o % g.ow, oh = (o / g.ow) % g.oh, p = o / (g.ow * g.oh);
    const T* xp = x + p * g.h * g.w;
    const AvgWindow win = AvgWindowOf(g, oh, ow);
    A acc = 0;
    if (win.count > 0) {
      const A scale = A(1) / A(win.count);
      for (int64_t ih = win.h0; ih < win.h1; ++ih) {
        for (int64_t iw = win.w0; iw < win.w1; ++iw) acc += Load(xp[ih * g.w + iw]) * scale;
      }
    }
    y[o] = Store<T>(acc);
  }
}

template <typename T>
__global__ void AvgPoolGradKernel(int64_t total, PoolGeom g, const T* dy, T* dx) {
  using A = Acc<T>;
  ONEFLOW_CUDA_GRID_LOOP(i, total) {
    const int64_t iw = i % g.w, ih = (i / g.w) % g.h, p = i / (g.w * g.h);
    const OutRange rh = WindowsAt(ih, g.kh, g.sh, g.ph, 1, g.oh);
    const OutRange rw = WindowsAt(iw, g.kw, g.sw, g.pw, 1, g.ow);
    const T* dyp = dy + p * g.oh * g.ow;
    A acc = 0;
    for (int64_t oh = rh.lo; oh <= rh.hi; ++oh) {
      for (int64_t ow = rw.lo; ow <= rw.hi; ++ow) {
        const AvgWindow win = AvgWindowOf(g, oh, ow);
        if (ih < win.h0 || ih >= win.h1 || iw < win.w0 || iw >= win.w1) continue;
        acc += Load(dyp[oh * g.ow + ow]) * (A(1) / A(win.count));
      }
    }
    dx[i] = Store<T>(acc);
  }
}

std::vector<Tensor> AvgPool2dCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                  const std::vector<TensorMeta>& out) {
  Tensor y = Tensor::Empty(out[0]);
  cuda::DispatchFloatingWithHalf(in[0].dtype(), "avg_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (y.numel() == 0) return;
    Tensor x = fn::contiguous(in[0]);
    PoolGeom g = MakePoolGeom(x.shape(), attrs, "avg_pool2d");
    AvgPoolKernel<<<cuda::Blocks(y.numel()), cuda::kThreads, 0, cuda::StreamFor(y.device())>>>(
        y.numel(), g, cuda::Ptr<T>(x), cuda::Ptr<T>(y));
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
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
    AvgPoolGradKernel<<<cuda::Blocks(dx.numel()), cuda::kThreads, 0,
                        cuda::StreamFor(dx.device())>>>(dx.numel(), g, cuda::Ptr<T>(dy),
                                                        cuda::Ptr<T>(dx));
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
  });
  return {dx};
}

// ---- adaptive_avg_pool2d ----
// Output cell o of `out` covers input [floor(o * in / out), ceil((o + 1) * in / out)); input i
// lies in the cells [floor(i * out / in), ceil((i + 1) * out / in)).

__device__ __forceinline__ int64_t AdaptiveStart(int64_t o, int64_t in, int64_t out) {
  return o * in / out;
}
__device__ __forceinline__ int64_t AdaptiveEnd(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

template <typename T>
__global__ void AdaptiveAvgPoolKernel(int64_t total, PoolGeom g, const T* x, T* y) {
  using A = Acc<T>;
  ONEFLOW_CUDA_GRID_LOOP(o, total) {
    const int64_t ow = o % g.ow, oh = (o / g.ow) % g.oh, p = o / (g.ow * g.oh);
    const T* xp = x + p * g.h * g.w;
    const int64_t h0 = AdaptiveStart(oh, g.h, g.oh), h1 = AdaptiveEnd(oh, g.h, g.oh);
    const int64_t w0 = AdaptiveStart(ow, g.w, g.ow), w1 = AdaptiveEnd(ow, g.w, g.ow);
    const A scale = A(1) / A((h1 - h0) * (w1 - w0));
    A acc = 0;
    for (int64_t ih = h0; ih < h1; ++ih) {
      for (int64_t iw = w0; iw < w1; ++iw) acc += Load(xp[ih * g.w + iw]) * scale;
    }
    y[o] = Store<T>(acc);
  }
}

template <typename T>
__global__ void AdaptiveAvgPoolGradKernel(int64_t total, PoolGeom g, const T* dy, T* dx) {
  using A = Acc<T>;
  ONEFLOW_CUDA_GRID_LOOP(i, total) {
    const int64_t iw = i % g.w, ih = (i / g.w) % g.h, p = i / (g.w * g.h);
    const int64_t oh0 = AdaptiveStart(ih, g.oh, g.h), oh1 = min(AdaptiveEnd(ih, g.oh, g.h), g.oh);
    const int64_t ow0 = AdaptiveStart(iw, g.ow, g.w), ow1 = min(AdaptiveEnd(iw, g.ow, g.w), g.ow);
    const T* dyp = dy + p * g.oh * g.ow;
    A acc = 0;
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const int64_t h0 = AdaptiveStart(oh, g.h, g.oh), h1 = AdaptiveEnd(oh, g.h, g.oh);
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const int64_t w0 = AdaptiveStart(ow, g.w, g.ow), w1 = AdaptiveEnd(ow, g.w, g.ow);
        acc += Load(dyp[oh * g.ow + ow]) * (A(1) / A((h1 - h0) * (w1 - w0)));
      }
    }
    dx[i] = Store<T>(acc);
  }
}

std::vector<Tensor> AdaptiveAvgPool2dCuda(const std::vector<Tensor>& in, const Attrs&,
                                          const std::vector<TensorMeta>& out) {
  Tensor y = Tensor::Empty(out[0]);
  cuda::DispatchFloatingWithHalf(in[0].dtype(), "adaptive_avg_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (y.numel() == 0) return;
    Tensor x = fn::contiguous(in[0]);
    PoolGeom g = nn_util::MakePlaneGeom(x.shape(), y.shape());
    AdaptiveAvgPoolKernel<<<cuda::Blocks(y.numel()), cuda::kThreads, 0,
                            cuda::StreamFor(y.device())>>>(y.numel(), g, cuda::Ptr<T>(x),
                                                           cuda::Ptr<T>(y));
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
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
    AdaptiveAvgPoolGradKernel<<<cuda::Blocks(dx.numel()), cuda::kThreads, 0,
                                cuda::StreamFor(dx.device())>>>(dx.numel(), g, cuda::Ptr<T>(dy),
                                                                cuda::Ptr<T>(dx));
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
  });
  return {dx};
}

}  // namespace

ONEFLOW_REGISTER_KERNEL(conv2d, kCUDA, Conv2dCuda);
ONEFLOW_REGISTER_KERNEL(conv2d_grad_input, kCUDA, Conv2dGradInputCuda);
ONEFLOW_REGISTER_KERNEL(conv2d_grad_weight, kCUDA, Conv2dGradWeightCuda);
ONEFLOW_REGISTER_KERNEL(max_pool2d, kCUDA, MaxPool2dCuda);
ONEFLOW_REGISTER_KERNEL(max_pool2d_grad, kCUDA, MaxPool2dGradCuda);
ONEFLOW_REGISTER_KERNEL(avg_pool2d, kCUDA, AvgPool2dCuda);
ONEFLOW_REGISTER_KERNEL(avg_pool2d_grad, kCUDA, AvgPool2dGradCuda);
ONEFLOW_REGISTER_KERNEL(adaptive_avg_pool2d, kCUDA, AdaptiveAvgPool2dCuda);
ONEFLOW_REGISTER_KERNEL(adaptive_avg_pool2d_grad, kCUDA, AdaptiveAvgPool2dGradCuda);

}  // namespace oneflow
