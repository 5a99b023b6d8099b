// One line for a call the binding cannot take. pybind11 answers a call that matches no C++
// signature with every signature and the whole repr of each argument (a tensor printed in full),
// and a Python int past int64 with "Unable to cast Python instance of type <class 'int'> to C++
// type 'long'". Wrapping each function of the module and each method of its classes once, at
// module creation, turns both into one line naming the function and the argument types:
//
//   WrapForOneLineErrors(m);  // last in PYBIND11_MODULE
//   _C.matmul(x, 5)  ->  TypeError: matmul: got (Tensor, int); expected (Tensor, Tensor)
#pragma once

#include <pybind11/pybind11.h>

namespace oneflow {
namespace python {

void WrapForOneLineErrors(pybind11::module_& m);

}  // namespace python
}  // namespace oneflow
