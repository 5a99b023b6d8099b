// Tracing for a compiled replay (nn.Graph): while a Tracer is installed on this thread, every
// op call that reaches CallOp from outside another op call is reported to it with its inputs,
// attrs and outputs, and so is every step that moves or writes tensors without an op call
// (copy_, fill_, the layout changes of global tensors). The tracer can then replay the list on
// new inputs without Python. Calls made inside a reported call (a kernel's own ops, boxing
// inside the global interpreter) are not reported: replaying the outer call redoes them.
//
//   SetTracer(&plan);                  // plan implements Tracer
//   Tensor y = fn::relu(x);            // plan.OnOp(relu, {x}, attrs, {y})
//   SetTracer(nullptr);
//
// One of core's two inversion points (DESIGN.md, Layers).
#pragma once

#include <functional>
#include <vector>

#include "core/op_registry.h"

namespace oneflow {

// Redoes a step that is not one op call on the replay's tensors (inputs in the traced order).
using StepFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

class Tracer {
 public:
  virtual ~Tracer() = default;
  virtual void OnOp(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                    const std::vector<Tensor>& outputs) = 0;
  // name: a string literal. Outputs may be empty (a write into inputs[0]).
  virtual void OnStep(const char* name, const std::vector<Tensor>& inputs,
                      const std::vector<Tensor>& outputs, StepFn replay) = 0;
  // Host code outside any reported call reads or writes t's memory (Tensor::raw_data): fine
  // for a tensor it just made, a value the replay would not see for a traced one.
  virtual void OnHostAccess(const Tensor& t) {}
};

// This thread's tracer; null when none is installed or inside a reported call.
Tracer* CurrentTracer();
void SetTracer(Tracer* tracer);

// Nothing is reported in its scope (the work inside a reported call).
class TraceSuspend {
 public:
  TraceSuspend() : outer_(CurrentTracer()) { SetTracer(nullptr); }
  ~TraceSuspend() { SetTracer(outer_); }
  TraceSuspend(const TraceSuspend&) = delete;
  TraceSuspend& operator=(const TraceSuspend&) = delete;

 private:
  Tracer* outer_;
};

// Runs fn(inputs); while tracing, reports it as one step named `name` that replays fn.
std::vector<Tensor> TracedStep(const char* name, const std::vector<Tensor>& inputs,
                               const StepFn& fn);

}  // namespace oneflow
