// Helpers shared by the nn op files (convolution, pooling, losses): (h, w) argument pairs,
// sliding-window output sizes, unbatched images and loss reductions. Internal to core/ops/nn.
//
//   std::vector<int64_t> stride = HwPair(attrs.Get<IntList>("stride"), "conv2d", "stride");
//   int64_t oh = WindowOutputSize(h, kh, sh, ph, dh, /*ceil_mode=*/false);
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/attrs.h"
#include "core/error.h"
#include "core/functional.h"
#include "core/shape.h"

namespace oneflow {
namespace nn_util {

// PyTorch takes an int or an (h, w) pair for each window argument; the C++ API takes a list of
// one or two values.
inline std::vector<int64_t> HwPair(const std::vector<int64_t>& v, const char* op,
                                   const char* name) {
  if (v.size() == 1) return {v[0], v[0]};
  if (v.size() == 2) return v;
  throw Error(
      StrCat(op, ": expected ", name, " as 1 or 2 values (h, w), got ", Shape(v).ToString()));
}

// An (h, w) attribute, checked to be at least `min` in both entries.
inline std::vector<int64_t> HwAttr(const Attrs& attrs, const char* name, int64_t min,
                                   const char* op) {
  std::vector<int64_t> v = HwPair(attrs.Get<std::vector<int64_t>>(name), op, name);
  if (v[0] < min || v[1] < min) {
    throw Error(StrCat(op, ": expected ", name, " of at least ", min, ", got ", Shape(v)));
  }
  return v;
}

inline int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Output length of a sliding window (PyTorch's formula). With ceil_mode the last window may hang
// over the end, but it must still start inside the input or the left padding.
inline int64_t WindowOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                                int64_t dilation, bool ceil_mode) {
  // In 128 bits: sizes near int64's limit (a kernel of 2**63 - 1) must not wrap around.
  using Wide = __int128;
  auto floor_div = [](Wide a, Wide b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
  const Wide span = Wide(in) + 2 * Wide(pad) - Wide(dilation) * (Wide(kernel) - 1) - 1;
  Wide out = floor_div(span + (ceil_mode ? Wide(stride) - 1 : 0), stride) + 1;
  if (ceil_mode && (out - 1) * stride >= Wide(in) + pad) --out;
  // Callers refuse an output below 1; one beyond int64 is refused by the size check.
  return out < 0 ? -1 : out > Wide(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(out);
}

// Runs f on a batch of one when x is an unbatched (C, H, W) image, as PyTorch's 2-d ops do.
template <typename F>
Tensor WithBatchDim(const Tensor& x, F&& f) {
  if (x.ndim() != 3) return f(x);
  return fn::squeeze(f(fn::unsqueeze(x, 0)), 0);
}

// nll_loss's input seen as (n, c, inner) and its target as (n, inner); x is (C,), (N, C) or
// (N, C, d1, ...) (the op's inference checks it).
struct NllLayout {
  int64_t n = 1, c = 1, inner = 1;
};
inline NllLayout NllLayoutOf(const Shape& x) {
  NllLayout l;
  if (x.ndim() == 1) {
    l.c = x[0];
  } else {
    l.n = x[0];
    l.c = x[1];
    l.inner = x.numel() / std::max<int64_t>(l.n * l.c, 1);
  }
  return l;
}

inline void CheckReduction(const std::string& reduction, const char* op) {
  if (reduction != "mean" && reduction != "sum" && reduction != "none") {
    throw Error(StrCat(op, ": reduction must be 'mean', 'sum' or 'none', got '", reduction, "'"));
  }
}

}  // namespace nn_util
}  // namespace oneflow
