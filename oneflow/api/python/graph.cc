// Bindings of nn.Graph's compiled plan (oneflow/graph/plan.h) for oneflow/nn/graph.py, which
// traces the user's build between begin_trace and end_trace and replays on later calls.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "oneflow/api/python/convert.h"
#include "oneflow/api/python/module.h"
#include "oneflow/global/global_tensor.h"
#include "oneflow/graph/plan.h"

namespace oneflow {
namespace python {

void BindGraph(py::module_& m) {
  using graph::GraphPlan;
  py::class_<GraphPlan>(m, "GraphPlan")
      .def(py::init<std::string>())
      .def("begin_trace", &GraphPlan::BeginTrace)
      .def("end_trace", &GraphPlan::EndTrace)
      .def("abort_trace", &GraphPlan::AbortTrace)
      .def("pause_trace", &GraphPlan::PauseTrace)
      .def("resume_trace", &GraphPlan::ResumeTrace)
      .def("set_scope", &GraphPlan::SetScope)
      .def("set_fuse_model_updates", &GraphPlan::SetFuseModelUpdates)
      .def("matches", &GraphPlan::Matches)
      .def("replay",
           [](GraphPlan& plan, const std::vector<Tensor>& inputs) {
             py::gil_scoped_release release;
             return plan.Replay(inputs);
           })
      .def("traced", &GraphPlan::Traced)
      .def("producer_of", &GraphPlan::ProducerOf)
      .def("num_steps", &GraphPlan::num_steps)
      .def("step_name", &GraphPlan::StepName)
      .def("set_attr", &GraphPlan::SetAttr)
      .def("step_attr", &GraphPlan::GetAttr)
      .def("describe", &GraphPlan::Describe)
      .def("peak_live", &GraphPlan::peak_live)
      .def("peak_bytes", &GraphPlan::peak_bytes)
      .def("guard_steps", &GraphPlan::GuardSteps)
      .def("guard_ran", &GraphPlan::GuardRan)
      .def("enable_cuda_graph", &GraphPlan::EnableCudaGraph)
      .def("cuda_graph_status", &GraphPlan::CudaGraphStatus);
  // ZeRO stage 2 inside a graph's trace: a parameter's gradient kept as its shard.
  m.def("graph_set_grad_layout", &global::SetGradLayout);
  m.def("graph_clear_grad_layouts", &global::ClearGradLayouts);
}

}  // namespace python
}  // namespace oneflow
