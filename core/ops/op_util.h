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

// Gradient formula for ops used only inside other ops' gradients: asking for a second
// derivative through them is an error, not a silent zero.
std::vector<Tensor> NoDoubleBackward(const GradCtx& ctx);

// Shape from an int list attribute.
inline Shape AttrShape(const Attrs& attrs, const char* name) {
  return Shape(attrs.Get<std::vector<int64_t>>(name));
}

}  // namespace oneflow
