#include "core/dtype.h"

namespace oneflow {

namespace {

float HalfBitsToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToHalfBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff)
    return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half_mant = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1))) ++half_mant;
    return static_cast<uint16_t>(sign | half_mant);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;  // round to nearest even
  return static_cast<uint16_t>(half);
}

}  // namespace

Half::Half(float f) : bits(FloatToHalfBits(f)) {}
Half::operator float() const { return HalfBitsToFloat(bits); }

BFloat16::BFloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    bits = 0x7fc0;
    return;
  }
  x += 0x7fffu + ((x >> 16) & 1);  // round to nearest even
  bits = static_cast<uint16_t>(x >> 16);
}
BFloat16::operator float() const {
  uint32_t x = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

size_t SizeOf(DType dtype) {
  switch (dtype) {
    case DType::kBool:
    case DType::kUInt8:
    case DType::kInt8:
      return 1;
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kInt32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kFloat64:
    case DType::kComplex64:
      return 8;
    case DType::kComplex128:
      return 16;
  }
  return 0;
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return "bool";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt8:
      return "int8";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kComplex64:
      return "complex64";
    case DType::kComplex128:
      return "complex128";
  }
  return "?";
}

DType DTypeFromName(const std::string& name) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (name == DTypeName(static_cast<DType>(i))) return static_cast<DType>(i);
  }
  throw Error(StrCat("dtype: unknown dtype '", name, "'"));
}

bool IsFloating(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16 || dtype == DType::kFloat32 ||
         dtype == DType::kFloat64;
}

bool IsHalf(DType dtype) { return dtype == DType::kFloat16 || dtype == DType::kBFloat16; }

bool IsComplex(DType dtype) { return dtype == DType::kComplex64 || dtype == DType::kComplex128; }

DType ComplexPart(DType dtype) {
  ONEFLOW_CHECK(IsComplex(dtype), "complex: expected a complex dtype, got ", DTypeName(dtype));
  return dtype == DType::kComplex128 ? DType::kFloat64 : DType::kFloat32;
}

DType ComplexOf(DType dtype) {
  if (IsComplex(dtype)) return dtype;
  return dtype == DType::kFloat64 ? DType::kComplex128 : DType::kComplex64;
}

bool IsIntegral(DType dtype) {
  return dtype == DType::kUInt8 || dtype == DType::kInt8 || dtype == DType::kInt32 ||
         dtype == DType::kInt64;
}

DType PromoteTypes(DType a, DType b) {
  if (a == b) return a;
  // Complex wins; its parts are as wide as the widest floating operand (complex64 with
  // float64 gives complex128, as in PyTorch).
  if (IsComplex(a) || IsComplex(b)) {
    const DType pa = IsComplex(a) ? ComplexPart(a) : a, pb = IsComplex(b) ? ComplexPart(b) : b;
    return pa == DType::kFloat64 || pb == DType::kFloat64 ? DType::kComplex128 : DType::kComplex64;
  }
  auto category = [](DType t) { return t == DType::kBool ? 0 : IsIntegral(t) ? 1 : 2; };
  int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 2) {
    if (a == DType::kFloat64 || b == DType::kFloat64) return DType::kFloat64;
    if (a == DType::kFloat32 || b == DType::kFloat32) return DType::kFloat32;
    return DType::kFloat32;  // float16 with bfloat16
  }
  // Integers: uint8 with int8 goes to int32... PyTorch uses int16; we have no int16.
  if ((a == DType::kUInt8 && b == DType::kInt8) || (a == DType::kInt8 && b == DType::kUInt8)) {
    return DType::kInt32;
  }
  return SizeOf(a) >= SizeOf(b) ? a : b;
}

template <>
DType DTypeOf<bool>() {
  return DType::kBool;
}
template <>
DType DTypeOf<uint8_t>() {
  return DType::kUInt8;
}
template <>
DType DTypeOf<int8_t>() {
  return DType::kInt8;
}
template <>
DType DTypeOf<int32_t>() {
  return DType::kInt32;
}
template <>
DType DTypeOf<int64_t>() {
  return DType::kInt64;
}
template <>
DType DTypeOf<Half>() {
  return DType::kFloat16;
}
template <>
DType DTypeOf<BFloat16>() {
  return DType::kBFloat16;
}
template <>
DType DTypeOf<float>() {
  return DType::kFloat32;
}
template <>
DType DTypeOf<double>() {
  return DType::kFloat64;
}
template <>
DType DTypeOf<std::complex<float>>() {
  return DType::kComplex64;
}
template <>
DType DTypeOf<std::complex<double>>() {
  return DType::kComplex128;
}

}  // namespace oneflow
