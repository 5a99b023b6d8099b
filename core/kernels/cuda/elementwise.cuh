// The elementwise launcher of the CUDA kernels: out = f(in...) over out's shape, each input
// broadcast to it. One linear kernel serves the common case (every input contiguous in out's
// shape or a single element, out contiguous); a strided one serves views and broadcasts.
//
//   // o = a + b for float32 tensors; element types are core's (Half, BFloat16, float, ...)
//   cuda::Map<float, float, float>("add", o, AddF{}, a, b);
//
// f is a device functor called with Acc<DevT<I>> values (float for the half types); its
// result is stored into out's element type with Store. Launches nothing when out is empty.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/cuda_util.h"

namespace oneflow {
namespace cuda {

template <typename T>
struct LinearIn {
  const T* ptr;
  int64_t step;  // 1: contiguous in out's shape; 0: one element read by every output
};

template <typename T>
struct StridedIn {
  const T* ptr;
  Geometry g;
};

template <typename O, typename F, typename... I>
__global__ void MapLinearKernel(int64_t n, O* out, F f, LinearIn<I>... in) {
  ONEFLOW_CUDA_GRID_LOOP(i, n) { out[i] = Store<O>(f(Load(in.ptr[i * in.step])...)); }
}

template <typename O, typename F, typename... I>
__global__ void MapStridedKernel(int64_t n, O* out, Geometry out_g, bool out_contiguous, F f,
                                 StridedIn<I>... in) {
  ONEFLOW_CUDA_GRID_LOOP(i, n) {
    const int64_t o = out_contiguous ? i : OffsetOf(out_g, i);
    out[o] = Store<O>(f(Load(in.ptr[OffsetOf(in.g, i)])...));
  }
}

// Geometries of out (entry 0) and of each input viewed in out's shape. Size-1 dims are
// dropped and neighbouring dims merged where every operand steps through them as through one
// dim, so most views index with one or two divisions per operand, and tensors of more than
// kMaxDims dims work when their layout allows merging down to kMaxDims.
inline std::vector<Geometry> CoalescedGeometries(const char* op, const Tensor& out,
                                                 const std::vector<const Tensor*>& in) {
  const Shape& shape = out.shape();
  std::vector<const Tensor*> ts = {&out};
  ts.insert(ts.end(), in.begin(), in.end());
  const size_t k = ts.size();
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides(k);
  std::vector<int64_t> st(k);
  for (int64_t d = 0; d < shape.ndim(); ++d) {
    if (shape[d] == 1) continue;
    for (size_t t = 0; t < k; ++t) {
      const int64_t j = d - (shape.ndim() - ts[t]->ndim());
      st[t] = (j < 0 || ts[t]->shape()[j] == 1) ? 0 : ts[t]->strides()[j];
    }
    bool merge = !sizes.empty();
    for (size_t t = 0; t < k && merge; ++t) merge = strides[t].back() == st[t] * shape[d];
    if (merge) {
      sizes.back() *= shape[d];
      for (size_t t = 0; t < k; ++t) strides[t].back() = st[t];
    } else {
      sizes.push_back(shape[d]);
      for (size_t t = 0; t < k; ++t) strides[t].push_back(st[t]);
    }
  }
  ONEFLOW_CHECK(sizes.size() <= static_cast<size_t>(kMaxDims), op, ": CUDA kernels take at most ",
                kMaxDims, " dims after merging contiguous ones, got ", sizes.size(), " for shape ",
                shape);
  std::vector<Geometry> g(k);
  for (size_t t = 0; t < k; ++t) {
    g[t].ndim = static_cast<int>(sizes.size());
    for (size_t d = 0; d < sizes.size(); ++d) {
      g[t].sizes[d] = sizes[d];
      g[t].strides[d] = strides[t][d];
    }
  }
  return g;
}

namespace detail {

// The linear kernel's step for t, or -1 when t needs the strided kernel.
inline int64_t LinearStep(const Tensor& t, const Tensor& out) {
  if (t.numel() == 1) return 0;
  if (t.is_contiguous() && t.shape() == out.shape()) return 1;
  return -1;
}

template <typename O, typename... I, typename F, size_t... K, typename... Ts>
void MapImpl(const char* op, const Tensor& out, F f, std::index_sequence<K...>, const Ts&... in) {
  const int64_t n = out.numel();
  if (n == 0) return;
  cudaStream_t stream = StreamFor(out.device());
  const std::array<int64_t, sizeof...(Ts)> steps = {LinearStep(in, out)...};
  bool linear = out.is_contiguous();
  for (int64_t s : steps) linear = linear && s >= 0;
  if (linear) {
    MapLinearKernel<DevT<O>, F, DevT<I>...><<<Blocks(n), kThreads, 0, stream>>>(
        n, Ptr<O>(out), f, LinearIn<DevT<I>>{Ptr<I>(in), steps[K]}...);
  } else {
    const std::vector<Geometry> g = CoalescedGeometries(op, out, {&in...});
    MapStridedKernel<DevT<O>, F, DevT<I>...><<<Blocks(n), kThreads, 0, stream>>>(
        n, Ptr<O>(out), g[0], out.is_contiguous(), f, StridedIn<DevT<I>>{Ptr<I>(in), g[K + 1]}...);
  }
  ONEFLOW_CUDA_CHECK(cudaGetLastError());
}

}  // namespace detail

// REQUIRES: out on a CUDA device, the inputs on that device and broadcastable to out's shape;
// O and I... are the element types of out and of each input.
template <typename O, typename... I, typename F, typename... Ts>
void Map(const char* op, const Tensor& out, F f, const Ts&... in) {
  static_assert(sizeof...(I) == sizeof...(Ts), "Map: one element type per input");
  detail::MapImpl<O, I...>(op, out, f, std::index_sequence_for<Ts...>{}, in...);
}

}  // namespace cuda
}  // namespace oneflow
