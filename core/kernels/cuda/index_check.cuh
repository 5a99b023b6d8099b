// Reporting out-of-range indices (gather, scatter_add, index_select, nll_loss targets) as the
// CPU kernels do, without a host wait per call: a CUDA kernel cannot throw, so it skips a bad
// element and records the first bad position in a slot of device memory
// (kernels/bad_index.cuh); a one-thread kernel then stores the index value found there, and
// the host reads the slot at its next synchronisation point (a copy to the host, Tensor.item,
// oneflow.cuda.synchronize: cuda::WaitStream) and throws the op's error there, as a CUDA
// error surfaces at the next synchronising call in PyTorch (without poisoning the context).
//
//   cuda::BadIndex bad(x.device(), stream);
//   MyKernel<<<..., stream>>>(..., bad.slot());   // cuda::RecordBad(slot, pos) on a bad one
//   bad.Report(reader, [](int64_t k) { throw IndexError(StrCat("gather: index ", k, ...)); });
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <utility>

#include "core/kernels/cuda/cuda_util.h"
#include "core/kernels/cuda/kernels/bad_index.cuh"
#include "core/tensor.h"

namespace oneflow {
namespace cuda {

class BadIndex {
 public:
  // A slot of the device's lazy checks, reset on stream.
  BadIndex(const Device& device, cudaStream_t stream)
      : device_(device.index), stream_(stream), slot_(AcquireBadSlot(device.index, stream)) {}
  BadSlot slot() const { return slot_; }
  // After the kernels that record into slot(): captures the value at the first bad position
  // through reader (on the stream, so the index tensor may be freed on return) and leaves
  // `raise(value)` to the next synchronisation point, which calls it when there was one.
  template <typename Reader>
  void Report(const Reader& reader, std::function<void(int64_t value)> raise) {
    OF_CUDA_LAUNCH(CaptureBadValueKernel<Reader>, 1, 1, 0, stream_, slot_, reader);
    SubmitBadSlot(device_, slot_, std::move(raise));
  }

 private:
  int device_;
  cudaStream_t stream_;
  BadSlot slot_;
};

}  // namespace cuda
}  // namespace oneflow
