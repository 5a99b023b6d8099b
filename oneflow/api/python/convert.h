// Conversions between Python objects and core values for the extension module.
//
//   DType t = ToDType(obj);              // flow.float32, "float32", or None -> default
//   Tensor s = ScalarOrTensor(obj, x);   // a Python number becomes a 0-dim tensor like x
#pragma once

#include <pybind11/pybind11.h>

#include "core/functional.h"

namespace oneflow {
namespace runtime {
class Communicator;
}
namespace python {

namespace py = pybind11;

// The Python face of a DType: flow.float32 etc. One instance per dtype.
struct PyDType {
  DType dtype;
};
const PyDType& DTypeObject(DType t);
// repr(obj) for a message: one line of at most 80 characters; a tensor by dtype and shape.
std::string ShortRepr(py::handle obj);
DType ToDType(py::handle obj, DType fallback);
Device ToDevice(py::handle obj);  // None -> the default device; str or flow.device
// The default device: cpu, or the innermost `with flow.device(...)` (a stack, as PyTorch's
// device context: creation ops without a device= build there).
std::vector<Device>& DefaultDevices();
// An int (or an object with __index__) as int64; one line naming `what` when it is not an int
// or does not fit int64, never pybind11's "Unable to cast".
int64_t ToInt64(py::handle obj, const char* what);
std::vector<int64_t> ToIntList(py::handle obj, const char* what);
// Accepts f(2, 3), f((2, 3)), f([2, 3]), f(flow.Size([2, 3])).
std::vector<int64_t> SizeFromArgs(const py::args& args, const char* what);

// other as a tensor for a binary op with x (Python scalars follow PyTorch's promotion).
Tensor ScalarOrTensor(py::handle other, const Tensor& x);
// A 0-dim complex tensor re + i im of dtype (complex64 or complex128) on device.
Tensor ComplexScalarOn(double re, double im, DType dtype, const Device& device);
// A tensor from nested sequences / numbers / numpy arrays / tensors (copy).
Tensor TensorFromData(py::handle data, py::handle dtype, const Device& device);
// flow.from_numpy: a CPU tensor over the numpy array's own memory, with its strides (writes are
// seen by both; the tensor keeps the array alive). A read-only array, one with negative strides
// or strides that are not whole elements is copied instead (contiguous).
Tensor TensorSharingNumpy(py::handle array);
py::object ToList(const Tensor& t);
py::object Item(const Tensor& t);

// The communicator of `ranks` (a list of global ranks; None: the world), joining the job on
// first use (comm.cc).
runtime::Communicator& CommOf(const py::object& ranks);

}  // namespace python
}  // namespace oneflow
