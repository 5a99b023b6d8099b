// The geometry of convolution and pooling calls, shared by the CPU ops (conv.cc, pool.cc) and
// the CUDA kernels (core/kernels/cuda/conv.cu, pool.cu): the structs are plain data a kernel takes
// by value, and one MakeConvGeom / MakePoolGeom validates a call and computes its output size
// for both devices.
//
//   ConvGeom g = MakeConvGeom(x.shape(), w.shape(), attrs);   // throws one line on a bad call
//   PoolGeom p = MakePoolGeom(x.shape(), attrs, "max_pool2d");
#pragma once

#include <cstdint>

#include "core/attrs.h"
#include "core/dtype.h"
#include "core/ops/binary_functors.h"  // ONEFLOW_HOST_DEVICE
#include "core/shape.h"

namespace oneflow {
namespace nn_util {

struct ConvGeom {
  int64_t n, c, h, w;  // input
  int64_t o, kh, kw;   // weight (o, c / groups, kh, kw)
  int64_t sh, sw, ph, pw, dh, dw;
  int64_t groups;
  int64_t oh, ow;  // output
  ONEFLOW_HOST_DEVICE int64_t cg() const { return c / groups; }
  ONEFLOW_HOST_DEVICE int64_t og() const { return o / groups; }
  // im2col rows = gemm inner size
  ONEFLOW_HOST_DEVICE int64_t col_rows() const { return cg() * kh * kw; }
  ONEFLOW_HOST_DEVICE int64_t out_plane() const { return oh * ow; }
  ONEFLOW_HOST_DEVICE bool depthwise() const { return groups == c && cg() == 1 && c > 1; }
  // The input itself is the im2col buffer.
  ONEFLOW_HOST_DEVICE bool pointwise() const {
    return kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0;
  }
};

ConvGeom MakeConvGeom(const Shape& x, const Shape& w, const Attrs& attrs);

struct PoolGeom {
  int64_t planes = 0, h = 0, w = 0;  // planes = N * C
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t oh = 0, ow = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
};

void CheckPoolInput(const Shape& x, DType dtype, const char* op);
// Validates a max_pool2d / avg_pool2d call (or their backward ops) on input shape x; avg
// pooling has no dilation.
PoolGeom MakePoolGeom(const Shape& x, const Attrs& attrs, const char* op);
// Adaptive pooling: only the planes' sizes, (h, w) in and (oh, ow) out, no window attributes.
PoolGeom MakePlaneGeom(const Shape& x, const Shape& y);

// max_pool2d's window at output (oh, ow) of one input plane xp: the largest value (as A, read
// through load) and its flat index in the plane, -1 for a window wholly in the padding. NaN
// wins, as in PyTorch, so a NaN input is not hidden by the pooling. The CPU kernel and the
// CUDA kernel both call this, so they pick the same element.
template <typename A, typename T, typename Load>
ONEFLOW_HOST_DEVICE void MaxOverWindow(const PoolGeom& g, const T* xp, int64_t oh, int64_t ow,
                                       Load load, A* best, int64_t* best_idx) {
  *best_idx = -1;
  for (int64_t i = 0; i < g.kh; ++i) {
    const int64_t ih = oh * g.sh - g.ph + i * g.dh;
    if (ih < 0 || ih >= g.h) continue;
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t iw = ow * g.sw - g.pw + j * g.dw;
      if (iw < 0 || iw >= g.w) continue;
      const A v = load(xp[ih * g.w + iw]);
      if (*best_idx < 0 || v > *best || v != v) {
        *best = v;
        *best_idx = ih * g.w + iw;
      }
    }
  }
}

}  // namespace nn_util
}  // namespace oneflow
