// The pieces of the extension module oneflow._oneflow_internal (module.cc) that its translation
// units share: one Bind function per concept, each registering its names into the one module.
//
//   void BindTensor(py::module_& m);   // tensor.cc: the Tensor class
//   PYBIND11_MODULE(_oneflow_internal, m) { ...; BindTensor(m); ... }
#pragma once

#include <pybind11/pybind11.h>

#include "core/tensor.h"

namespace oneflow {
namespace python {

namespace py = pybind11;

inline Tensor OptTensor(const py::object& o) { return o.is_none() ? Tensor() : o.cast<Tensor>(); }
inline py::object TensorOrNone(const Tensor& t) { return t.defined() ? py::cast(t) : py::none(); }

// The whole value of t on this rank: t itself when local; a global tensor gathered on every
// rank of the job (collective), as OneFlow reads a global tensor's data (global.cc).
Tensor Whole(const Tensor& t);

void BindDTypeDevice(py::module_& m);  // dtype_device.cc: flow.dtype, flow.device
void BindTensor(py::module_& m);       // tensor.cc: the Tensor class, autograd nodes
void BindFunctional(py::module_& m);   // functional.cc: creation, grad mode, ops
void BindComm(py::module_& m);         // comm.cc
void BindSbp(py::module_& m);          // sbp.cc: flow.placement, flow.sbp
void BindGlobal(py::module_& m);       // global.cc
void BindDdp(py::module_& m);          // ddp.cc
void BindCuda(py::module_& m);         // cuda.cc
void BindGraph(py::module_& m);        // graph.cc: nn.Graph's compiled plan
void BindProfiler(py::module_& m);     // profiler.cc: oneflow.profiler's recorder

}  // namespace python
}  // namespace oneflow
