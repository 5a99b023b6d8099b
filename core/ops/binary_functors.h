// The elementwise binary functors the CPU kernels (core/ops/elementwise.cc) and the CUDA kernels
// (core/kernels/cuda/elementwise.cu) share: one expression per op, compiled for the host by g++
// and for the device by nvcc, so both devices compute the same thing (NaN propagation in
// max/min, Python's sign rule in %). pow is not here: the devices compute it differently on
// purpose (see PowF in each file).
//
//   BinaryLoop<T, T>(a, b, out, functors::MaxF{});          // CPU
//   Map<T, T, T>("binary op", out, functors::MaxF{}, a, b);  // CUDA
#pragma once

#include <cmath>
#include <type_traits>

#if defined(__CUDACC__)
#define ONEFLOW_HOST_DEVICE __host__ __device__
#else
#define ONEFLOW_HOST_DEVICE
#endif

namespace oneflow {
namespace functors {

#define ONEFLOW_BINARY_FUNCTOR(Name, expr)                \
  struct Name {                                           \
    template <typename T>                                 \
    ONEFLOW_HOST_DEVICE auto operator()(T a, T b) const { \
      return expr;                                        \
    }                                                     \
  };
ONEFLOW_BINARY_FUNCTOR(AddF, a + b)
ONEFLOW_BINARY_FUNCTOR(SubF, a - b)
ONEFLOW_BINARY_FUNCTOR(MulF, a* b)
ONEFLOW_BINARY_FUNCTOR(DivF, a / b)
ONEFLOW_BINARY_FUNCTOR(MaxF, (a != a || a > b) ? a : b)  // NaN propagates, as in PyTorch
ONEFLOW_BINARY_FUNCTOR(MinF, (a != a || a < b) ? a : b)
ONEFLOW_BINARY_FUNCTOR(EqF, a == b)
ONEFLOW_BINARY_FUNCTOR(NeF, a != b)
ONEFLOW_BINARY_FUNCTOR(LtF, a < b)
ONEFLOW_BINARY_FUNCTOR(LeF, a <= b)
ONEFLOW_BINARY_FUNCTOR(GtF, a > b)
ONEFLOW_BINARY_FUNCTOR(GeF, a >= b)
ONEFLOW_BINARY_FUNCTOR(AndF, static_cast<bool>(a) && static_cast<bool>(b))
ONEFLOW_BINARY_FUNCTOR(OrF, static_cast<bool>(a) || static_cast<bool>(b))
#undef ONEFLOW_BINARY_FUNCTOR

// Python's %: the remainder takes the sign of the divisor (fmod, then shifted by b when the
// signs differ). An integer divisor of zero is refused by the callers before the loop.
struct RemF {
  template <typename T>
  ONEFLOW_HOST_DEVICE T operator()(T a, T b) const {
    T m;
    if constexpr (std::is_floating_point_v<T>) {
#if defined(__CUDA_ARCH__)
      m = fmod(a, b);
#else
      m = std::fmod(a, b);
#endif
    } else {
      m = static_cast<T>(a % b);
    }
    if constexpr (std::is_unsigned_v<T>) {
      return m;  // no signs to differ
    } else {
      return (m != T(0) && ((m < T(0)) != (b < T(0)))) ? static_cast<T>(m + b) : m;
    }
  }
};

}  // namespace functors
}  // namespace oneflow

// The binary ops, one line each: X(name, Functor, CPU gradient, CUDA dtypes). The CPU side
// (core/ops/elementwise.cc) registers the op, its gradient and kernel; the CUDA side
// (core/kernels/cuda/elementwise.cu) its kernel over the dtypes named (elementwise.cu's Types,
// the half types included in each).
// PowF is each file's own (the devices compute pow differently on purpose).
#define ONEFLOW_BINARY_TABLE_OPS(X)   \
  X(add, AddF, AddGrad, kAll)         \
  X(sub, SubF, SubGrad, kAll)         \
  X(mul, MulF, MulGrad, kAll)         \
  X(div, DivF, DivGrad, kAll)         \
  X(pow, PowF, PowGrad, kAll)         \
  X(maximum, MaxF, MaximumGrad, kAll) \
  X(minimum, MinF, MinimumGrad, kAll)

// Comparisons and logical and/or: bool results, not differentiable. X(name, Functor).
#define ONEFLOW_COMPARE_TABLE_OPS(X) \
  X(eq, EqF)                         \
  X(ne, NeF)                         \
  X(lt, LtF)                         \
  X(le, LeF)                         \
  X(gt, GtF)                         \
  X(ge, GeF)                         \
  X(logical_and, AndF)               \
  X(logical_or, OrF)
