// nn functions beyond those in core/functional.h.
//
//   auto [y, indices] = fn::max_pool2d_with_indices(x, {2}, {}, {0}, {1}, /*ceil_mode=*/false);
//   // indices: int64, flat in each input H * W plane, as torch's return_indices=True.
#pragma once

#include <optional>
#include <utility>

#include "core/functional.h"

namespace oneflow {
namespace fn {

// max_pool2d that also returns, per output, the flat index in the input's H * W plane of the
// element it took (int64; -1 for a window that lies wholly in the padding).
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const IntList& kernel,
                                                  const IntList& stride, const IntList& padding,
                                                  const IntList& dilation, bool ceil_mode);

// softmax(q k^T * scale + attn_mask) v over the last two dims (PyTorch 2's function; scale
// defaults to 1 / sqrt(E)), one fused op with its backward (core/ops/nn/attention.cc). Batch
// dims broadcast; attn_mask (bool: keep where true, or floating: added) may be undefined;
// dropout_p > 0 drops attention weights with the generator's next draws.
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale);

}  // namespace fn
}  // namespace oneflow
