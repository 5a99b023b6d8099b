// How the reductions of core/ops/reduce.cc combine values, shared by the CPU kernels and the CUDA
// kernels (core/kernels/cuda/reduce.cu): an identity and a combine, in the accumulation type.
#pragma once

#include "core/ops/binary_functors.h"  // ONEFLOW_HOST_DEVICE

namespace oneflow {
namespace functors {

struct SumR {
  template <typename A>
  ONEFLOW_HOST_DEVICE static A Identity() {
    return A(0);
  }
  template <typename A>
  ONEFLOW_HOST_DEVICE A operator()(A a, A b) const {
    return a + b;
  }
};

struct ProdR {
  template <typename A>
  ONEFLOW_HOST_DEVICE static A Identity() {
    return A(1);
  }
  template <typename A>
  ONEFLOW_HOST_DEVICE A operator()(A a, A b) const {
    return a * b;
  }
};

}  // namespace functors
}  // namespace oneflow
