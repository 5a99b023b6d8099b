// oneflow.cuda: device queries, synchronisation, memory statistics and the TF32 switch. In a
// build without CUDA every query answers "none" and says why.
#include <pybind11/pybind11.h>

#include "core/device.h"
#include "core/error.h"
#ifdef ONEFLOW_WITH_CUDA
#include "core/kernels/cuda/cuda_util.h"
#endif

namespace py = pybind11;

namespace oneflow {
namespace python {

void BindCuda(py::module_& m) {
#ifdef ONEFLOW_WITH_CUDA
  m.def("cuda_built", []() { return true; });
  m.def("cuda_device_count", []() { return cuda::DeviceCount(); });
  m.def("cuda_unavailable", []() { return cuda::Unavailable(); });
  m.def("cuda_synchronize", [](int index) {
    cuda::RequireDevice(index, "oneflow.cuda.synchronize");
    py::gil_scoped_release release;
    cuda::Synchronize(index);
  });
  m.def("cuda_memory_allocated", [](int index) { return cuda::MemoryAllocated(index); });
  m.def("cuda_memory_reserved", [](int index) { return cuda::MemoryReserved(index); });
  m.def("cuda_empty_cache", []() { cuda::EmptyCache(); });
  m.def("cuda_allow_tf32", []() { return cuda::AllowTf32(); });
  m.def("cuda_set_allow_tf32", [](bool allow) { cuda::SetAllowTf32(allow); });
  m.def("cudnn_allow_tf32", []() { return cuda::AllowCudnnTf32(); });
  m.def("cudnn_set_allow_tf32", [](bool allow) { cuda::SetAllowCudnnTf32(allow); });
  m.def("cuda_set_device", [](int index) {
    cuda::RequireDevice(index, "oneflow.cuda.set_device");
    SetCurrentCudaIndex(index);
  });
#else
  m.def("cuda_built", []() { return false; });
  m.def("cuda_device_count", []() { return 0; });
  m.def("cuda_unavailable", []() {
    return std::string("this build has no CUDA support (built where the CUDA toolkit was ") +
           "missing, or with ONEFLOW_CUDA=0)";
  });
  auto none = [](const char* op) {
    return
        [op](py::args, py::kwargs) { throw Error(StrCat(op, ": this build has no CUDA support")); };
  };
  m.def("cuda_synchronize", none("oneflow.cuda.synchronize"));
  m.def("cuda_memory_allocated", [](int) { return size_t{0}; });
  m.def("cuda_memory_reserved", [](int) { return size_t{0}; });
  m.def("cuda_empty_cache", []() {});
  m.def("cuda_allow_tf32", []() { return false; });
  m.def("cuda_set_allow_tf32", [](bool) {});
  m.def("cudnn_allow_tf32", []() { return true; });
  m.def("cudnn_set_allow_tf32", [](bool) {});
  m.def("cuda_set_device", none("oneflow.cuda.set_device"));
#endif
  m.def("cuda_current_index", []() { return CurrentCudaIndex(); });
}

}  // namespace python
}  // namespace oneflow
