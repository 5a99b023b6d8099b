#include "core/dispatch.h"

#include "core/autocast.h"
#include "core/op_node.h"
#include "core/profiler.h"
#include "core/trace.h"

namespace oneflow {

namespace {

void CheckArity(const OpDef& op, const std::vector<Tensor>& inputs) {
  if (op.num_inputs >= 0 && static_cast<int>(inputs.size()) != op.num_inputs) {
    throw Error(
        StrCat(op.name, ": expected ", op.num_inputs, " tensor inputs, got ", inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined())
      throw Error(StrCat(op.name, ": input ", i, " is an undefined tensor"));
  }
}

// What the profiler shows of an op call: its input shapes (record_shapes), its caller's stack
// (with_stack) and, for a kernel on a CUDA device, that device's time.
void DescribeOpCall(profiler::Range& r, const std::vector<Tensor>& inputs) {
  if (profiler::WithStack()) r.set_stack(profiler::CurrentStack());
  if (profiler::RecordShapes()) {
    std::string shapes = "[";
    for (size_t i = 0; i < inputs.size(); ++i) {
      shapes += (i ? ", " : "") + (inputs[i].defined() ? inputs[i].shape().ToString() : "[]");
    }
    r.set_shapes(shapes + "]");
  }
  if (!inputs.empty() && inputs[0].defined() && inputs[0].device().type == DeviceType::kCUDA &&
      !OnHost(inputs[0].device())) {
    r.MarkDevice(inputs[0].device().index);
  }
}

Tensor CastTo(const Tensor& t, DType dtype) {
  static const OpDef& cast = OpRegistry::Global().Get("cast");
  Attrs a;
  a.Set("dtype", dtype);
  return CallOp1(cast, {t}, a);
}

// Step 1, autocast: the inputs cast as autocast wants them, into *cast (op calls of their own,
// so gradients flow back through the casts); false when it leaves them.
bool AutocastCall(const OpDef& op, const std::vector<Tensor>& inputs, std::vector<Tensor>* cast) {
  std::vector<DType> to;
  if (!AutocastTargets(op, inputs, &to)) return false;
  AutocastSuspendGuard suspend;  // the casts themselves
  *cast = inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (to[i] != inputs[i].dtype()) (*cast)[i] = CastTo(inputs[i], to[i]);
  }
  return true;
}

// Step 2, the route: the interpreter oneflow/global installed for calls with a global input,
// else the local kernel. Ops either calls inside are part of this op: no graph, no trace.
std::vector<Tensor> Route(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  bool any_global = false;
  for (const Tensor& t : inputs) any_global |= t.is_global();
  NoGradGuard no_grad;
  TraceSuspend inner;
  if (any_global && GetGlobalHooks().interpret) {
    AutocastSuspendGuard no_autocast;
    return GetGlobalHooks().interpret(op, inputs, attrs);
  }
  return RunLocalKernel(op, inputs, attrs);
}

// An op call's pipeline: complex inputs to an op composed from real ops, autocast, the
// saved-tensor check of a running gradient formula, the route (local or global), the trace of
// nn.Graph, the autograd record.
std::vector<Tensor> RunOpCall(const OpDef& op, const std::vector<Tensor>& given,
                              const Attrs& attrs) {
  CheckArity(op, given);
  if (op.complex_rule) {  // complex inputs: the op composed from real ops (core/ops/complex.h)
    for (const Tensor& t : given) {
      if (t.defined() && IsComplex(t.dtype())) return op.complex_rule(given, attrs);
    }
  }
  std::vector<Tensor> cast;
  const std::vector<Tensor>& inputs = AutocastCall(op, given, &cast) ? cast : given;
  CheckSavedReads(inputs);
  const bool record = ShouldRecord(op, inputs);
  Tracer* tracer = CurrentTracer();
  std::vector<Tensor> outputs = Route(op, inputs, attrs);
  if (tracer) tracer->OnOp(op, inputs, attrs, outputs);
  if (record) RecordOpCall(op, inputs, attrs, outputs);
  return outputs;
}

}  // namespace

// The profiled call wraps the unprofiled one, so profiling off leaves the op call's code as it
// was behind one relaxed load and branch.
std::vector<Tensor> CallOp(const OpDef& op, const std::vector<Tensor>& given, const Attrs& attrs) {
  if (!profiler::Enabled()) return RunOpCall(op, given, attrs);
  profiler::Range prof(profiler::Kind::kOp, op.name);
  if (prof.active()) DescribeOpCall(prof, given);
  return RunOpCall(op, given, attrs);
}

Tensor CallOp1(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  return CallOp(op, inputs, attrs)[0];
}

// The engine runs below the functional API (which lives in the ops library), so it reaches
// the few ops it needs through the registry.
Tensor Full(const TensorMeta& meta, double value) {
  static const OpDef& full = OpRegistry::Global().Get("full");
  Attrs a;
  a.Set("shape", meta.shape.dims()).Set("value", value).Set("dtype", meta.dtype);
  a.Set("device", meta.device.ToString());
  return CallOp1(full, {}, a);
}

Tensor FullLike(const Tensor& like, double value) {
  if (like.is_global() && GetGlobalHooks().full_like)
    return GetGlobalHooks().full_like(like, value);
  return Full(like.meta(), value);
}

Tensor AddGrads(const Tensor& a, const Tensor& b) {
  static const OpDef& add = OpRegistry::Global().Get("add");
  return CallOp1(add, {a, b});
}

Tensor CopyGrad(const Tensor& g) {
  static const OpDef& copy = OpRegistry::Global().Get("copy");
  return CallOp1(copy, {g});
}

}  // namespace oneflow
