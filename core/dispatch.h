// Runs an op call: a short pipeline of autocast, the route to the local kernel (core/
// local_kernel.h) or to the interpreter oneflow/ installs for global inputs (core/
// global_hooks.h), the trace of nn.Graph (core/trace.h) and the autograd record (core/
// op_node.h).
//
//   static const OpDef& relu = OpRegistry::Global().Get("relu");
//   Tensor y = CallOp1(relu, {x}, Attrs());
#pragma once

#include <vector>

#include "core/global_hooks.h"
#include "core/local_kernel.h"
#include "core/op_registry.h"

namespace oneflow {

std::vector<Tensor> CallOp(const OpDef& op, const std::vector<Tensor>& inputs,
                           const Attrs& attrs = Attrs());
Tensor CallOp1(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs = Attrs());

// For the autograd engine, which sits below the functional API.
Tensor Full(const TensorMeta& meta, double value);
Tensor AddGrads(const Tensor& a, const Tensor& b);
Tensor CopyGrad(const Tensor& g);

// A tensor of `value` with like's metadata (global when like is).
Tensor FullLike(const Tensor& like, double value);

}  // namespace oneflow
