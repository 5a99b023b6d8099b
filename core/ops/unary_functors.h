// The table of unary math ops and activations: one functor per op holding its forward
// expression and its derivative, compiled for the host by g++ and for the device by nvcc. Every
// facet of these ops is generated from the one line each has in ONEFLOW_UNARY_TABLE_OPS:
//
//   the op `name` (core/ops/elementwise.cc: inference, CPU kernel, gradient = `name_grad`),
//   the op `name_grad(dy, x) = dy * f'(x)` (its CPU kernel next to it),
//   both CUDA kernels (core/kernels/cuda/elementwise.cu), both SBP rules
//   (sbp/rules/pointwise.cc), samples (tests/op_samples.cc) and the finite-difference
//   gradient checks (tests/core/ops_test.cc).
//
// Adding an op: write its functor below (operator() and Grad; a constructor from Attrs and
// Defaults() when it takes parameters), add its line to the table, declare fn::name in
// core/functional.h. Floating types only: the functional API casts integers to float32.
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

#include "core/attrs.h"
#include "core/ops/binary_functors.h"  // ONEFLOW_HOST_DEVICE

namespace oneflow {
namespace functors {

// Round half to even, as PyTorch's round.
template <typename T>
ONEFLOW_HOST_DEVICE T RoundHalfEven(T x) {
#if defined(__CUDA_ARCH__)
  return rint(x);
#else
  return std::nearbyint(x);
#endif
}

// Inverse error function. The device has one; the host refines Giles' single-precision
// approximation ("Approximating the erfinv function", 2010) by two Newton steps on erf.
template <typename T>
ONEFLOW_HOST_DEVICE T Erfinv(T y) {
#if defined(__CUDA_ARCH__)
  return erfinv(y);
#else
  if (!(y > T(-1) && y < T(1))) {
    if (y == T(1)) return std::numeric_limits<T>::infinity();
    if (y == T(-1)) return -std::numeric_limits<T>::infinity();
    return std::numeric_limits<T>::quiet_NaN();
  }
  double w = -std::log((1.0 - y) * (1.0 + y)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double x = p * y;
  for (int i = 0; i < 2; ++i) {
    x -= (std::erf(x) - y) / (1.1283791670955126 * std::exp(-x * x));
  }
  return static_cast<T>(x);
#endif
}

// The log-gamma function: the device's lgamma, the host's std::lgamma.
template <typename T>
ONEFLOW_HOST_DEVICE T Lgamma(T x) {
#if defined(__CUDA_ARCH__)
  return lgamma(x);
#else
  return std::lgamma(x);
#endif
}

// digamma(x) = d/dx lgamma(x), in double: the reflection psi(x) = psi(1 - x) - pi / tan(pi x)
// below 0, the recurrence psi(x) = psi(x + 1) - 1 / x up to 6, then the asymptotic series
// ln x - 1/(2x) - 1/(12x^2) + 1/(120x^4) - 1/(252x^6) + 1/(240x^8) - 1/(132x^10). As PyTorch's:
// -inf at 0, NaN at the negative integers.
template <typename T>
ONEFLOW_HOST_DEVICE T Digamma(T x0) {
  const double kPi = 3.14159265358979323846;
  double x = static_cast<double>(x0), result = 0.0;
  if (x < 0.0) {
    if (x == std::floor(x)) return static_cast<T>(std::numeric_limits<double>::quiet_NaN());
    result = -kPi / std::tan(kPi * x);
    x = 1.0 - x;
  }
  if (x == 0.0) return static_cast<T>(-std::numeric_limits<double>::infinity());
  for (; x < 6.0; x += 1.0) result -= 1.0 / x;
  const double f = 1.0 / (x * x);
  result += std::log(x) - 0.5 / x -
            f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f / 132))));
  return static_cast<T>(result);
}

// trigamma(x) = d/dx digamma(x), in double: the reflection psi1(x) = pi^2 / sin^2(pi x) -
// psi1(1 - x) below 1/2, the recurrence psi1(x) = psi1(x + 1) + 1 / x^2 up to 6, then
// 1/x + 1/(2x^2) + 1/(6x^3) - 1/(30x^5) + 1/(42x^7) - 1/(30x^9). +inf at 0 and the negative
// integers.
template <typename T>
ONEFLOW_HOST_DEVICE T Trigamma(T x0) {
  const double kPi = 3.14159265358979323846;
  double x = static_cast<double>(x0), reflected = 0.0, sign = 1.0;
  if (x < 0.5) {
    if (x == std::floor(x)) return static_cast<T>(std::numeric_limits<double>::infinity());
    const double s = std::sin(kPi * x);
    reflected = kPi * kPi / (s * s);
    sign = -1.0;
    x = 1.0 - x;
  }
  double acc = 0.0;
  for (; x < 6.0; x += 1.0) acc += 1.0 / (x * x);
  const double f = 1.0 / (x * x);
  acc += (1.0 + 0.5 / x + f * (1.0 / 6 - f * (1.0 / 30 - f * (1.0 / 42 - f / 30)))) / x;
  return static_cast<T>(reflected + sign * acc);
}

