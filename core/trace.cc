#include "core/trace.h"

namespace oneflow {

namespace {
thread_local Tracer* t_tracer = nullptr;
}  // namespace

thread_local bool Tensor::t_trace_host_access = false;

Tracer* CurrentTracer() { return t_tracer; }
void SetTracer(Tracer* tracer) {
  t_tracer = tracer;
  Tensor::t_trace_host_access = tracer != nullptr;
}

void Tensor::NoteHostAccess() const {
  Tracer* tracer = t_tracer;
  if (!tracer) return;
  TraceSuspend inner;  // what the tracer itself reads is not reported
  tracer->OnHostAccess(*this);
}

std::vector<Tensor> TracedStep(const char* name, const std::vector<Tensor>& inputs,
                               const StepFn& fn) {
  Tracer* tracer = CurrentTracer();
  if (!tracer) return fn(inputs);
  std::vector<Tensor> outputs;
  {
    TraceSuspend inner;
    outputs = fn(inputs);
  }
  tracer->OnStep(name, inputs, outputs, fn);
  return outputs;
}

}  // namespace oneflow
