// flow.dtype (one instance per DType) and flow.device bound for Python.
#include <pybind11/pybind11.h>

#include "oneflow/api/python/convert.h"
#include "oneflow/api/python/module.h"
#include "runtime/env.h"

namespace oneflow {
namespace python {

void BindDTypeDevice(py::module_& m) {
  py::class_<PyDType>(m, "dtype")
      .def_property_readonly("name", [](const PyDType& d) { return DTypeName(d.dtype); })
      .def_property_readonly("is_floating_point",
                             [](const PyDType& d) { return IsFloating(d.dtype); })
      .def_property_readonly("itemsize", [](const PyDType& d) { return SizeOf(d.dtype); })
      .def("__repr__",
           [](const PyDType& d) { return std::string("oneflow.") + DTypeName(d.dtype); })
      .def("__eq__",
           [](const PyDType& a, py::handle b) {
             return py::isinstance<PyDType>(b) && b.cast<const PyDType&>().dtype == a.dtype;
           })
      .def("__hash__", [](const PyDType& d) { return static_cast<int>(d.dtype); })
      .def("__reduce__", [](const PyDType& d) {
        return py::make_tuple(py::module_::import("oneflow").attr("_dtype_from_name"),
                              py::make_tuple(DTypeName(d.dtype)));
      });
  for (int i = 0; i < kNumDTypes; ++i) {
    DType t = static_cast<DType>(i);
    m.attr(DTypeName(t)) = py::cast(&DTypeObject(t), py::return_value_policy::reference);
  }

  py::class_<Device>(m, "device")
      .def(py::init([](py::object spec, py::object index) {
             Device d = ToDevice(spec);
             if (!index.is_none()) {
               int i = index.cast<int>();
               if (i < 0) throw Error(StrCat("device: index must be >= 0, got ", i));
               // flow.device("cpu", rank) is this process's CPU memory, as "cpu:N" is
               if (d.type == DeviceType::kCUDA) d.index = i;
             }
             return d;
           }),
           py::arg("type"), py::arg("index") = py::none())
      .def_property_readonly("type", [](const Device& d) { return DeviceTypeName(d.type); })
      .def_property_readonly("index",
                             [](const Device& d) -> py::object {
                               return d.type == DeviceType::kCPU ? py::object(py::none())
                                                                 : py::int_(d.index);
                             })
      .def("__str__", &Device::ToString)
      // `with flow.device("meta"):` (any device): creation ops without device= build there.
      .def("__enter__",
           [](const Device& d) {
             DefaultDevices().push_back(d);
             return d;
           })
      .def("__exit__",
           [](const Device&, py::args) {
             if (!DefaultDevices().empty()) DefaultDevices().pop_back();
           })
      .def("__repr__",
           [](const Device& d) {
             // OneFlow names a process's CPU by its local rank (rank 1 of a node: cpu:1)
             if (d.type == DeviceType::kMeta) return std::string("device(type='meta')");
             return d.type == DeviceType::kCPU
                        ? StrCat("device(type='cpu', index=", comm::GetLocalRank(), ")")
                        : StrCat("device(type='cuda', index=", d.index, ")");
           })
      .def("__eq__",
           [](const Device& a, py::handle b) {
             if (py::isinstance<Device>(b)) return a == b.cast<Device>();
             if (py::isinstance<py::str>(b)) return a == Device::Parse(b.cast<std::string>());
             return false;
           })
      .def("__hash__", [](const Device& d) { return static_cast<int>(d.type) * 1000 + d.index; });
  // The device creation ops without device= build on (the innermost `with flow.device(...)`).
  m.def("default_device", [] { return ToDevice(py::none()); });
}

}  // namespace python
}  // namespace oneflow
