// Type dispatch for CUDA kernels of floating point ops: on CUDA the half types are computed by
// the kernels themselves, in float (cuda::Acc); CPU kernels get them widened to float32 by the
// dispatch seam (core/dispatch.cc) and dispatch with DispatchFloating.
//
//   cuda::DispatchFloatingWithHalf(x.dtype(), "avg_pool2d", [&](auto tag) {
//     using T = cuda::DevT<typename decltype(tag)::type>;  // float, double, __half, bf16
//   });
#pragma once

#include "core/dtype.h"

namespace oneflow {
namespace cuda {

// float16, bfloat16, float32 and float64 (core/dtype.h's DispatchFloatingWithHalf).
using ::oneflow::DispatchFloatingWithHalf;

}  // namespace cuda
}  // namespace oneflow
