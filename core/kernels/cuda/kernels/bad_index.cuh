// The device side of the lazy index checks (core/kernels/cuda/index_check.cuh): a kernel that
// meets an out-of-range index skips the element and records its position in a slot of device
// memory, {first bad position, its index value}; the host reads the slot at its next
// synchronisation point and raises the CPU kernel's error there.
//
//   if (t < -bound || t >= bound) { cuda::RecordBad(slot, e); continue; }
//   ...after the kernel, on the same stream:
//   OF_CUDA_LAUNCH(cuda::CaptureBadValueKernel<Reader>, 1, 1, 0, stream, slot, reader);
#pragma once

#include <cstdint>

#include "core/kernels/cuda/launch.cuh"

namespace oneflow {
namespace cuda {

// slot[0]: the lowest bad position (all ones: none); slot[1]: the index value there.
using BadSlot = unsigned long long*;

// Keeps the lowest bad position, so the error names the first bad element in order.
__device__ __forceinline__ void RecordBad(BadSlot slot, int64_t pos) {
  atomicMin(slot, static_cast<unsigned long long>(pos));
}

// One thread, after the kernels that record into slot: the index value at the first bad
// position, read through reader(e) (the value of element e, row-major, of the index tensor).
template <typename Reader>
__global__ void CaptureBadValueKernel(BadSlot slot, Reader reader) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  const unsigned long long pos = slot[0];
  if (pos != ~0ull) slot[1] = static_cast<unsigned long long>(reader(static_cast<int64_t>(pos)));
}

// Element e of a contiguous index tensor.
template <typename I>
struct ContiguousIndexReader {
  const I* p;
  __host__ __device__ int64_t operator()(int64_t e) const { return static_cast<int64_t>(p[e]); }
};

}  // namespace cuda
}  // namespace oneflow
