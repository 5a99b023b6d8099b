// CUDA's memory: the caching allocator (core/caching_allocator.h) over cudaMalloc and cudaFree,
// installed as the CUDA device type's Allocator.
//
// Ordering: every use of a block is on its device's one compute stream, so a freed block may go
// to the next request without synchronising; work on another stream (NCCL) is ordered before any
// later use by the compute stream waiting for its event, and keeps its tensors alive until that
// wait is queued. When cudaMalloc runs out of memory the cache is returned to the driver and the
// allocation retried once; any other cudaMalloc error (often an earlier kernel's fault, reported
// by the next call) is named as it is.
#include "core/caching_allocator.h"
#include "core/kernels/cuda/cuda_util.h"

namespace oneflow {
namespace cuda {

namespace {

class DeviceMemory : public RawMemory {
 public:
  void* Malloc(size_t nbytes, int index) override {
    RequireDevice(index, "cuda allocator");
    SetDevice(index);
    void* p = nullptr;
    // A capture allocates its pool's segments (the graph keeps them): cudaMalloc is not work on
    // the stream, so this thread relaxes the capture's check of unsafe calls around it.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&mode);
    cudaError_t err = cudaMalloc(&p, nbytes);
    cudaThreadExchangeStreamCaptureMode(&mode);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return nullptr;
    }
    if (err != cudaSuccess) {
      cudaGetLastError();
      throw Error(StrCat("cuda allocator: cudaMalloc of ", nbytes, " bytes on cuda:", index,
                         " failed: ", cudaGetErrorName(err), ": ", cudaGetErrorString(err),
                         " (not out of memory: the device is in an error state, often from an ",
                         "earlier kernel's fault, or a capture that does not allow it)"));
    }
    return p;
  }
  void Free(void* ptr, int index) override {
    SetDevice(index);
    cudaFree(ptr);
  }
  void WaitDevice(int index) override { cuda::WaitDevice(index); }
  std::string Name(int index) override { return StrCat("cuda:", index); }
};

CachingAllocator& TheAllocator() {
  static DeviceMemory memory;
  static auto* a = new CachingAllocator(&memory, "cuda allocator");  // outlives tensors at exit
  return *a;
}

[[maybe_unused]] const bool g_installed = [] {
  SetAllocator(DeviceType::kCUDA, &TheAllocator());
  return true;
}();

}  // namespace

void EmptyCache() {
  if (DeviceCount()) TheAllocator().EmptyCache(-1);
}

}  // namespace cuda
}  // namespace oneflow
