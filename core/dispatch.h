// Runs an op call: infers output metadata, runs the kernel of the inputs' device and records
// the autograd node. Calls with a global input go to the interpreter oneflow/ installs.
//
//   static const OpDef& relu = OpRegistry::Global().Get("relu");
//   Tensor y = CallOp1(relu, {x}, Attrs());
#pragma once

#include <vector>

#include "core/op_registry.h"

namespace oneflow {

std::vector<Tensor> CallOp(const OpDef& op, const std::vector<Tensor>& inputs,
                           const Attrs& attrs = Attrs());
Tensor CallOp1(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs = Attrs());

// Runs only the local part (inference and kernel), no autograd, no global routing.
std::vector<Tensor> RunLocalKernel(const OpDef& op, const std::vector<Tensor>& inputs,
                                   const Attrs& attrs);

// For the autograd engine, which sits below the functional API.
Tensor Full(const TensorMeta& meta, double value);
Tensor AddGrads(const Tensor& a, const Tensor& b);
Tensor CopyGrad(const Tensor& g);

// Installed by oneflow/ at start-up: runs an op whose inputs include a global tensor and
// returns global outputs. Autograd is recorded around it by CallOp.
using GlobalInterpreter = std::vector<Tensor> (*)(const OpDef& op,
                                                  const std::vector<Tensor>& inputs,
                                                  const Attrs& attrs);
void SetGlobalInterpreter(GlobalInterpreter interpreter);

}  // namespace oneflow
