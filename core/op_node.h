// The record step of an op call (CallOp's last): the autograd node of a call, its gradient
// formula over the saved inputs and outputs, and the check that a formula reads no saved tensor
// an in-place write changed since the forward.
//
//   if (ShouldRecord(op, inputs)) RecordOpCall(op, inputs, attrs, outputs);
//   // each floating output now has grad_fn = the call's node (MulBackward0, ...)
#pragma once

#include <vector>

#include "core/autograd_node.h"
#include "core/op_registry.h"

namespace oneflow {

// Whether a call of op on inputs records a node: some input requires grad, the op is
// differentiable and grad mode is on.
bool ShouldRecord(const OpDef& op, const std::vector<Tensor>& inputs);

// Gives the floating outputs of a call of op (on inputs, with attrs) a node as their history.
void RecordOpCall(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                  const std::vector<Tensor>& outputs);

// While a gradient formula runs: throws when one of inputs is a tensor the formula saved that
// was written in place since the forward (its gradient would be wrong). Nothing otherwise.
void CheckSavedReads(const std::vector<Tensor>& inputs);

}  // namespace oneflow
