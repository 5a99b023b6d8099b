#include "core/trace.h"

namespace oneflow {

namespace {
thread_local Tracer* t_tracer = nullptr;
}  // namespace

Tracer* CurrentTracer() { return t_tracer; }
void SetTracer(Tracer* tracer) { t_tracer = tracer; }

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
