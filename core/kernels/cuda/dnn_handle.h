// The cuDNN handle of each device and the one-line check of a cuDNN status, shared by the
// cuDNN-backed kernels (conv.cu, batch_norm.cu). Host code only; cuDNN is loaded at first use
// (cuda_libs.h).
//
//   cuda::WithDnn(x.device(), [&](cudnnHandle_t h) {
//     cuda::CheckDnn(CUDNN(cudnnBatchNormalizationForwardInference)(h, ...),
//                    "batch_norm_elemt: cudnnBatchNormalizationForwardInference");
//   });
#pragma once

#include <cudnn.h>

#include <climits>
#include <mutex>
#include <string>

#include "core/error.h"
#include "core/kernels/cuda/cuda_libs.h"
#include "core/kernels/cuda/cuda_util.h"

namespace oneflow {
namespace cuda {

// Throws "cuda: <what> failed: <status>: <cuDNN's last error message>" (on one line).
inline void CheckDnn(cudnnStatus_t status, const char* what) {
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

// A size as cuDNN's int, or "<op>: size N is beyond cuDNN's int range".
inline int DnnInt(int64_t v, const char* op) {
  if (v > INT_MAX) throw Error(StrCat(op, ": size ", v, " is beyond cuDNN's int range"));
  return static_cast<int>(v);
}

// The cuDNN handle of a device (cuda::PerDevice).
struct DnnContext {
  std::mutex mu;  // the handle's stream is set per call
  cudnnHandle_t handle = nullptr;
};

// Runs f(handle) with the device's handle bound to its compute stream, holding the handle's lock.
template <typename F>
void WithDnn(const Device& device, F&& f) {
  cudaStream_t stream = StreamFor(device);  // checks the device and makes it current
  DnnContext& ctx = PerDevice<DnnContext>(device.index);
  std::lock_guard<std::mutex> lock(ctx.mu);
  if (!ctx.handle) CheckDnn(CUDNN(cudnnCreate)(&ctx.handle), "cudnnCreate");
  CheckDnn(CUDNN(cudnnSetStream)(ctx.handle, stream), "cudnnSetStream");
  f(ctx.handle);
}

// A cudnnTensorDescriptor_t destroyed with its scope.
class DnnTensorDesc {
 public:
  DnnTensorDesc() {
    CheckDnn(CUDNN(cudnnCreateTensorDescriptor)(&d_), "cudnnCreateTensorDescriptor");
  }
  ~DnnTensorDesc() { CUDNN(cudnnDestroyTensorDescriptor)(d_); }
  DnnTensorDesc(const DnnTensorDesc&) = delete;
  DnnTensorDesc& operator=(const DnnTensorDesc&) = delete;
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

}  // namespace cuda
}  // namespace oneflow
