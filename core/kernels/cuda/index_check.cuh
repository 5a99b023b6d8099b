// Reporting out-of-range indices (gather, scatter_add, index_select, nll_loss targets) as the
// CPU kernels do: a CUDA kernel cannot throw, so it skips a bad element and records the first
// bad position in a device word; the host then reads the word and throws the CPU's error.
//
// Reading the word waits for the stream: a host synchronisation per call, accepted so that a
// bad index raises the same IndexError as on CPU instead of corrupting memory (or trapping,
// as PyTorch does, which poisons the CUDA context for the rest of the process).
//
//   cuda::BadIndex bad(x.device(), stream);
//   MyKernel<<<..., stream>>>(..., bad.slot());   // cuda::RecordBad(slot, pos) on a bad one
//   if (int64_t pos = bad.First(stream); pos >= 0) throw IndexError(...);
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/kernels/cuda/cuda_util.h"
#include "core/tensor.h"

namespace oneflow {
namespace cuda {

using BadSlot = unsigned long long*;

// Keeps the lowest bad position, so the error names the first bad element in order.
__device__ __forceinline__ void RecordBad(BadSlot slot, int64_t pos) {
  atomicMin(slot, static_cast<unsigned long long>(pos));
}

class BadIndex {
 public:
  BadIndex(const Device& device, cudaStream_t stream)
      : word_(Tensor::Empty(Shape({1}), DType::kInt64, device)) {
    // All ones: the largest unsigned value, above every position.
    ONEFLOW_CUDA_CHECK(cudaMemsetAsync(word_.raw_data(), 0xff, sizeof(unsigned long long), stream));
  }
  BadSlot slot() const { return static_cast<BadSlot>(word_.raw_data()); }
  // The first bad position recorded by the work queued so far on stream, or -1.
  int64_t First(cudaStream_t stream) const {
    unsigned long long pos = 0;
    ONEFLOW_CUDA_CHECK(
        cudaMemcpyAsync(&pos, word_.raw_data(), sizeof(pos), cudaMemcpyDeviceToHost, stream));
    WaitStream(word_.device().index, stream);
    return pos == ~0ull ? -1 : static_cast<int64_t>(pos);
  }

 private:
  Tensor word_;
};

// One element of a device tensor of dtype int32 or int64, read to the host (error paths only:
// it waits for the stream).
inline int64_t ReadIndexValue(const Tensor& index, int64_t offset, cudaStream_t stream) {
  int64_t v = 0;
  const size_t es = SizeOf(index.dtype());
  const char* p = static_cast<const char*>(index.raw_data()) + offset * es;
  if (index.dtype() == DType::kInt64) {
    ONEFLOW_CUDA_CHECK(cudaMemcpyAsync(&v, p, es, cudaMemcpyDeviceToHost, stream));
    WaitStream(index.device().index, stream);
  } else {
    int32_t w = 0;
    ONEFLOW_CUDA_CHECK(cudaMemcpyAsync(&w, p, es, cudaMemcpyDeviceToHost, stream));
    WaitStream(index.device().index, stream);
    v = w;
  }
  return v;
}

}  // namespace cuda
}  // namespace oneflow
