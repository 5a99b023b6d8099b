// Type dispatch for CUDA kernels of floating point ops: the CPU kernels refuse the storage-only
// half types (DispatchFloating), while on CUDA they compute in float (cuda::Acc).
//
//   cuda::DispatchFloatingWithHalf(x.dtype(), "avg_pool2d", [&](auto tag) {
//     using T = cuda::DevT<typename decltype(tag)::type>;  // float, double, __half, bf16
//   });
#pragma once

#include <utility>

#include "core/dtype.h"

namespace oneflow {
namespace cuda {

// Calls f(TypeTag<T>{}) for float16, bfloat16, float32 and float64; other dtypes get
// DispatchFloating's error ("<op>: expected a floating point tensor, got int64").
template <typename F>
decltype(auto) DispatchFloatingWithHalf(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::kFloat16:
      return f(TypeTag<Half>{});
    case DType::kBFloat16:
      return f(TypeTag<BFloat16>{});
    default:
      return DispatchFloating(dtype, op, std::forward<F>(f));
  }
}

}  // namespace cuda
}  // namespace oneflow
