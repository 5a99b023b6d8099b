// nn functions beyond those in core/functional.h.
//
//   auto [y, indices] = fn::max_pool2d_with_indices(x, {2}, {}, {0}, {1}, /*ceil_mode=*/false);
//   // indices: int64, flat in each input H * W plane, as torch's return_indices=True.
#pragma once

#include <utility>

#include "core/functional.h"

namespace oneflow {
namespace fn {

// max_pool2d that also returns, per output, the flat index in the input's H * W plane of the
// element it took (int64; -1 for a window that lies wholly in the padding).
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const IntList& kernel,
                                                  const IntList& stride, const IntList& padding,
                                                  const IntList& dilation, bool ceil_mode);

}  // namespace fn
}  // namespace oneflow
