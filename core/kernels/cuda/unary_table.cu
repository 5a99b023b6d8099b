// CUDA kernels of the unary table's ops (core/ops/unary_table.cc): the same functors
// (core/ops/unary_functors.h) compiled for the device, so both devices compute one expression,
// over float32, float64, float16 and bfloat16 (the half types in float). Vectorised kernels
// only (MapContiguous): a view is copied contiguous first.
#include "core/kernels/cuda/elementwise.cuh"
#include "core/op_registry.h"
#include "core/ops/op_util.h"
#include "core/ops/unary_functors.h"

namespace oneflow {

namespace {

using cuda::MapContiguous;

template <typename F>
struct GradOf {
  F f;
  template <typename T>
  __device__ T operator()(T g, T x) const {
    return g * f.Grad(x);
  }
};

template <typename F>
std::vector<Tensor> TableCuda(const std::vector<Tensor>& in, const Attrs& a,
                              const std::vector<TensorMeta>& out) {
  Tensor o = Tensor::Empty(out[0]);
  const F f = functors::MakeFunctor<F>(a);
  DispatchFloatingWithHalf(in[0].dtype(), "unary op", [&](auto tag) {
    using T = typename decltype(tag)::type;
    MapContiguous<T, T>("unary op", o, f, in[0]);
  });
  return {o};
}

template <typename F>
std::vector<Tensor> TableGradCuda(const std::vector<Tensor>& in, const Attrs& a,
                                  const std::vector<TensorMeta>& out) {
  Tensor o = Tensor::Empty(out[0]);
  const GradOf<F> f{functors::MakeFunctor<F>(a)};
  DispatchFloatingWithHalf(in[1].dtype(), "unary op gradient", [&](auto tag) {
    using T = typename decltype(tag)::type;
    MapContiguous<T, T, T>("unary op gradient", o, f, in[0], in[1]);
  });
  return {o};
}

}  // namespace

#define ONEFLOW_REGISTER_TABLE_KERNELS(name, F, lo, hi)         \
  ONEFLOW_REGISTER_KERNEL(name, kCUDA, TableCuda<functors::F>); \
  ONEFLOW_REGISTER_KERNEL(name##_grad, kCUDA, TableGradCuda<functors::F>);
ONEFLOW_UNARY_TABLE_OPS(ONEFLOW_REGISTER_TABLE_KERNELS)
#undef ONEFLOW_REGISTER_TABLE_KERNELS

}  // namespace oneflow
