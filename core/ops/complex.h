// Complex tensors (complex64, complex128): the two view ops between a complex tensor and its
// (..., 2) real pairs, and the complex functions built on them. Arithmetic on complex inputs
// (add, mul, exp, sum, matmul, eq, ...) goes through each op's complex rule (OpDef::
// complex_rule, registered in complex.cc): the op written as real ops on the pairs, so autograd
// records real ops and a complex gradient is d/dre + i d/dim of a real loss, PyTorch's and
// OneFlow's convention (the conjugate Wirtinger derivative, doubled).
//
//   Tensor z = fn::complex(re, im);              // complex64 from two float32 tensors
//   Tensor y = fn::mul(z, fn::conj(z));          // |z|^2 + 0i
//   Tensor pairs = fn::view_as_real(z);          // float32 (..., 2), shares z's memory
#pragma once

#include "core/tensor.h"

namespace oneflow {
namespace fn {

// The views below are copies when autograd follows their input (requires_grad in grad mode):
// the in-place machinery could not carry a write into a view of another dtype back to its root.
// z's memory as (..., 2) pairs (real, imag) of its part dtype.
Tensor view_as_real(const Tensor& z);
// (..., 2) float32/float64 pairs as a complex tensor: a view when the pairs are adjacent in
// memory (last stride 1, other strides and the offset even), else a copy.
Tensor view_as_complex(const Tensor& x);
// The real and imaginary parts: views of z. real of a real tensor is itself; imag of one is an
// error, as in OneFlow.
Tensor real(const Tensor& z);
Tensor imag(const Tensor& z);
// re + i im (broadcast, promoted to one floating dtype): a new complex tensor.
Tensor complex(const Tensor& re, const Tensor& im);
// The complex conjugate: a new tensor (no lazy conjugate bit); a real tensor is returned as is.
Tensor conj(const Tensor& z);
// The argument in (-pi, pi] (0 or pi for real tensors), as a real tensor.
Tensor angle(const Tensor& z);

}  // namespace fn
}  // namespace oneflow