// Functors without parameters: forward `expr` and derivative `grad`, both in x's type.
#define ONEFLOW_UNARY_TABLE_FUNCTOR(Name, expr, grad) \
  struct Name {                                       \
    template <typename T>                             \
    ONEFLOW_HOST_DEVICE T operator()(T x) const {     \
      return expr;                                    \
    }                                                 \
    template <typename T>                             \
    ONEFLOW_HOST_DEVICE T Grad(T x) const {           \
      return grad;                                    \
    }                                                 \
  };
ONEFLOW_UNARY_TABLE_FUNCTOR(Log1pF, std::log1p(x), T(1) / (T(1) + x))
ONEFLOW_UNARY_TABLE_FUNCTOR(Expm1F, std::expm1(x), std::exp(x))
ONEFLOW_UNARY_TABLE_FUNCTOR(Log2F, std::log2(x), T(1) / (x * T(M_LN2)))
ONEFLOW_UNARY_TABLE_FUNCTOR(Log10F, std::log10(x), T(1) / (x * T(M_LN10)))
ONEFLOW_UNARY_TABLE_FUNCTOR(ReciprocalF, T(1) / x, T(-1) / (x * x))
ONEFLOW_UNARY_TABLE_FUNCTOR(SinF, std::sin(x), std::cos(x))
ONEFLOW_UNARY_TABLE_FUNCTOR(CosF, std::cos(x), -std::sin(x))
ONEFLOW_UNARY_TABLE_FUNCTOR(TanF, std::tan(x), T(1) + std::tan(x) * std::tan(x))
ONEFLOW_UNARY_TABLE_FUNCTOR(AsinF, std::asin(x), T(1) / std::sqrt(T(1) - x * x))
ONEFLOW_UNARY_TABLE_FUNCTOR(AcosF, std::acos(x), T(-1) / std::sqrt(T(1) - x * x))
ONEFLOW_UNARY_TABLE_FUNCTOR(AtanF, std::atan(x), T(1) / (T(1) + x * x))
ONEFLOW_UNARY_TABLE_FUNCTOR(SinhF, std::sinh(x), std::cosh(x))
ONEFLOW_UNARY_TABLE_FUNCTOR(CoshF, std::cosh(x), std::sinh(x))
ONEFLOW_UNARY_TABLE_FUNCTOR(AsinhF, std::asinh(x), T(1) / std::sqrt(x * x + T(1)))
ONEFLOW_UNARY_TABLE_FUNCTOR(AtanhF, std::atanh(x), T(1) / (T(1) - x * x))
// 2 / sqrt(pi) = 1.1283791670955126; sqrt(pi) / 2 = 0.886226925452758
ONEFLOW_UNARY_TABLE_FUNCTOR(ErfF, std::erf(x), T(1.1283791670955126) * std::exp(-x * x))
ONEFLOW_UNARY_TABLE_FUNCTOR(ErfcF, std::erfc(x), T(-1.1283791670955126) * std::exp(-x * x))
ONEFLOW_UNARY_TABLE_FUNCTOR(LgammaF, Lgamma(x), Digamma(x))
ONEFLOW_UNARY_TABLE_FUNCTOR(DigammaF, Digamma(x), Trigamma(x))
ONEFLOW_UNARY_TABLE_FUNCTOR(ErfinvF, Erfinv(x),
                            T(0.886226925452758) * std::exp(Erfinv(x) * Erfinv(x)))
// Rounding: the derivative is zero almost everywhere (PyTorch's gradient).
ONEFLOW_UNARY_TABLE_FUNCTOR(FloorF, std::floor(x), T(0))
ONEFLOW_UNARY_TABLE_FUNCTOR(CeilF, std::ceil(x), T(0))
ONEFLOW_UNARY_TABLE_FUNCTOR(RoundF, RoundHalfEven(x), T(0))
ONEFLOW_UNARY_TABLE_FUNCTOR(TruncF, std::trunc(x), T(0))
// Activations (PyTorch's definitions and, at their kinks, PyTorch's one-sided derivatives).
ONEFLOW_UNARY_TABLE_FUNCTOR(SiluF, x / (T(1) + std::exp(-x)),
                            (T(1) / (T(1) + std::exp(-x))) *
                                (T(1) + x * (T(1) - T(1) / (T(1) + std::exp(-x)))))
