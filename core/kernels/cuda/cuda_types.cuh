// Device-side element types for .cu kernels: core's storage types Half and BFloat16 are
// read as CUDA's __half and __nv_bfloat16; arithmetic on them goes through float (Acc<T>).
//
//   DispatchWithHalf(x.dtype(), "relu", [&](auto tag) {
//     using T = DevT<typename decltype(tag)::type>;
//     auto* p = reinterpret_cast<T*>(x.raw_data());
//   });
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "core/dtype.h"
#include "core/tensor.h"

namespace oneflow {
namespace cuda {

template <typename T>
struct DevType {
  using type = T;
};
template <>
struct DevType<Half> {
  using type = __half;
};
template <>
struct DevType<BFloat16> {
  using type = __nv_bfloat16;
};
template <typename T>
using DevT = typename DevType<T>::type;

// The type arithmetic on T is carried out in: float for the half types, T otherwise.
template <typename T>
using Acc =
    std::conditional_t<std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>, float, T>;

template <typename T>
__device__ __forceinline__ Acc<T> Load(T v) {
  return static_cast<Acc<T>>(v);
}
template <typename T, typename A>
__device__ __forceinline__ T Store(A v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// Typed pointer to element 0 of a tensor's view, in the device type.
template <typename T>
DevT<T>* Ptr(const Tensor& t) {
  return reinterpret_cast<DevT<T>*>(t.raw_data());
}

}  // namespace cuda
}  // namespace oneflow
