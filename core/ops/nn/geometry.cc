#include "core/ops/nn/geometry.h"

#include "core/error.h"
#include "core/ops/nn/nn_util.h"

namespace oneflow {
namespace nn_util {

// Validates the call and computes the geometry; every conv2d op goes through here.
ConvGeom MakeConvGeom(const Shape& x, const Shape& w, const Attrs& attrs) {
  if (x.ndim() != 4) {
    throw Error(StrCat("conv2d: expected input of shape (N, C, H, W) or (C, H, W), got ", x));
  }
  if (w.ndim() != 4) {
    throw Error(StrCat(
        "conv2d: expected weight of shape (out_channels, in_channels / groups, kH, kW), got ", w));
  }
  ConvGeom g;
  g.groups = attrs.Get<int64_t>("groups");
  if (g.groups < 1) throw Error(StrCat("conv2d: expected groups of at least 1, got ", g.groups));
  auto stride = HwAttr(attrs, "stride", 1, "conv2d");
  auto padding = HwAttr(attrs, "padding", 0, "conv2d");
  auto dilation = HwAttr(attrs, "dilation", 1, "conv2d");
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  g.o = w[0], g.kh = w[2], g.kw = w[3];
  g.sh = stride[0], g.sw = stride[1];
  g.ph = padding[0], g.pw = padding[1];
  g.dh = dilation[0], g.dw = dilation[1];
  if (g.c != w[1] * g.groups) {
    throw Error(StrCat("conv2d: input has ", g.c, " channels but weight ", w, " expects ",
                       w[1] * g.groups, " (in_channels / groups = ", w[1], ", groups = ", g.groups,
                       ")"));
  }
  if (g.o % g.groups != 0) {
    throw Error(StrCat("conv2d: out_channels ", g.o, " of weight ", w,
                       " is not divisible by groups = ", g.groups));
  }
  g.oh = nn_util::WindowOutputSize(g.h, g.kh, g.sh, g.ph, g.dh, /*ceil_mode=*/false);
  g.ow = nn_util::WindowOutputSize(g.w, g.kw, g.sw, g.pw, g.dw, /*ceil_mode=*/false);
  if (g.kh < 1 || g.kw < 1 || g.oh < 1 || g.ow < 1) {
    throw Error(StrCat("conv2d: padded input of size (", g.h + 2 * g.ph, ", ", g.w + 2 * g.pw,
                       ") is smaller than the dilated kernel (", g.dh * (g.kh - 1) + 1, ", ",
                       g.dw * (g.kw - 1) + 1, ")"));
  }
  return g;
}

void CheckPoolInput(const Shape& x, DType dtype, const char* op) {
  if (x.ndim() != 4) {
    throw Error(StrCat(op, ": expected input of shape (N, C, H, W) or (C, H, W), got ", x));
  }
  if (!IsFloating(dtype)) {
    throw Error(StrCat(op, ": expected a floating point input, got ", DTypeName(dtype)));
  }
}

// Validates a max_pool2d / avg_pool2d call on input shape x; avg pooling has no dilation.
PoolGeom MakePoolGeom(const Shape& x, const Attrs& attrs, const char* op) {
  PoolGeom g;
  auto kernel = HwAttr(attrs, "kernel", 1, op);
  auto stride = HwAttr(attrs, "stride", 1, op);
  auto padding = HwAttr(attrs, "padding", 0, op);
  std::vector<int64_t> dilation = {1, 1};
  if (attrs.Has("dilation")) dilation = HwAttr(attrs, "dilation", 1, op);
  g.planes = x[0] * x[1], g.h = x[2], g.w = x[3];
  g.kh = kernel[0], g.kw = kernel[1];
  g.sh = stride[0], g.sw = stride[1];
  g.ph = padding[0], g.pw = padding[1];
  g.dh = dilation[0], g.dw = dilation[1];
  g.ceil_mode = attrs.Get<bool>("ceil_mode");
  g.count_include_pad = attrs.GetOr<bool>("count_include_pad", true);
  // Wider padding would give windows that see only padding.
  if (g.ph > g.kh / 2 || g.pw > g.kw / 2) {
    throw Error(StrCat(op, ": padding ", Shape(padding), " must be at most half the kernel ",
                       Shape(kernel)));
  }
  g.oh = nn_util::WindowOutputSize(g.h, g.kh, g.sh, g.ph, g.dh, g.ceil_mode);
  g.ow = nn_util::WindowOutputSize(g.w, g.kw, g.sw, g.pw, g.dw, g.ceil_mode);
  if (g.oh < 1 || g.ow < 1) {
    throw Error(StrCat(op, ": input of spatial size (", g.h, ", ", g.w, ") gives output size (",
                       g.oh, ", ", g.ow, ") with kernel ", Shape(kernel), ", padding ",
                       Shape(padding), ", dilation ", Shape(dilation), "; need at least 1"));
  }
  return g;
}

PoolGeom MakePlaneGeom(const Shape& x, const Shape& y) {
  PoolGeom g;
  g.planes = x[0] * x[1], g.h = x[2], g.w = x[3];
  g.oh = y[2], g.ow = y[3];
  return g;
}

}  // namespace nn_util
}  // namespace oneflow