ONEFLOW_UNARY_TABLE_FUNCTOR(MishF, x* std::tanh(std::log1p(std::exp(x))),
                            std::tanh(std::log1p(std::exp(x))) +
                                x *
                                    (T(1) - std::tanh(std::log1p(std::exp(x))) *
                                                std::tanh(std::log1p(std::exp(x)))) /
                                    (T(1) + std::exp(-x)))
ONEFLOW_UNARY_TABLE_FUNCTOR(HardswishF,
                            x <= T(-3)  ? T(0)
                            : x >= T(3) ? x
                                        : x * (x + T(3)) / T(6),
                            x < T(-3)   ? T(0)
                            : x <= T(3) ? x / T(3) + T(0.5)
                                        : T(1))
ONEFLOW_UNARY_TABLE_FUNCTOR(HardsigmoidF,
                            x <= T(-3)  ? T(0)
                            : x >= T(3) ? T(1)
                                        : x / T(6) + T(0.5),
                            (x > T(-3) && x < T(3)) ? T(1) / T(6) : T(0))
// log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), stable for large |x|.
ONEFLOW_UNARY_TABLE_FUNCTOR(LogSigmoidF,
                            (x < T(0) ? x : T(0)) - std::log1p(std::exp(x < T(0) ? x : -x)),
                            T(1) / (T(1) + std::exp(x)))
ONEFLOW_UNARY_TABLE_FUNCTOR(SoftsignF, x / (T(1) + (x < T(0) ? -x : x)),
                            T(1) / ((T(1) + (x < T(0) ? -x : x)) * (T(1) + (x < T(0) ? -x : x))))
// selu: scale * (max(0, x) + min(0, alpha * (exp(x) - 1))), PyTorch's constants.
ONEFLOW_UNARY_TABLE_FUNCTOR(SeluF,
                            x > T(0) ? T(1.0507009873554805) * x
                                     : T(1.0507009873554805 * 1.6732632423543772) * std::expm1(x),
                            x > T(0) ? T(1.0507009873554805)
                                     : T(1.0507009873554805 * 1.6732632423543772) * std::exp(x))
// gelu with PyTorch's approximate="tanh": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
ONEFLOW_UNARY_TABLE_FUNCTOR(
    GeluTanhF,
    T(0.5) * x * (T(1) + std::tanh(T(0.7978845608028654) * (x + T(0.044715) * x * x * x))),
    T(0.5) * (T(1) + std::tanh(T(0.7978845608028654) * (x + T(0.044715) * x * x * x))) +
        T(0.5) * x *
            (T(1) - std::tanh(T(0.7978845608028654) * (x + T(0.044715) * x * x * x)) *
                        std::tanh(T(0.7978845608028654) * (x + T(0.044715) * x * x * x))) *
            T(0.7978845608028654) * (T(1) + T(3 * 0.044715) * x * x))
#undef ONEFLOW_UNARY_TABLE_FUNCTOR

// Functors with parameters read from the op's attrs; Defaults() are PyTorch's defaults.
struct LeakyReluF {
  double slope;
  explicit LeakyReluF(const Attrs& a) : slope(a.Get<double>("negative_slope")) {}
  static Attrs Defaults() { return Attrs().Set("negative_slope", 0.01); }
  template <typename T>
  ONEFLOW_HOST_DEVICE T operator()(T x) const {
    return x > T(0) ? x : static_cast<T>(x * slope);
  }
  template <typename T>
  ONEFLOW_HOST_DEVICE T Grad(T x) const {
    return x > T(0) ? T(1) : static_cast<T>(slope);
  }
};

// elu(x) = x for x > 0, alpha * (exp(x) - 1) otherwise; celu divides the exponent by alpha.
struct EluF {
  double alpha, inv;
  explicit EluF(const Attrs& a)
      : alpha(a.Get<double>("alpha")), inv(a.Get<bool>("celu") ? 1.0 / alpha : 1.0) {}
  static Attrs Defaults() { return Attrs().Set("alpha", 1.0).Set("celu", false); }
  template <typename T>
  ONEFLOW_HOST_DEVICE T operator()(T x) const {
    return x > T(0) ? x : static_cast<T>(alpha * std::expm1(x * static_cast<T>(inv)));
  }
  template <typename T>
  ONEFLOW_HOST_DEVICE T Grad(T x) const {
    return x > T(0) ? T(1) : static_cast<T>(alpha * inv) * std::exp(x * static_cast<T>(inv));
  }
};

