// Autocast: inside an autocast region, op calls on one device type run in a lower precision
// where that is safe and fast (matmul, linear, convolution) and in float32 where precision
// matters (softmax, norms, losses, reductions, exp/log), as PyTorch's autocast does. The cast
// is itself an op call, so gradients flow back to float32 parameters in float32.
//
//   AutocastGuard guard(DeviceType::kCPU, /*enabled=*/true, DType::kBFloat16);
//   Tensor y = fn::linear(x, w, b);  // bfloat16; fn::softmax(y, -1) is float32
#pragma once

#include <vector>

#include "core/device.h"
#include "core/dtype.h"

namespace oneflow {

class Tensor;
struct OpDef;

// How autocast treats an op's floating inputs.
enum class AutocastPolicy {
  kNone,     // as given (views, copies, elementwise ops; binary ops promote by themselves)
  kLower,    // all cast to the autocast dtype (matmul, linear, conv)
  kFloat32,  // half inputs cast to float32 (softmax, norms, losses, sum, exp, log)
  kPromote,  // mixed floating dtypes cast to the widest (cat, where, scatter_add)
};
AutocastPolicy AutocastPolicyOf(const OpDef& op);

// Thread-local state, one entry per device type (PyTorch's is thread-local too).
bool AutocastEnabled(DeviceType type);
DType AutocastDType(DeviceType type);  // bfloat16 on cpu, float16 on cuda unless set
void SetAutocastEnabled(DeviceType type, bool enabled);
void SetAutocastDType(DeviceType type, DType dtype);  // REQUIRES: float16 or bfloat16
// Nested regions (kernels that call ops, the backward pass) see autocast off.
bool AutocastSuspended();

// Sets a device type's autocast state for a scope and restores it.
class AutocastGuard {
 public:
  AutocastGuard(DeviceType type, bool enabled, DType dtype);
  ~AutocastGuard();

 private:
  DeviceType type_;
  bool prev_enabled_;
  DType prev_dtype_;
};

// Turns autocast off for a scope (the kernels of an op call, the backward engine).
class AutocastSuspendGuard {
 public:
  AutocastSuspendGuard();
  ~AutocastSuspendGuard();

 private:
  bool prev_;
};

// The dtype each input of a call of op is cast to under the current autocast state, into
// *targets (one per input, its own dtype where it stays); false (and *targets untouched) when
// autocast is off for their device type or the op's policy changes none of them, so the
// common call costs nothing. CallOp makes the casts (op calls: gradients flow through them).
bool AutocastTargets(const OpDef& op, const std::vector<Tensor>& inputs,
                     std::vector<DType>* targets);

}  // namespace oneflow
