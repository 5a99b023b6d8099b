// Python indexing of tensors as PyTorch reads it, computed on the host (indexing.cc): basic
// indices as views, index tensors and bool masks as one gather that autograd follows.
//
//   Tensor y = ApplyIndex(x, index);   // y = x[index]
//   SetItem(x, index, value);          // x[index] = value
#pragma once

#include <pybind11/pybind11.h>

#include "core/functional.h"

namespace oneflow {
namespace python {

namespace py = pybind11;

// The coordinates of a bool tensor's true elements in row-major order: an (n, ndim) int64
// CPU tensor (nonzero; a mask index uses one column per dim it covers).
Tensor TrueCoordinates(const Tensor& mask);
Tensor ApplyIndex(const Tensor& x, py::handle index);
void SetItem(Tensor& t, py::handle index, py::handle value);

}  // namespace python
}  // namespace oneflow
