// CUDA kernels of conv2d and its two backward ops (core/ops/nn/conv.cc) on cuDNN: one cuDNN
// handle per device; per geometry the descriptors and the algorithm (the first of cuDNN's
// heuristic ranking that runs with a workspace within budget) are chosen once and cached.
// Float32 keeps full precision (FMA math, no FFT/Winograd) unless TF32 is allowed.

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
#include "core/kernels/cuda/dnn_handle.h"
#include "core/op_registry.h"
#include "core/ops/nn/geometry.h"
#include "core/ops/nn/nn_util.h"

namespace oneflow {

namespace {

using cuda::Acc;
using cuda::DevT;
using cuda::Load;
using cuda::Store;

using cuda::ZeroFill;

// ================================================================ convolution (cuDNN)

using cuda::CheckDnn;
using cuda::DnnInt;
using cuda::WithDnn;

// Largest workspace an algorithm may ask for; beyond it the next one in the ranking is taken.
constexpr size_t kMaxConvWorkspaceBytes = size_t(1) << 30;

enum class ConvKind : int64_t { kForward, kGradInput, kGradWeight };

// Shared with the CPU ops (core/ops/nn/geometry.h): one validation and output size for both.
using nn_util::ConvGeom;
using nn_util::MakeConvGeom;

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

}  // namespace

ONEFLOW_REGISTER_KERNEL(conv2d, kCUDA, Conv2dCuda);
ONEFLOW_REGISTER_KERNEL(conv2d_grad_input, kCUDA, Conv2dGradInputCuda);
ONEFLOW_REGISTER_KERNEL(conv2d_grad_weight, kCUDA, Conv2dGradWeightCuda);

}  // namespace oneflow
