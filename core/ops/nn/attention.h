// scaled_dot_product_attention composed of other ops (matmul, where, exp, sum...) over the
// materialised [..., L, S] scores: what the CUDA kernel runs where the fused kernels do not
// apply (head dims above 128, float64), with the op's semantics (core/ops/nn/attention.cc).
// The arguments are the op's: inputs (q, k, v[, mask]) and (dout, q, k, v, out, lse[, mask]),
// its attrs and its inferred outputs.
//
//   if (head_dim > 128) return ComposedAttention(inputs, attrs, outputs);
#pragma once

#include <vector>

#include "core/attrs.h"
#include "core/tensor.h"

namespace oneflow {

std::vector<Tensor> ComposedAttention(const std::vector<Tensor>& in, const Attrs& a,
                                      const std::vector<TensorMeta>& out);
std::vector<Tensor> ComposedAttentionGrad(const std::vector<Tensor>& in, const Attrs& a,
                                          const std::vector<TensorMeta>& out);

}  // namespace oneflow
