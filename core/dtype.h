// Element types of tensors and the rules that combine them.
//
//   DType t = PromoteTypes(DType::kInt64, DType::kFloat32);  // kFloat32
//   DispatchAll(t, "add", [&](auto tag) { using T = typename decltype(tag)::type; ... });
//   DType z = ComplexOf(DType::kFloat32);  // kComplex64, whose parts are ComplexPart(z)
#pragma once

#include <complex>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/error.h"

namespace oneflow {

enum class DType : int8_t {
  kBool,
  kUInt8,
  kInt8,
  kInt32,
  kInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  // Pairs (real, imag) of float32 / float64, laid out as std::complex. Kernels do not see
  // them unless their op opts in (OpDef::complex); most complex ops are composed from real
  // ops on the (..., 2) view (core/ops/complex.h).
  kComplex64,
  kComplex128,
};
constexpr int kNumDTypes = 11;

// IEEE half and bfloat16: stored as 16 bits, converted through float on load and store.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  explicit Half(float f);
  explicit operator float() const;
};
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f);
  explicit operator float() const;
};

size_t SizeOf(DType dtype);
// "float32", "int64", ... as in oneflow.float32.
const char* DTypeName(DType dtype);
DType DTypeFromName(const std::string& name);  // REQUIRES: a name DTypeName returns
bool IsFloating(DType dtype);
bool IsIntegral(DType dtype);  // bool is not integral here
bool IsHalf(DType dtype);      // float16 or bfloat16
bool IsComplex(DType dtype);   // complex64 or complex128 (not floating, as in PyTorch)
// Tensors of floating and complex dtypes carry gradients.
inline bool IsDifferentiable(DType dtype) { return IsFloating(dtype) || IsComplex(dtype); }
// float32 for complex64, float64 for complex128. REQUIRES: IsComplex(dtype).
DType ComplexPart(DType dtype);
// complex128 for float64, complex64 for the other real dtypes, itself for a complex dtype.
DType ComplexOf(DType dtype);
// The dtype a binary op computes in (PyTorch's rules for tensors of equal rank).
DType PromoteTypes(DType a, DType b);

template <typename T>
struct TypeTag {
  using type = T;
};

template <typename T>
DType DTypeOf();

// Calls f(TypeTag<T>{}) for the C++ type of dtype; the half types are refused (CPU kernels get
// them widened to float32 by the dispatcher unless they opt in, see OpDef::cpu_half).
template <typename F>
decltype(auto) DispatchAll(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::kBool:
      return f(TypeTag<bool>{});
    case DType::kUInt8:
      return f(TypeTag<uint8_t>{});
    case DType::kInt8:
      return f(TypeTag<int8_t>{});
    case DType::kInt32:
      return f(TypeTag<int32_t>{});
    case DType::kInt64:
      return f(TypeTag<int64_t>{});
    case DType::kFloat32:
      return f(TypeTag<float>{});
    case DType::kFloat64:
      return f(TypeTag<double>{});
    default:
      throw Error(StrCat(op, ": this kernel has no ", DTypeName(dtype),
                         " path; convert with .to(oneflow.float32) first"));
  }
}

// As DispatchAll, for ops that only make sense on real numbers.
template <typename F>
decltype(auto) DispatchFloating(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::kFloat32:
      return f(TypeTag<float>{});
    case DType::kFloat64:
      return f(TypeTag<double>{});
    default:
      throw Error(StrCat(op, ": expected a floating point tensor, got ", DTypeName(dtype)));
  }
}

namespace detail {
// f(TypeTag<Half or BFloat16>{}) for the half types, otherwise() for the rest.
template <typename F, typename Otherwise>
decltype(auto) HalfOr(DType dtype, F& f, Otherwise&& otherwise) {
  switch (dtype) {
    case DType::kFloat16:
      return f(TypeTag<Half>{});
    case DType::kBFloat16:
      return f(TypeTag<BFloat16>{});
    default:
      return otherwise();
  }
}
}  // namespace detail

// As DispatchAll, but also over the half types (copies and casts).
template <typename F>
decltype(auto) DispatchWithHalf(DType dtype, const char* op, F&& f) {
  return detail::HalfOr(dtype, f, [&]() -> decltype(auto) { return DispatchAll(dtype, op, f); });
}

// As DispatchWithHalf, also over the complex types (copies, casts and fills).
template <typename F>
decltype(auto) DispatchWithComplex(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::kComplex64:
      return f(TypeTag<std::complex<float>>{});
    case DType::kComplex128:
      return f(TypeTag<std::complex<double>>{});
    default:
      return DispatchWithHalf(dtype, op, f);
  }
}

// As DispatchFloating, also over the half types (kernels that compute them, e.g. on CUDA in
// float through cuda::Acc); other dtypes get DispatchFloating's error.
template <typename F>
decltype(auto) DispatchFloatingWithHalf(DType dtype, const char* op, F&& f) {
  return detail::HalfOr(dtype, f,
                        [&]() -> decltype(auto) { return DispatchFloating(dtype, op, f); });
}

}  // namespace oneflow
