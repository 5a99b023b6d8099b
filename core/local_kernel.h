// The local part of an op call: output metadata from the op's inference, the size checks, and
// the kernel of the inputs' device (the CPU's for the stand-in CUDA device, none for meta
// tensors); CPU kernels without half paths run half inputs in float32. No autograd, no global
// routing, no tracing: CallOp (core/dispatch.h) adds those around it.
//
//   std::vector<Tensor> out = RunLocalKernel(OpRegistry::Global().Get("relu"), {x}, Attrs());
#pragma once

#include <vector>

#include "core/op_registry.h"

namespace oneflow {

// Runs only the local part (inference and kernel), no autograd, no global routing.
std::vector<Tensor> RunLocalKernel(const OpDef& op, const std::vector<Tensor>& inputs,
                                   const Attrs& attrs);

// Runs a CPU kernel on float16/bfloat16 inputs in float32: half inputs are widened, outputs
// whose inferred dtype is half are rounded back, and inputs an in-place kernel wrote get the
// writes back. RunLocalKernel does this for ops without OpDef::cpu_half; kernels with native
// half paths call it for the cases they leave (float16, a CPU without bfloat16 instructions).
std::vector<Tensor> RunKernelInFloat32(const OpDef& op, KernelFn kernel,
                                       const std::vector<Tensor>& inputs, const Attrs& attrs,
                                       const std::vector<TensorMeta>& outputs);

}  // namespace oneflow
