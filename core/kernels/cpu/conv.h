// The CPU convolution backends behind conv2d and its backward ops (core/ops/nn/conv.cc): oneDNN
// for float32 convolutions it takes (what PyTorch uses on CPU), direct loops for depthwise
// convolutions (a gemm of one row would be all overhead), and otherwise one gemm per (sample
// chunk, group) over an im2col buffer (1x1 convolutions with unit stride and no padding use the
// input as the buffer directly). All buffers are contiguous NCHW / (O, C / groups, kh, kw).
//
//   cpu::Conv2dForward<float>(g, x, w, bias_or_null, y);
#pragma once

#include "core/dtype.h"
#include "core/ops/nn/geometry.h"

namespace oneflow {
namespace cpu {

// T: float or double.
template <typename T>
void Conv2dForward(const nn_util::ConvGeom& g, const T* x, const T* w, const T* b, T* y);
template <typename T>
void Conv2dGradInput(const nn_util::ConvGeom& g, const T* dy, const T* w, T* dx);
template <typename T>
void Conv2dGradWeight(const nn_util::ConvGeom& g, const T* dy, const T* x, T* dw);

// bfloat16 on oneDNN's bf16 convolutions (float32 accumulation): false, with nothing written,
// where the CPU has no bfloat16 instructions (HasBf16Gemm) or oneDNN does not take the
// geometry (depthwise included); the caller then computes in float32.
bool Conv2dForwardBf16(const nn_util::ConvGeom& g, const BFloat16* x, const BFloat16* w,
                       const BFloat16* b, BFloat16* y);
bool Conv2dGradInputBf16(const nn_util::ConvGeom& g, const BFloat16* dy, const BFloat16* w,
                         BFloat16* dx);
bool Conv2dGradWeightBf16(const nn_util::ConvGeom& g, const BFloat16* dy, const BFloat16* x,
                          BFloat16* dw);

}  // namespace cpu
}  // namespace oneflow
