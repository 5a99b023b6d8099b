// In-place writes that autograd follows, as PyTorch's: the write goes into the tensor's memory
// and the tensor's history (its root's, for a view) is rebased onto the new value's.
//
//   Tensor y = fn::mul_scalar(x, 2);              // x requires grad
//   InPlace(y, [](const Tensor& s) { return fn::add_scalar(s, 1); }, "add_");
//   Tensor v = fn::select(y, 1, 0);               // y[:, 0]
//   InPlace(v, [](const Tensor& s) { return fn::zeros_like(s); }, "fill_");
//   fn::sum(y).backward();                        // x.grad: 2 where not overwritten, 0 there
#pragma once

#include <functional>

#include "core/tensor.h"

namespace oneflow {

// Writes f(t) into t's memory. f gets t's current value with t's history (a copy, so the
// write cannot change what f's gradient saved) and returns a tensor broadcastable to t's
// shape (cast to t's dtype and device). Under grad mode, when t (or its root, for a view) or
// the result requires grad, t's history becomes f's: for a view, its root's history becomes a
// copy-slices node (the root's old history outside the view, f's inside). Throws
// "<op>: a leaf tensor that requires grad (or a view of one) cannot be modified in place; ..."
// for leaves that require grad (and their views) under grad mode.
void InPlace(const Tensor& t, const std::function<Tensor(const Tensor&)>& f, const char* op);

// The refusal above on its own (for writes autograd does not follow: random fills).
void CheckInPlace(const Tensor& t, const char* op);

}  // namespace oneflow