// softplus(x) = log(1 + exp(beta x)) / beta, and x itself where beta x > threshold.
struct SoftplusF {
  double beta, threshold;
  explicit SoftplusF(const Attrs& a)
      : beta(a.Get<double>("beta")), threshold(a.Get<double>("threshold")) {}
  static Attrs Defaults() { return Attrs().Set("beta", 1.0).Set("threshold", 20.0); }
  template <typename T>
  ONEFLOW_HOST_DEVICE T operator()(T x) const {
    const T bx = x * static_cast<T>(beta);
    return bx > static_cast<T>(threshold) ? x : std::log1p(std::exp(bx)) / static_cast<T>(beta);
  }
  template <typename T>
  ONEFLOW_HOST_DEVICE T Grad(T x) const {
    const T bx = x * static_cast<T>(beta);
    return bx > static_cast<T>(threshold) ? T(1) : T(1) / (T(1) + std::exp(-bx));
  }
};

// softshrink: x -+ lambd outside [-lambd, lambd], 0 inside; hardshrink keeps x outside.
struct ShrinkF {
  double lambd;
  bool hard;
  explicit ShrinkF(const Attrs& a) : lambd(a.Get<double>("lambd")), hard(a.Get<bool>("hard")) {}
  static Attrs Defaults() { return Attrs().Set("lambd", 0.5).Set("hard", false); }
  template <typename T>
  ONEFLOW_HOST_DEVICE T operator()(T x) const {
    const T l = static_cast<T>(lambd);
    if (x > l) return hard ? x : x - l;
    if (x < -l) return hard ? x : x + l;
    return T(0);
  }
  template <typename T>
  ONEFLOW_HOST_DEVICE T Grad(T x) const {
    const T l = static_cast<T>(lambd);
    return (x > l || x < -l) ? T(1) : T(0);
  }
};

// threshold(x) = x where x > threshold, value elsewhere.
struct ThresholdF {
  double threshold, value;
  explicit ThresholdF(const Attrs& a)
      : threshold(a.Get<double>("threshold")), value(a.Get<double>("value")) {}
  static Attrs Defaults() { return Attrs().Set("threshold", 0.5).Set("value", -1.0); }
  template <typename T>
  ONEFLOW_HOST_DEVICE T operator()(T x) const {
    return x > static_cast<T>(threshold) ? x : static_cast<T>(value);
  }
  template <typename T>
  ONEFLOW_HOST_DEVICE T Grad(T x) const {
    return x > static_cast<T>(threshold) ? T(1) : T(0);
  }
};

// ---------------------------------------------------------------- outside the table
// The elementwise ops with hand-written gradients (core/ops/elementwise.cc: neg ... gelu,
// logical_not, relu_grad, gelu_grad), one expression for the CPU loops and the CUDA kernels
// (core/kernels/cuda/elementwise.cu; the half types arrive there as float).
#define ONEFLOW_UNARY_FUNCTOR(Name, expr)            \
  struct Name {                                      \
    template <typename T>                            \
    ONEFLOW_HOST_DEVICE auto operator()(T x) const { \
      return expr;                                   \
    }                                                \
  };
ONEFLOW_UNARY_FUNCTOR(NegF, -x)
ONEFLOW_UNARY_FUNCTOR(ExpF, std::exp(x))
ONEFLOW_UNARY_FUNCTOR(LogF, std::log(x))
ONEFLOW_UNARY_FUNCTOR(SqrtF, std::sqrt(x))
ONEFLOW_UNARY_FUNCTOR(RsqrtF, T(1) / std::sqrt(x))
ONEFLOW_UNARY_FUNCTOR(SquareF, x* x)
ONEFLOW_UNARY_FUNCTOR(SigmoidF, T(1) / (T(1) + std::exp(-x)))
ONEFLOW_UNARY_FUNCTOR(TanhF, std::tanh(x))
ONEFLOW_UNARY_FUNCTOR(GeluF, T(0.5) * x * (T(1) + std::erf(x * T(M_SQRT1_2))))
ONEFLOW_UNARY_FUNCTOR(NotF, !static_cast<bool>(x))
#undef ONEFLOW_UNARY_FUNCTOR

// abs, sign and relu compare with zero; for unsigned types (bool included) the comparisons
// are constant and spelled out, so neither compiler warns about them.
struct AbsF {
  template <typename T>
  ONEFLOW_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>) {
      return x;
    } else {
      return x < T(0) ? T(-x) : x;
    }
  }
};
struct SignF {
  template <typename T>
  ONEFLOW_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>) {
      return T(T(0) < x);
    } else {
      return T((T(0) < x) - (x < T(0)));
    }
  }
};
struct ReluF {
  template <typename T>
  ONEFLOW_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>) {
      return x;
    } else {
      return x > T(0) ? x : T(0);
    }
  }
};

