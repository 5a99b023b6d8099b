// The extension module oneflow._oneflow_internal (imported as oneflow._C): one pybind11 module
// whose names each translation unit registers by concept (module.h lists them). Flexible Python
// signatures (flow.zeros(2, 3, dtype=...)) live in the Python package on top.
#include "oneflow/api/python/module.h"

#include <pybind11/pybind11.h>

#include "core/error.h"
#include "oneflow/api/python/one_line_errors.h"

namespace oneflow {
namespace python {

PYBIND11_MODULE(_oneflow_internal, m) {
  m.doc() = "oneflow C++ core";

  // pybind11 tries the translator registered last first: the base class goes first.
  py::register_exception<oneflow::Error>(m, "Error", PyExc_RuntimeError);
  py::register_exception<oneflow::IndexError>(m, "IndexError", PyExc_IndexError);
  py::register_exception<oneflow::TypeError>(m, "TypeError", PyExc_TypeError);

  BindDTypeDevice(m);
  BindTensor(m);
  BindFunctional(m);
  BindComm(m);
  BindSbp(m);
  BindGlobal(m);
  BindDdp(m);
  BindCuda(m);
  BindGraph(m);
  BindProfiler(m);
  WrapForOneLineErrors(m);  // last: every function and method above
}

}  // namespace python
}  // namespace oneflow
