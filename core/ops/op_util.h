// Helpers shared by op definitions: cached registry lookups and common inference rules.
//
//   Tensor relu(const Tensor& x) { return CallOp1(OP(relu), {x}); }
#pragma once

#include "core/dispatch.h"
#include "core/functional.h"
#include "core/op_registry.h"

// The registered op named `name`, looked up once per call site.
#define OP(name)                                                                     \
  ([]() -> const ::oneflow::OpDef& {                                                 \
    static const ::oneflow::OpDef& def = ::oneflow::OpRegistry::Global().Get(#name); \
    return def;                                                                      \
  }())

namespace oneflow {

// Throws "<op>: integer division by zero" when an integer divisor holds a zero (read on the
// host; the CPU and CUDA kernels of integer division-like ops call it before their loops).
void CheckNoIntegerZero(const Tensor& divisor, const char* op);

// A contiguous shape seen as (outer, n, inner) around dim (the index ops' CPU and CUDA kernels).
struct Around {
  int64_t outer = 1, n = 1, inner = 1;
};
inline Around Split(const Shape& s, int64_t dim) {
  Around r;
  for (int64_t i = 0; i < dim; ++i) r.outer *= s[i];
  r.n = s.ndim() ? s[dim] : 1;
  for (int64_t i = dim + 1; i < s.ndim(); ++i) r.inner *= s[i];
  return r;
}

// Shape from an int list attribute.
inline Shape AttrShape(const Attrs& attrs, const char* name) {
  return Shape(attrs.Get<std::vector<int64_t>>(name));
}

}  // namespace oneflow