// relu_grad(g, y) = g where y > 0.
struct ReluGradF {
  template <typename T>
  ONEFLOW_HOST_DEVICE T operator()(T g, T y) const {
    return y > T(0) ? g : T(0);
  }
};

// gelu_grad(g, x) = g (Phi(x) + x phi(x)), exact (erf) gelu, in x's type (float for the half
// types on CUDA).
struct GeluGradF {
  template <typename T>
  ONEFLOW_HOST_DEVICE T operator()(T g, T x) const {
    const T cdf = T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2)));
    const T pdf = std::exp(T(-0.5) * x * x) * T(0.3989422804014327);
    return g * (cdf + x * pdf);
  }
};

// clamp(x) to [lo, hi], each bound optional.
template <typename T>
struct ClampF {
  bool has_min, has_max;
  T lo, hi;
  ONEFLOW_HOST_DEVICE T operator()(T v) const {
    if (has_min && v < lo) v = lo;
    if (has_max && v > hi) v = hi;
    return v;
  }
};

// A table functor built from an op's attrs (those without parameters ignore them).
template <typename F>
F MakeFunctor(const Attrs& a) {
  if constexpr (std::is_constructible_v<F, const Attrs&>) {
    return F(a);
  } else {
    return F{};
  }
}

// The attrs a sample call of the op uses (PyTorch's defaults).
template <typename F>
Attrs DefaultAttrs() {
  if constexpr (std::is_constructible_v<F, const Attrs&>) {
    return F::Defaults();
  } else {
    return Attrs();
  }
}

}  // namespace functors
}  // namespace oneflow

// X(op name, functor, lo, hi): samples draw x uniformly from (lo, hi), inside the op's domain
// (log1p, atanh, erfinv, asin, acos need |x| < 1; the logs and reciprocal x > 0).
#define ONEFLOW_UNARY_TABLE_OPS(X)        \
  X(log1p, Log1pF, -0.9, 0.9)             \
  X(expm1, Expm1F, -2.0, 2.0)             \
  X(log2, Log2F, 0.2, 3.0)                \
  X(log10, Log10F, 0.2, 3.0)              \
  X(reciprocal, ReciprocalF, 0.3, 3.0)    \
  X(sin, SinF, -3.0, 3.0)                 \
  X(cos, CosF, -3.0, 3.0)                 \
  X(tan, TanF, -1.2, 1.2)                 \
  X(asin, AsinF, -0.9, 0.9)               \
  X(acos, AcosF, -0.9, 0.9)               \
  X(atan, AtanF, -3.0, 3.0)               \
  X(sinh, SinhF, -2.0, 2.0)               \
  X(cosh, CoshF, -2.0, 2.0)               \
  X(asinh, AsinhF, -3.0, 3.0)             \
  X(atanh, AtanhF, -0.9, 0.9)             \
  X(erf, ErfF, -2.0, 2.0)                 \
  X(erfc, ErfcF, -2.0, 2.0)               \
  X(erfinv, ErfinvF, -0.9, 0.9)           \
  X(lgamma, LgammaF, 0.5, 3.0)            \
  X(digamma, DigammaF, 0.5, 3.0)          \
  X(floor, FloorF, -3.0, 3.0)             \
  X(ceil, CeilF, -3.0, 3.0)               \
  X(round, RoundF, -3.0, 3.0)             \
  X(trunc, TruncF, -3.0, 3.0)             \
  X(silu, SiluF, -4.0, 4.0)               \
  X(mish, MishF, -4.0, 4.0)               \
  X(hardswish, HardswishF, -4.0, 4.0)     \
  X(hardsigmoid, HardsigmoidF, -4.0, 4.0) \
  X(logsigmoid, LogSigmoidF, -4.0, 4.0)   \
  X(softsign, SoftsignF, -4.0, 4.0)       \
  X(selu, SeluF, -3.0, 3.0)               \
  X(gelu_tanh, GeluTanhF, -4.0, 4.0)      \
  X(leaky_relu, LeakyReluF, -3.0, 3.0)    \
  X(elu, EluF, -3.0, 3.0)                 \
  X(softplus, SoftplusF, -3.0, 3.0)       \
  X(shrink, ShrinkF, -2.0, 2.0)           \
  X(threshold, ThresholdF, -2.0, 2.0)
