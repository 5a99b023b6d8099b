// The elementwise launcher of the CUDA kernels for tensors: out = f(in...) over out's shape,
// each input broadcast to it, through the kernels of core/kernels/cuda/kernels/elementwise.cuh
// (16-byte vectorised where every operand is contiguous and aligned, 32-bit strided with fast
// division otherwise).
//
//   // o = a + b for float32 tensors; element types are core's (Half, BFloat16, float, ...)
//   cuda::Map<float, float, float>("add", o, AddF{}, a, b);
//
// f is a device functor called with Acc<DevT<I>> values (float for the half types); its
// result is stored into out's element type with Store. Launches nothing when out is empty.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/cuda_util.h"
#include "core/kernels/cuda/kernels/elementwise.cuh"

namespace oneflow {
namespace cuda {

static_assert(kElementwiseMaxDims == kMaxDims, "one dims limit for every CUDA kernel");

// The multiprocessor count of device `index`, asked of the driver once per device.
inline int MultiprocessorCount(int index) {
  constexpr int kCached = 64;
  static std::atomic<int> cache[kCached];
  if (index >= 0 && index < kCached) {
    if (const int v = cache[index].load(std::memory_order_relaxed)) return v;
  }
  int v = 0;
  ONEFLOW_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, index));
  if (index >= 0 && index < kCached) cache[index].store(v, std::memory_order_relaxed);
  return v;
}

// t as the launcher's operand (element 0 of its view, its sizes and strides).
inline ElementwiseOperand OperandOf(const Tensor& t) {
  return {t.raw_data(), static_cast<int>(t.ndim()), t.shape().dims().data(), t.strides().data()};
}

namespace detail {

// Whether the vectorised kernel could take t as it is: one element, or contiguous in shape
// and 16-byte aligned.
inline bool LinearAsIs(const Tensor& t, const Shape& shape) {
  return t.numel() == 1 || (t.is_contiguous() && t.shape() == shape &&
                            reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0);
}

// Where no strided kernel is instantiated (MapContiguous, and past 32-bit offsets every op but
// the copies): the operands that are not contiguous and aligned become contiguous copies
// (CopyStrided) and the op runs vectorised on them, into a temporary when out is a view.
template <typename O, typename... I, typename F, typename... Ts>
void MapViaContiguous(const char* op, const Tensor& out, F f, const Ts&... in) {
  const Shape& shape = out.shape();
  auto linear = [&](const Tensor& t) {
    if (LinearAsIs(t, shape)) return t;
    Tensor c = Tensor::Empty(shape, t.dtype(), t.device());
    CopyStrided(c, t);
    return c;
  };
  const bool out_as_is = LinearAsIs(out, shape);
  const Tensor o = out_as_is ? out : Tensor::Empty(shape, out.dtype(), out.device());
  const std::array<Tensor, sizeof...(Ts)> ins = {linear(in)...};
  ElementwiseOperand ops[sizeof...(Ts) + 1] = {OperandOf(o)};
  for (size_t k = 0; k < sizeof...(Ts); ++k) ops[k + 1] = OperandOf(ins[k]);
  const ElementwiseStatus s = LaunchElementwise<StridedKernels::kNone, DevT<O>, DevT<I>...>(
      f, ops, MultiprocessorCount(out.device().index), StreamFor(out.device()));
  ONEFLOW_CHECK(s == ElementwiseStatus::kDone, op,
                ": internal error: contiguous operands did not take the vectorised kernel");
  if (!out_as_is) CopyStrided(out, o);
}

template <StridedKernels kStrided, typename O, typename... I, typename F, typename... Ts>
void MapImpl(const char* op, const Tensor& out, F f, const Ts&... in) {
  static_assert(sizeof...(I) == sizeof...(Ts), "Map: one element type per input");
  if (out.numel() == 0) return;
  cudaStream_t stream = StreamFor(out.device());
  const ElementwiseOperand ops[] = {OperandOf(out), OperandOf(in)...};
  switch (LaunchElementwise<kStrided, DevT<O>, DevT<I>...>(
      f, ops, MultiprocessorCount(out.device().index), stream)) {
    case ElementwiseStatus::kDone:
      return;
    case ElementwiseStatus::kTooManyDims:
      throw Error(StrCat(op, ": CUDA kernels take at most ", kMaxDims,
                         " dims after merging contiguous ones, got shape ", out.shape()));
    case ElementwiseStatus::kNeedsContiguous:
      return MapViaContiguous<O, I...>(op, out, f, in...);
  }
}

}  // namespace detail

// REQUIRES: out on a CUDA device, the inputs on that device and broadcastable to out's shape;
// O and I... are the element types of out and of each input.
template <typename O, typename... I, typename F, typename... Ts>
void Map(const char* op, const Tensor& out, F f, const Ts&... in) {
  detail::MapImpl<StridedKernels::k32, O, I...>(op, out, f, in...);
}

// As Map with the vectorised kernel only (half the kernels to compile): views and broadcasts
// are first copied contiguous. For ops that rarely see views (the unary table, casts).
template <typename O, typename... I, typename F, typename... Ts>
void MapContiguous(const char* op, const Tensor& out, F f, const Ts&... in) {
  detail::MapImpl<StridedKernels::kNone, O, I...>(op, out, f, in...);
}

}  // namespace cuda
}  // namespace oneflow
