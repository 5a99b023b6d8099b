// The nn ops (core/ops/nn): every forward against a naive loop written here, every gradient
// against finite differences, and the text of every error a user can cause.

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/dispatch.h"
#include "core/functional.h"
#include "core/op_registry.h"
#include "core/ops/nn/nn.h"
#include "tests/test_util.h"

namespace oneflow {
namespace {

using Catch::Contains;
using testing::CheckClose;
using testing::CheckGradients;
using testing::FromVector;
using testing::ToVector;
using Vec = std::vector<double>;
using Inputs = std::vector<Tensor>;

Vec RandomValues(int64_t n, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  Vec v(n);
  for (double& x : v) x = dist(gen);
  return v;
}

Tensor Random(const Shape& shape, uint32_t seed, DType dtype = DType::kFloat64) {
  return FromVector(RandomValues(shape.numel(), seed), shape, dtype);
}

// A float64 leaf that requires grad, for CheckGradients.
Tensor Leaf(const Shape& shape, uint32_t seed) {
  Tensor t = Random(shape, seed);
  t.set_requires_grad(true);
  return t;
}

Tensor Int64(const std::vector<double>& v, const Shape& shape) {
  return FromVector(v, shape, DType::kInt64);
}

// ---------------------------------------------------------------------------------------------
// conv2d

struct ConvCase {
  int64_t n, c, h, w, o, kh, kw;
  int64_t sh, sw, ph, pw, dh, dw, groups;
  bool bias;
};

// out[n][oc][oh][ow] = b[oc] + sum over the group's channels and taps, written as the textbook
// definition.
Vec RefConv2d(const ConvCase& k, const Vec& x, const Vec& w, const Vec& b, int64_t oh_n,
              int64_t ow_n) {
  const int64_t cg = k.c / k.groups, og = k.o / k.groups;
  Vec out(k.n * k.o * oh_n * ow_n, 0.0);
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t oc = 0; oc < k.o; ++oc)
      for (int64_t oh = 0; oh < oh_n; ++oh)
        for (int64_t ow = 0; ow < ow_n; ++ow) {
          double acc = k.bias ? b[oc] : 0.0;
          const int64_t grp = oc / og;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t i = 0; i < k.kh; ++i)
              for (int64_t j = 0; j < k.kw; ++j) {
                const int64_t ih = oh * k.sh - k.ph + i * k.dh;
                const int64_t iw = ow * k.sw - k.pw + j * k.dw;
                if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
                const int64_t c = grp * cg + ci;
                acc += x[((n * k.c + c) * k.h + ih) * k.w + iw] *
                       w[((oc * cg + ci) * k.kh + i) * k.kw + j];
              }
          out[((n * k.o + oc) * oh_n + oh) * ow_n + ow] = acc;
        }
  return out;
}

int64_t ConvOut(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

const std::vector<ConvCase> kConvCases = {
    // n  c  h  w  o kh kw sh sw ph pw dh dw  g  bias
    {2, 3, 5, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true},   // plain 3x3, same padding
    {1, 2, 7, 8, 3, 3, 2, 2, 3, 1, 2, 2, 1, 1, false},  // stride, padding, dilation per axis
    {2, 4, 5, 5, 6, 2, 3, 1, 2, 0, 1, 1, 1, 2, true},   // 2 groups
    {2, 3, 6, 5, 3, 3, 3, 2, 2, 1, 1, 1, 1, 3, true},   // depthwise
    {1, 3, 7, 7, 6, 3, 2, 1, 1, 2, 1, 2, 2, 3, false},  // depthwise, multiplier 2, dilation
    {2, 5, 4, 3, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1, true},   // pointwise 1x1
    {1, 4, 5, 5, 2, 1, 1, 2, 2, 0, 0, 1, 1, 1, false},  // 1x1 with stride: im2col path
    {2, 1, 4, 4, 2, 2, 2, 1, 1, 0, 0, 1, 1, 1, true},   // one input channel
};

Tensor CallConv(const ConvCase& k, const Tensor& x, const Tensor& w, const Tensor& b) {
  return fn::conv2d(x, w, k.bias ? b : Tensor(), {k.sh, k.sw}, {k.ph, k.pw}, {k.dh, k.dw},
                    k.groups);
}

TEST_CASE("conv2d matches the naive loop", "[nn][conv2d]") {
  for (size_t ci = 0; ci < kConvCases.size(); ++ci) {
    const ConvCase& k = kConvCases[ci];
    for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
      INFO("case " << ci << " dtype " << DTypeName(dtype));
      Shape xs({k.n, k.c, k.h, k.w}), ws({k.o, k.c / k.groups, k.kh, k.kw});
      Vec x = RandomValues(xs.numel(), 1), w = RandomValues(ws.numel(), 2),
          b = RandomValues(k.o, 3);
      Tensor y = CallConv(k, FromVector(x, xs, dtype), FromVector(w, ws, dtype),
                          FromVector(b, {k.o}, dtype));
      const int64_t oh = ConvOut(k.h, k.kh, k.sh, k.ph, k.dh);
      const int64_t ow = ConvOut(k.w, k.kw, k.sw, k.pw, k.dw);
      REQUIRE(y.shape() == Shape({k.n, k.o, oh, ow}));
      REQUIRE(y.dtype() == dtype);
      CheckClose(y, RefConv2d(k, x, w, b, oh, ow), dtype == DType::kFloat32 ? 1e-5 : 1e-12);
    }
  }
}

TEST_CASE("conv2d gradients", "[nn][conv2d][grad]") {
  for (size_t ci = 0; ci < kConvCases.size(); ++ci) {
    const ConvCase& k = kConvCases[ci];
    INFO("case " << ci);
    Tensor x = Leaf({k.n, k.c, k.h, k.w}, 4);
    Tensor w = Leaf({k.o, k.c / k.groups, k.kh, k.kw}, 5);
    Inputs inputs = {x, w};
    if (k.bias) inputs.push_back(Leaf({k.o}, 6));
    CheckGradients(
        [&](const Inputs& in) { return CallConv(k, in[0], in[1], k.bias ? in[2] : Tensor()); },
        inputs);
  }
}

// float32 convolutions run on oneDNN, float64 ones on im2col (checked against finite
// differences above): the float32 gradients must agree with the float64 ones.
TEST_CASE("conv2d float32 gradients agree with the float64 path", "[nn][conv2d][grad]") {
  for (size_t ci = 0; ci < kConvCases.size(); ++ci) {
    const ConvCase& k = kConvCases[ci];
    INFO("case " << ci);
    Shape xs({k.n, k.c, k.h, k.w}), ws({k.o, k.c / k.groups, k.kh, k.kw});
    Vec xv = RandomValues(xs.numel(), 7), wv = RandomValues(ws.numel(), 8),
        bv = RandomValues(k.o, 9);
    std::vector<std::vector<double>> grads[2];
    int slot = 0;
    for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
      Tensor x = FromVector(xv, xs, dtype), w = FromVector(wv, ws, dtype),
             b = FromVector(bv, {k.o}, dtype);
      x.set_requires_grad(true);
      w.set_requires_grad(true);
      b.set_requires_grad(true);
      Tensor y = CallConv(k, x, w, b);
      Tensor r = FromVector(RandomValues(y.numel(), 11), y.shape(), dtype);
      fn::sum(fn::mul(y, r)).backward();
      grads[slot].push_back(ToVector(x.grad()));
      grads[slot].push_back(ToVector(w.grad()));
      if (k.bias) grads[slot].push_back(ToVector(b.grad()));
      ++slot;
    }
    for (size_t g = 0; g < grads[0].size(); ++g) {
      for (size_t i = 0; i < grads[0][g].size(); ++i) {
        INFO("gradient " << g << " element " << i);
        REQUIRE(std::abs(grads[0][g][i] - grads[1][g][i]) <= 1e-4 * (1 + std::abs(grads[1][g][i])));
      }
    }
  }
}

TEST_CASE("conv2d reads non-contiguous and unbatched input", "[nn][conv2d]") {
  ConvCase k{2, 3, 5, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true};
  Vec x = RandomValues(k.n * k.c * k.h * k.w, 7), w = RandomValues(4 * 3 * 9, 8),
      b = RandomValues(4, 9);
  Tensor xt = FromVector(x, {k.n, k.c, k.h, k.w}, DType::kFloat64);
  Tensor wt = FromVector(w, {4, 3, 3, 3}, DType::kFloat64);
  Tensor bt = FromVector(b, {4}, DType::kFloat64);
  Vec want = RefConv2d(k, x, w, b, 5, 4);

  // The same values laid out NHWC and viewed as NCHW.
  Tensor nhwc = fn::contiguous(fn::permute(xt, {0, 2, 3, 1}));
  Tensor view = fn::permute(nhwc, {0, 3, 1, 2});
  REQUIRE_FALSE(view.is_contiguous());
  CheckClose(CallConv(k, view, wt, bt), want, 1e-12);

  Tensor y1 = CallConv(k, fn::select(xt, 0, 1), wt, bt);
  REQUIRE(y1.shape() == Shape({4, 5, 4}));
  CheckClose(y1, Vec(want.begin() + want.size() / 2, want.end()), 1e-12);
}

TEST_CASE("conv2d errors", "[nn][conv2d][errors]") {
  Tensor w = Random({4, 3, 3, 3}, 1, DType::kFloat32);
  Tensor x = Random({1, 3, 5, 5}, 2, DType::kFloat32);
  REQUIRE_THROWS_WITH(
      fn::conv2d(Random({3, 4}, 3, DType::kFloat32), w, Tensor(), {1}, {0}, {1}, 1),
      Contains("conv2d: expected input of shape (N, C, H, W) or (C, H, W), got (3, 4)"));
  REQUIRE_THROWS_WITH(fn::conv2d(x, Random({4, 3}, 3, DType::kFloat32), Tensor(), {1}, {0}, {1}, 1),
                      Contains("conv2d: expected weight of shape (out_channels, in_channels / "
                               "groups, kH, kW), got (4, 3)"));
  REQUIRE_THROWS_WITH(
      fn::conv2d(x, Random({4, 2, 3, 3}, 3, DType::kFloat32), Tensor(), {1}, {0}, {1}, 1),
      Contains("conv2d: input has 3 channels but weight (4, 2, 3, 3) expects 2 (in_channels / "
               "groups = 2, groups = 1)"));
  REQUIRE_THROWS_WITH(
      fn::conv2d(Random({1, 4, 5, 5}, 3, DType::kFloat32), Random({3, 2, 3, 3}, 3, DType::kFloat32),
                 Tensor(), {1}, {0}, {1}, 2),
      Contains("conv2d: out_channels 3 of weight (3, 2, 3, 3) is not divisible "
               "by groups = 2"));
  REQUIRE_THROWS_WITH(
      fn::conv2d(x, w, Random({3}, 3, DType::kFloat32), {1}, {0}, {1}, 1),
      Contains("conv2d: expected bias of shape (4,) for 4 output channels, got (3,)"));
  REQUIRE_THROWS_WITH(
      fn::conv2d(Random({1, 3, 2, 2}, 3, DType::kFloat32), w, Tensor(), {1}, {0}, {1}, 1),
      Contains("conv2d: padded input of size (2, 2) is smaller than the dilated kernel (3, 3)"));
  REQUIRE_THROWS_WITH(fn::conv2d(x, w, Tensor(), {0, 1}, {0}, {1}, 1),
                      Contains("conv2d: expected stride of at least 1, got (0, 1)"));
  REQUIRE_THROWS_WITH(fn::conv2d(x, w, Tensor(), {1}, {-1}, {1}, 1),
                      Contains("conv2d: expected padding of at least 0, got (-1, -1)"));
  REQUIRE_THROWS_WITH(fn::conv2d(x, w, Tensor(), {1, 1, 1}, {0}, {1}, 1),
                      Contains("conv2d: expected stride as 1 or 2 values (h, w), got (1, 1, 1)"));
  REQUIRE_THROWS_WITH(fn::conv2d(x, w, Tensor(), {1}, {0}, {1}, 0),
                      Contains("conv2d: expected groups of at least 1, got 0"));
  REQUIRE_THROWS_WITH(fn::conv2d(x, Random({4, 3, 3, 3}, 1), Tensor(), {1}, {0}, {1}, 1),
                      Contains("conv2d: expected weight of dtype float32 like the input, got "
                               "float64"));
}

// ---------------------------------------------------------------------------------------------
// conv_transpose2d: conv2d_grad_input run as a forward op (weight (in, out / groups, kh, kw)),
// which makes conv2d_grad_input's own gradient part of first-order autograd.

struct ConvTCase {
  int64_t n, c, h, w, o, kh, kw;  // c input channels, o output channels
  int64_t sh, sw, ph, pw, oph, opw, dh, dw, groups;
  bool bias;
  int64_t OutH() const { return (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1; }
  int64_t OutW() const { return (w - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1; }
};

// Every input element scattered through the kernel taps, as the textbook definition.
Vec RefConvTranspose2d(const ConvTCase& k, const Vec& x, const Vec& w, const Vec& b) {
  const int64_t oh_n = k.OutH(), ow_n = k.OutW(), cg = k.c / k.groups, og = k.o / k.groups;
  Vec out(k.n * k.o * oh_n * ow_n, 0.0);
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t ic = 0; ic < k.c; ++ic)
      for (int64_t ih = 0; ih < k.h; ++ih)
        for (int64_t iw = 0; iw < k.w; ++iw)
          for (int64_t ol = 0; ol < og; ++ol)
            for (int64_t i = 0; i < k.kh; ++i)
              for (int64_t j = 0; j < k.kw; ++j) {
                const int64_t oh = ih * k.sh - k.ph + i * k.dh;
                const int64_t ow = iw * k.sw - k.pw + j * k.dw;
                if (oh < 0 || oh >= oh_n || ow < 0 || ow >= ow_n) continue;
                const int64_t oc = (ic / cg) * og + ol;
                out[((n * k.o + oc) * oh_n + oh) * ow_n + ow] +=
                    x[((n * k.c + ic) * k.h + ih) * k.w + iw] *
                    w[((ic * og + ol) * k.kh + i) * k.kw + j];
              }
  if (k.bias) {
    for (int64_t n = 0; n < k.n; ++n)
      for (int64_t oc = 0; oc < k.o; ++oc)
        for (int64_t q = 0; q < oh_n * ow_n; ++q) out[(n * k.o + oc) * oh_n * ow_n + q] += b[oc];
  }
  return out;
}

const std::vector<ConvTCase> kConvTCases = {
    // n  c  h  w  o kh kw sh sw ph pw oph opw dh dw g  bias
    {2, 3, 4, 5, 2, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1, true},   // plain
    {1, 2, 3, 4, 3, 3, 2, 2, 3, 1, 0, 1, 2, 1, 1, 1, false},  // stride, padding, output_padding
    {2, 4, 3, 3, 6, 2, 3, 2, 1, 0, 1, 1, 0, 1, 2, 2, true},   // groups, dilation
    {1, 3, 4, 4, 3, 3, 3, 1, 1, 1, 1, 0, 0, 2, 2, 3, true},   // depthwise, dilation
};

Tensor CallConvT(const ConvTCase& k, const Tensor& x, const Tensor& w, const Tensor& b) {
  return fn::conv_transpose2d(x, w, k.bias ? b : Tensor(), {k.sh, k.sw}, {k.ph, k.pw},
                              {k.oph, k.opw}, k.groups, {k.dh, k.dw});
}

TEST_CASE("conv_transpose2d matches the naive loop", "[nn][conv_transpose2d]") {
  for (size_t ci = 0; ci < kConvTCases.size(); ++ci) {
    const ConvTCase& k = kConvTCases[ci];
    for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
      INFO("case " << ci << " dtype " << DTypeName(dtype));
      Shape xs({k.n, k.c, k.h, k.w}), ws({k.c, k.o / k.groups, k.kh, k.kw});
      Vec x = RandomValues(xs.numel(), 1), w = RandomValues(ws.numel(), 2),
          b = RandomValues(k.o, 3);
      Tensor y = CallConvT(k, FromVector(x, xs, dtype), FromVector(w, ws, dtype),
                           FromVector(b, {k.o}, dtype));
      REQUIRE(y.shape() == Shape({k.n, k.o, k.OutH(), k.OutW()}));
      CheckClose(y, RefConvTranspose2d(k, x, w, b), dtype == DType::kFloat32 ? 1e-5 : 1e-12);
    }
  }
}

TEST_CASE("conv_transpose2d gradients (conv2d_grad_input's gradient)",
          "[nn][conv_transpose2d][grad]") {
  for (size_t ci = 0; ci < kConvTCases.size(); ++ci) {
    const ConvTCase& k = kConvTCases[ci];
    INFO("case " << ci);
    Inputs inputs = {Leaf({k.n, k.c, k.h, k.w}, 4), Leaf({k.c, k.o / k.groups, k.kh, k.kw}, 5)};
    if (k.bias) inputs.push_back(Leaf({k.o}, 6));
    CheckGradients(
        [&](const Inputs& in) { return CallConvT(k, in[0], in[1], k.bias ? in[2] : Tensor()); },
        inputs);
  }
}

TEST_CASE("conv_transpose2d errors", "[nn][conv_transpose2d][errors]") {
  Tensor x = Random({1, 4, 5, 5}, 1, DType::kFloat32);
  Tensor w = Random({4, 2, 3, 3}, 2, DType::kFloat32);
  REQUIRE_THROWS_WITH(
      fn::conv_transpose2d(x, w, Tensor(), {2}, {0}, {2}, 1, {1}),
      Contains("conv_transpose2d: output_padding (2, 2) must be at least 0 and smaller than the "
               "stride (2, 2)"));
  REQUIRE_THROWS_WITH(
      fn::conv_transpose2d(Random({1, 3, 5, 5}, 3, DType::kFloat32), w, Tensor(), {1}, {0}, {0}, 1,
                           {1}),
      Contains("conv_transpose2d: input has 3 channels but weight (4, 2, 3, 3) expects 4 "
               "(in_channels)"));
  REQUIRE_THROWS_WITH(
      fn::conv_transpose2d(x, w, Random({3}, 3, DType::kFloat32), {1}, {0}, {0}, 1, {1}),
      Contains("conv_transpose2d: expected bias of shape (2,) for 2 output "
               "channels, got (3,)"));
  REQUIRE_THROWS_WITH(fn::conv_transpose2d(x, w, Tensor(), {1}, {0}, {0}, 3, {1}),
                      Contains("conv_transpose2d: in_channels 4 is not divisible by groups 3"));
  REQUIRE_THROWS_WITH(fn::conv_transpose2d(x, w, Tensor(), {1}, {4}, {0}, 1, {1}),
                      Contains("conv_transpose2d: the output size (-1, -1) for input (1, 4, 5, 5) "
                               "is too small (padding too large)"));
  REQUIRE_THROWS_WITH(
      fn::conv_transpose2d(x, Random({4, 2, 3, 3}, 1), Tensor(), {1}, {0}, {0}, 1, {1}),
      Contains("conv_transpose2d: expected weight of dtype float32 like the "
               "input, got float64"));
}

// ---------------------------------------------------------------------------------------------
// pooling

struct PoolCase {
  int64_t n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw;
  bool ceil_mode;
  int64_t oh, ow;  // the output size PyTorch gives, worked out by hand
};

const std::vector<PoolCase> kMaxPoolCases = {
    // n  c  h  w kh kw sh sw ph pw dh dw  ceil  oh ow
    {2, 3, 6, 6, 2, 2, 2, 2, 0, 0, 1, 1, false, 3, 3},
    {1, 2, 5, 5, 2, 2, 2, 2, 0, 0, 1, 1, false, 2, 2},
    {1, 2, 5, 5, 2, 2, 2, 2, 0, 0, 1, 1, true, 3, 3},  // last window hangs over
    {1, 2, 5, 5, 2, 2, 3, 3, 1, 1, 1, 1, true, 2, 2},  // a 3rd window would start in padding
    {2, 2, 7, 6, 3, 3, 2, 1, 1, 1, 1, 1, false, 4, 6},
    {1, 3, 8, 7, 3, 2, 2, 2, 1, 1, 2, 2, true, 4, 4},  // dilation and ceil_mode
};

// Max of the taps inside the input, taps in padding or beyond it skipped.
Vec RefMaxPool(const PoolCase& k, const Vec& x) {
  Vec out;
  for (int64_t p = 0; p < k.n * k.c; ++p)
    for (int64_t oh = 0; oh < k.oh; ++oh)
      for (int64_t ow = 0; ow < k.ow; ++ow) {
        double best = -std::numeric_limits<double>::infinity();
        for (int64_t i = 0; i < k.kh; ++i)
          for (int64_t j = 0; j < k.kw; ++j) {
            const int64_t ih = oh * k.sh - k.ph + i * k.dh, iw = ow * k.sw - k.pw + j * k.dw;
            if (ih >= 0 && ih < k.h && iw >= 0 && iw < k.w) {
              best = std::max(best, x[(p * k.h + ih) * k.w + iw]);
            }
          }
        out.push_back(best);
      }
  return out;
}

Tensor CallMaxPool(const PoolCase& k, const Tensor& x) {
  return fn::max_pool2d(x, {k.kh, k.kw}, {k.sh, k.sw}, {k.ph, k.pw}, {k.dh, k.dw}, k.ceil_mode);
}

TEST_CASE("max_pool2d matches the naive loop", "[nn][pool]") {
  for (size_t ci = 0; ci < kMaxPoolCases.size(); ++ci) {
    const PoolCase& k = kMaxPoolCases[ci];
    for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
      INFO("case " << ci << " dtype " << DTypeName(dtype));
      Shape xs({k.n, k.c, k.h, k.w});
      Vec x = RandomValues(xs.numel(), 11);
      Tensor y = CallMaxPool(k, FromVector(x, xs, dtype));
      REQUIRE(y.shape() == Shape({k.n, k.c, k.oh, k.ow}));
      CheckClose(y, RefMaxPool(k, x), 1e-6);
    }
  }
}

TEST_CASE("max_pool2d indices and gradients", "[nn][pool][grad]") {
  // Indices are flat in each H * W plane.
  Tensor x = FromVector({1, 5, 2, 0, 3, 4, 9, 8, 7, 6, 1, 2, 0, 0, 0, 0}, {1, 1, 4, 4});
  auto [y, idx] = fn::max_pool2d_with_indices(x, {2}, {}, {0}, {1}, false);
  CheckClose(y, {5, 9, 7, 2});
  REQUIRE(idx.dtype() == DType::kInt64);
  CheckClose(idx, {1, 6, 8, 11});

  for (size_t ci = 0; ci < kMaxPoolCases.size(); ++ci) {
    const PoolCase& k = kMaxPoolCases[ci];
    INFO("case " << ci);
    CheckGradients([&](const Inputs& in) { return CallMaxPool(k, in[0]); },
                   {Leaf({k.n, k.c, k.h, k.w}, 12)});
  }
}

// PyTorch's divisor: the window clipped to the padded input (count_include_pad) or to the
// input itself.
Vec RefAvgPool(const PoolCase& k, const Vec& x, bool count_include_pad) {
  Vec out;
  for (int64_t p = 0; p < k.n * k.c; ++p)
    for (int64_t oh = 0; oh < k.oh; ++oh)
      for (int64_t ow = 0; ow < k.ow; ++ow) {
        double sum = 0;
        int64_t inside = 0, padded = 0;
        for (int64_t i = 0; i < k.kh; ++i)
          for (int64_t j = 0; j < k.kw; ++j) {
            const int64_t ih = oh * k.sh - k.ph + i, iw = ow * k.sw - k.pw + j;
            if (ih < k.h + k.ph && iw < k.w + k.pw) ++padded;
            if (ih >= 0 && ih < k.h && iw >= 0 && iw < k.w) {
              sum += x[(p * k.h + ih) * k.w + iw];
              ++inside;
            }
          }
        out.push_back(sum / (count_include_pad ? padded : inside));
      }
  return out;
}

const std::vector<PoolCase> kAvgPoolCases = {
    // n  c  h  w kh kw sh sw ph pw dh dw  ceil  oh ow
    {2, 3, 6, 6, 2, 2, 2, 2, 0, 0, 1, 1, false, 3, 3},
    {1, 2, 5, 5, 3, 3, 2, 2, 1, 1, 1, 1, false, 3, 3},
    {1, 2, 6, 5, 3, 2, 2, 2, 1, 1, 1, 1, true, 4, 3},  // a 4th column would start in padding
    {2, 1, 5, 7, 2, 3, 3, 2, 1, 1, 1, 1, true, 2, 4},
};

Tensor CallAvgPool(const PoolCase& k, const Tensor& x, bool count_include_pad) {
  return fn::avg_pool2d(x, {k.kh, k.kw}, {k.sh, k.sw}, {k.ph, k.pw}, k.ceil_mode,
                        count_include_pad);
}

TEST_CASE("avg_pool2d matches the naive loop", "[nn][pool]") {
  // By hand: the ceil_mode windows at the edge divide by the pixels they cover.
  Tensor x9 = FromVector({0, 1, 2, 3, 4, 5, 6, 7, 8}, {1, 1, 3, 3});
  CheckClose(fn::avg_pool2d(x9, {2}, {2}, {0}, /*ceil_mode=*/true, true), {2, 3.5, 6.5, 8});

  for (size_t ci = 0; ci < kAvgPoolCases.size(); ++ci) {
    const PoolCase& k = kAvgPoolCases[ci];
    for (bool include_pad : {true, false}) {
      for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
        INFO("case " << ci << " count_include_pad " << include_pad << " " << DTypeName(dtype));
        Shape xs({k.n, k.c, k.h, k.w});
        Vec x = RandomValues(xs.numel(), 13);
        Tensor y = CallAvgPool(k, FromVector(x, xs, dtype), include_pad);
        REQUIRE(y.shape() == Shape({k.n, k.c, k.oh, k.ow}));
        CheckClose(y, RefAvgPool(k, x, include_pad), 1e-6);
      }
    }
  }
}

TEST_CASE("avg_pool2d gradients", "[nn][pool][grad]") {
  for (size_t ci = 0; ci < kAvgPoolCases.size(); ++ci) {
    const PoolCase& k = kAvgPoolCases[ci];
    for (bool include_pad : {true, false}) {
      INFO("case " << ci << " count_include_pad " << include_pad);
      CheckGradients([&](const Inputs& in) { return CallAvgPool(k, in[0], include_pad); },
                     {Leaf({k.n, k.c, k.h, k.w}, 14)});
    }
  }
}

Vec RefAdaptiveAvgPool(const Vec& x, int64_t planes, int64_t h, int64_t w, int64_t oh_n,
                       int64_t ow_n) {
  Vec out;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oh = 0; oh < oh_n; ++oh)
      for (int64_t ow = 0; ow < ow_n; ++ow) {
        const int64_t h0 = static_cast<int64_t>(std::floor(double(oh) * h / oh_n));
        const int64_t h1 = static_cast<int64_t>(std::ceil(double(oh + 1) * h / oh_n));
        const int64_t w0 = static_cast<int64_t>(std::floor(double(ow) * w / ow_n));
        const int64_t w1 = static_cast<int64_t>(std::ceil(double(ow + 1) * w / ow_n));
        double sum = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) sum += x[(p * h + ih) * w + iw];
        out.push_back(sum / double((h1 - h0) * (w1 - w0)));
      }
  return out;
}

TEST_CASE("adaptive_avg_pool2d matches the naive loop and its gradient", "[nn][pool][grad]") {
  // By hand: 5 -> 3 takes [0, 2), [1, 4), [3, 5).
  Tensor x5 = FromVector({0, 1, 2, 3, 4}, {1, 1, 1, 5});
  CheckClose(fn::adaptive_avg_pool2d(x5, {1, 3}), {0.5, 2, 3.5});

  const std::vector<std::vector<int64_t>> cases = {// h, w, oh, ow
                                                   {6, 6, 3, 3},
                                                   {7, 5, 4, 3},
                                                   {2, 3, 3, 5},
                                                   {5, 5, 1, 1},
                                                   {4, 9, 4, 2}};
  for (const auto& s : cases) {
    INFO("input " << s[0] << "x" << s[1] << " output " << s[2] << "x" << s[3]);
    Shape xs({2, 3, s[0], s[1]});
    Vec x = RandomValues(xs.numel(), 15);
    Tensor y = fn::adaptive_avg_pool2d(FromVector(x, xs), {s[2], s[3]});
    REQUIRE(y.shape() == Shape({2, 3, s[2], s[3]}));
    CheckClose(y, RefAdaptiveAvgPool(x, 6, s[0], s[1], s[2], s[3]), 1e-6);
    CheckGradients(
        [&](const Inputs& in) {
          return fn::adaptive_avg_pool2d(in[0], {s[2], s[3]});
        },
        {Leaf(xs, 16)});
  }
  // Unbatched (C, H, W).
  REQUIRE(fn::adaptive_avg_pool2d(Random({3, 5, 5}, 1), {2}).shape() == Shape({3, 2, 2}));
}

TEST_CASE("pooling errors", "[nn][pool][errors]") {
  Tensor x = Random({1, 1, 4, 4}, 1, DType::kFloat32);
  REQUIRE_THROWS_WITH(
      fn::max_pool2d(x, {2}, {}, {2}, {1}, false),
      Contains("max_pool2d: padding (2, 2) must be at most half the kernel (2, 2)"));
  REQUIRE_THROWS_WITH(
      fn::max_pool2d(Random({1, 1, 2, 2}, 1), {3}, {}, {0}, {1}, false),
      Contains("max_pool2d: input of spatial size (2, 2) gives output size (0, 0)"));
  REQUIRE_THROWS_WITH(fn::max_pool2d(x, {0, 2}, {}, {0}, {1}, false),
                      Contains("max_pool2d: expected kernel of at least 1, got (0, 2)"));
  REQUIRE_THROWS_WITH(fn::avg_pool2d(Random({3, 4}, 1), {2}, {}, {0}, false, true),
                      Contains("avg_pool2d: expected input of shape (N, C, H, W) or (C, H, W), "
                               "got (3, 4)"));
  REQUIRE_THROWS_WITH(
      fn::avg_pool2d(x, {3}, {1}, {2}, false, true),
      Contains("avg_pool2d: padding (2, 2) must be at most half the kernel (3, 3)"));
  REQUIRE_THROWS_WITH(fn::adaptive_avg_pool2d(x, {0, 2}),
                      Contains("adaptive_avg_pool2d: expected output_size of at least 1, got "
                               "(0, 2)"));
  REQUIRE_THROWS_WITH(fn::max_pool2d(Int64({1, 2, 3, 4}, {1, 1, 2, 2}), {2}, {}, {0}, {1}, false),
                      Contains("max_pool2d: expected a floating point input, got int64"));
}

// ---------------------------------------------------------------------------------------------
// batch_norm

struct BnRef {
  Vec y, mean, var_biased;
};

// x (N, C, S): y = (x - mean) / sqrt(var + eps) * w + b with the given or the batch statistics.
BnRef RefBatchNorm(const Vec& x, int64_t n, int64_t c, int64_t s, const Vec& w, const Vec& b,
                   const Vec* mean_in, const Vec* var_in, double eps) {
  BnRef r;
  r.mean.assign(c, 0.0);
  r.var_biased.assign(c, 0.0);
  const double m = double(n * s);
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j) r.mean[ch] += x[(i * c + ch) * s + j] / m;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j) {
        const double d = x[(i * c + ch) * s + j] - r.mean[ch];
        r.var_biased[ch] += d * d / m;
      }
  }
  const Vec& mean = mean_in ? *mean_in : r.mean;
  const Vec& var = var_in ? *var_in : r.var_biased;
  r.y.assign(x.size(), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t j = 0; j < s; ++j) {
        const int64_t k = (i * c + ch) * s + j;
        r.y[k] = (x[k] - mean[ch]) / std::sqrt(var[ch] + eps) * w[ch] + b[ch];
      }
  return r;
}

TEST_CASE("batch_norm training and eval match the naive loop", "[nn][batch_norm]") {
  const std::vector<Shape> shapes = {Shape({8, 3}), Shape({4, 3, 5}), Shape({2, 3, 4, 5})};
  const double momentum = 0.1, eps = 1e-5;
  for (const Shape& xs : shapes) {
    for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
      INFO("shape " << xs << " " << DTypeName(dtype));
      const int64_t n = xs[0], c = xs[1], s = xs.numel() / (n * c);
      // An offset mean, to see the statistics are not taken around 0.
      Vec x = RandomValues(xs.numel(), 21, 2.0, 5.0);
      Vec w = RandomValues(c, 22), b = RandomValues(c, 23);
      Vec rm = RandomValues(c, 24), rv = RandomValues(c, 25, 0.5, 2.0);
      Tensor xt = FromVector(x, xs, dtype);
      Tensor rmt = FromVector(rm, {c}, dtype), rvt = FromVector(rv, {c}, dtype);
      Tensor wt = FromVector(w, {c}, dtype), bt = FromVector(b, {c}, dtype);
      const double tol = dtype == DType::kFloat32 ? 1e-4 : 1e-10;

      Tensor y = fn::batch_norm(xt, rmt, rvt, wt, bt, /*training=*/true, momentum, eps);
      BnRef ref = RefBatchNorm(x, n, c, s, w, b, nullptr, nullptr, eps);
      CheckClose(y, ref.y, tol);
      // Running statistics move towards the batch's, with the unbiased variance.
      Vec want_rm(c), want_rv(c);
      const double m = double(n * s);
      for (int64_t ch = 0; ch < c; ++ch) {
        want_rm[ch] = (1 - momentum) * rm[ch] + momentum * ref.mean[ch];
        want_rv[ch] = (1 - momentum) * rv[ch] + momentum * ref.var_biased[ch] * m / (m - 1);
      }
      CheckClose(rmt, want_rm, tol);
      CheckClose(rvt, want_rv, tol);

      // Eval uses the (updated) running statistics and leaves them alone.
      Tensor ye = fn::batch_norm(xt, rmt, rvt, wt, bt, /*training=*/false, momentum, eps);
      CheckClose(ye, RefBatchNorm(x, n, c, s, w, b, &want_rm, &want_rv, eps).y, tol);
      CheckClose(rmt, want_rm, tol);

      // No affine parameters and no running statistics.
      Tensor yn = fn::batch_norm(xt, Tensor(), Tensor(), Tensor(), Tensor(), true, momentum, eps);
      CheckClose(yn, RefBatchNorm(x, n, c, s, Vec(c, 1.0), Vec(c, 0.0), nullptr, nullptr, eps).y,
                 tol);
    }
  }
}

TEST_CASE("batch_norm gradients", "[nn][batch_norm][grad]") {
  const std::vector<Shape> shapes = {Shape({5, 3}), Shape({3, 2, 4}), Shape({2, 3, 3, 2})};
  for (const Shape& xs : shapes) {
    const int64_t c = xs[1];
    Tensor x = Leaf(xs, 31), w = Leaf({c}, 32), b = Leaf({c}, 33);
    Tensor rm = Random({c}, 34);
    Tensor rv = FromVector(RandomValues(c, 35, 0.5, 2.0), {c}, DType::kFloat64);
    INFO("shape " << xs);
    // Training: through the batch mean and variance. The running statistics get updated on
    // every call but do not feed the output.
    CheckGradients(
        [&](const Inputs& in) {
          return fn::batch_norm(in[0], rm, rv, in[1], in[2], true, 0.1, 1e-5);
        },
        {x, w, b});
    CheckGradients(
        [&](const Inputs& in) {
          return fn::batch_norm(in[0], Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
        },
        {x});
    // Eval: the running statistics are inputs like any other (here even differentiated).
    Tensor rv_leaf = rv.detach();
    rv_leaf.set_requires_grad(true);
    CheckGradients(
        [&](const Inputs& in) {
          return fn::batch_norm(in[0], in[3], in[4], in[1], in[2], false, 0.1, 1e-5);
        },
        {x, w, b, Leaf({c}, 34), rv_leaf});
  }
}

TEST_CASE("batch_norm_train gradient through its mean and var outputs", "[nn][batch_norm][grad]") {
  // fn::batch_norm only reads these outputs without grad, but the op must differentiate them.
  const OpDef& op = OpRegistry::Global().Get("batch_norm_train");
  Attrs attrs;
  attrs.Set("eps", AttrValue(1e-5));
  CheckGradients(
      [&](const Inputs& in) {
        std::vector<Tensor> out = CallOp(op, in, attrs);
        return fn::cat({fn::flatten(out[0]), out[1], out[2]});
      },
      {Leaf({3, 2, 2, 2}, 36), Leaf({2}, 37), Leaf({2}, 38)});
}

TEST_CASE("batch_norm errors", "[nn][batch_norm][errors]") {
  Tensor x = Random({4, 3}, 1, DType::kFloat32);
  Tensor c3 = Random({3}, 2, DType::kFloat32);
  REQUIRE_THROWS_WITH(
      fn::batch_norm(Random({3}, 1, DType::kFloat32), c3, c3, c3, c3, true, 0.1, 1e-5),
      Contains("batch_norm: expected input of shape (N, C) or (N, C, ...), got (3,)"));
  REQUIRE_THROWS_WITH(
      fn::batch_norm(x, Random({4}, 1, DType::kFloat32), c3, c3, c3, true, 0.1, 1e-5),
      Contains("batch_norm: expected running_mean of shape (3,) for an input with 3 channels, "
               "got (4,)"));
  REQUIRE_THROWS_WITH(fn::batch_norm(x, c3, c3, Random({3}, 1), c3, true, 0.1, 1e-5),
                      Contains("batch_norm: expected weight of dtype float32 like the input, got "
                               "float64"));
  REQUIRE_THROWS_WITH(fn::batch_norm(x, Tensor(), Tensor(), c3, c3, false, 0.1, 1e-5),
                      Contains("batch_norm: running_mean and running_var are required when "
                               "training is false"));
  REQUIRE_THROWS_WITH(
      fn::batch_norm(Random({1, 3}, 1, DType::kFloat32), c3, c3, c3, c3, true, 0.1, 1e-5),
      Contains("batch_norm: expected more than 1 value per channel when training, got input of "
               "shape (1, 3)"));
}

// ---------------------------------------------------------------------------------------------
// softmax, log_softmax

// Along `dim` of a tensor of shape dims, computed row by row with a max shift.
Vec RefSoftmax(const Vec& x, const std::vector<int64_t>& dims, int64_t dim, bool log) {
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < dim; ++i) outer *= dims[i];
  for (size_t i = dim + 1; i < dims.size(); ++i) inner *= dims[i];
  const int64_t d = dims[dim];
  Vec y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return (o * d + k) * inner + i; };
      double mx = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t k = 0; k < d; ++k) mx = std::max(mx, x[at(k)]);
      for (int64_t k = 0; k < d; ++k) sum += std::exp(x[at(k)] - mx);
      for (int64_t k = 0; k < d; ++k) {
        y[at(k)] = log ? x[at(k)] - mx - std::log(sum) : std::exp(x[at(k)] - mx) / sum;
      }
    }
  return y;
}

TEST_CASE("softmax and log_softmax match the naive loop", "[nn][softmax]") {
  const std::vector<int64_t> dims = {2, 3, 4};
  Vec x = RandomValues(24, 41, -3.0, 3.0);
  for (int64_t dim : {0, 1, 2, -1}) {
    for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
      INFO("dim " << dim << " " << DTypeName(dtype));
      Tensor xt = FromVector(x, Shape(dims), dtype);
      const int64_t d = dim < 0 ? dim + 3 : dim;
      CheckClose(fn::softmax(xt, dim), RefSoftmax(x, dims, d, false), 1e-6);
      CheckClose(fn::log_softmax(xt, dim), RefSoftmax(x, dims, d, true), 1e-6);
    }
  }
  // Large logits: exp would overflow without the max shift.
  Tensor big = FromVector({1000, 1001, 1002, -1000}, {1, 4});
  CheckClose(fn::softmax(big, 1), RefSoftmax({1000, 1001, 1002, -1000}, {1, 4}, 1, false), 1e-6);
  CheckClose(fn::log_softmax(big, 1), RefSoftmax({1000, 1001, 1002, -1000}, {1, 4}, 1, true), 1e-6);
  // Non-contiguous input.
  Tensor xt = FromVector(x, Shape(dims), DType::kFloat64);
  Tensor tr = fn::transpose(xt, 0, 2);  // (4, 3, 2)
  CheckClose(fn::softmax(tr, 2), ToVector(fn::softmax(fn::contiguous(tr), 2)), 1e-12);
}

TEST_CASE("softmax and log_softmax gradients", "[nn][softmax][grad]") {
  for (int64_t dim : {0, 1, 2}) {
    INFO("dim " << dim);
    Tensor x = Leaf({2, 3, 4}, 42);
    CheckGradients([&](const Inputs& in) { return fn::softmax(in[0], dim); }, {x});
    CheckGradients([&](const Inputs& in) { return fn::log_softmax(in[0], dim); }, {x});
  }
}

TEST_CASE("softmax_grad and log_softmax_grad: one pass against the formula, and differentiable",
          "[nn][softmax][grad]") {
  for (bool log : {false, true}) {
    const OpDef& op = OpRegistry::Global().Get(log ? "log_softmax_grad" : "softmax_grad");
    for (int64_t dim : {0, 2, -1}) {
      INFO((log ? "log_softmax_grad" : "softmax_grad") << " dim " << dim);
      Attrs attrs;
      attrs.Set("dim", dim);
      Tensor x = Leaf({2, 3, 4}, 7);
      Tensor y = log ? fn::log_softmax(x, dim) : fn::softmax(x, dim);
      Tensor dy = Leaf({2, 3, 4}, 8);
      const int64_t d = dim < 0 ? dim + 3 : dim;
      Tensor want = log ? fn::sub(dy, fn::mul(fn::exp(y), fn::sum(dy, {d}, true)))
                        : fn::mul(y, fn::sub(dy, fn::sum(fn::mul(dy, y), {d}, true)));
      CheckClose(CallOp1(op, {y, dy}, attrs), ToVector(want), 1e-12);
      Tensor yl = y.detach();
      yl.set_requires_grad(true);
      CheckGradients(
          [&](const Inputs& in) {
            return CallOp1(op, {in[0], in[1]}, attrs);
          },
          {yl, dy});
    }
  }
  // The float32 path large enough for oneDNN's primitives, rows and columns, against float64.
  for (int64_t dim : {1, 0}) {
    Tensor x = Random({64, 96}, 3, DType::kFloat32);
    Tensor dy = Random({64, 96}, 4, DType::kFloat32);
    for (bool log : {false, true}) {
      INFO((log ? "log_softmax_grad" : "softmax_grad") << " float32 dim " << dim);
      Attrs attrs;
      attrs.Set("dim", dim);
      const OpDef& op = OpRegistry::Global().Get(log ? "log_softmax_grad" : "softmax_grad");
      Tensor y = log ? fn::log_softmax(x, dim) : fn::softmax(x, dim);
      Tensor y64 = fn::to_dtype(y, DType::kFloat64), dy64 = fn::to_dtype(dy, DType::kFloat64);
      CheckClose(CallOp1(op, {y, dy}, attrs), ToVector(CallOp1(op, {y64, dy64}, attrs)), 1e-5);
    }
  }
  REQUIRE_THROWS_WITH(
      CallOp1(OpRegistry::Global().Get("softmax_grad"), {Random({2, 3}, 1), Random({3, 2}, 1)},
              Attrs().Set("dim", int64_t{1})),
      Contains(
          "softmax_grad: y and dy must have one shape and dtype, got (2, 3) float64 and (3, 2)"));
}

TEST_CASE("softmax errors", "[nn][softmax][errors]") {
  REQUIRE_THROWS_WITH(fn::softmax(Random({2, 3}, 1), 2),
                      Contains("softmax: dim 2 out of range for a tensor of 2 dims"));
  REQUIRE_THROWS_WITH(fn::log_softmax(Int64({1, 2}, {2}), 0),
                      Contains("log_softmax: expected a floating point input, got int64"));
}

// ---------------------------------------------------------------------------------------------
// losses

// Input (N, C, S) and target (N, S); returns the "none" losses and the mean/sum.
struct NllRef {
  Vec none;
  double sum = 0, mean = 0;
};

NllRef RefNll(const Vec& x, const Vec& target, int64_t n, int64_t c, int64_t s,
              int64_t ignore_index) {
  NllRef r;
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < s; ++j) {
      const int64_t t = static_cast<int64_t>(target[i * s + j]);
      const double loss = t == ignore_index ? 0.0 : -x[(i * c + t) * s + j];
      r.none.push_back(loss);
      r.sum += loss;
      count += t != ignore_index;
    }
  r.mean = r.sum / count;
  return r;
}

TEST_CASE("nll_loss matches the naive loop", "[nn][loss]") {
  struct Case {
    Shape x, target;
    Vec t;
    int64_t ignore_index;
  };
  const std::vector<Case> cases = {
      {Shape({4, 5}), Shape({4}), {0, 4, 2, 2}, -100},
      {Shape({4, 5}), Shape({4}), {1, 3, 3, 0}, 3},  // two ignored
      {Shape({2, 3, 4}), Shape({2, 4}), {0, 1, 2, 1, 2, 2, 0, 1}, 1},
      {Shape({2, 3, 2, 2}), Shape({2, 2, 2}), {0, 1, 2, 1, 2, 2, 0, 1}, -100},
      {Shape({5}), Shape(), {3}, -100},  // unbatched
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& k = cases[ci];
    const int64_t n = k.x.ndim() == 1 ? 1 : k.x[0], c = k.x.ndim() == 1 ? k.x[0] : k.x[1];
    const int64_t s = k.x.numel() / (n * c);
    Vec x = RandomValues(k.x.numel(), 51, -3.0, 0.0);
    NllRef ref = RefNll(x, k.t, n, c, s, k.ignore_index);
    for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
      INFO("case " << ci << " " << DTypeName(dtype));
      Tensor xt = FromVector(x, k.x, dtype), tt = Int64(k.t, k.target);
      Tensor none = fn::nll_loss(xt, tt, "none", k.ignore_index);
      REQUIRE(none.shape() == k.target);
      CheckClose(none, ref.none, 1e-6);
      Tensor sum = fn::nll_loss(xt, tt, "sum", k.ignore_index);
      REQUIRE(sum.shape() == Shape());
      CheckClose(sum, {ref.sum}, 1e-6);
      CheckClose(fn::nll_loss(xt, tt, "mean", k.ignore_index), {ref.mean}, 1e-6);
    }
    INFO("gradients, case " << ci);
    Tensor leaf = Leaf(k.x, 52), tt = Int64(k.t, k.target);
    for (const char* reduction : {"none", "sum", "mean"}) {
      CheckGradients(
          [&](const Inputs& in) { return fn::nll_loss(in[0], tt, reduction, k.ignore_index); },
          {leaf});
    }
  }
}

TEST_CASE("cross_entropy is nll_loss of log_softmax over classes", "[nn][loss]") {
  Vec logits = RandomValues(3 * 4 * 2, 61, -2.0, 2.0);
  Vec target = {0, 3, 2, 1, 1, 1};
  // (N, C, S) = (3, 4, 2): log-softmax over C by hand, then the mean nll.
  Vec lsm = RefSoftmax(logits, {3, 4, 2}, 1, true);
  NllRef ref = RefNll(lsm, target, 3, 4, 2, -100);
  Tensor lt = FromVector(logits, {3, 4, 2}, DType::kFloat64), tt = Int64(target, {3, 2});
  CheckClose(fn::cross_entropy(lt, tt), {ref.mean}, 1e-10);
  CheckClose(fn::cross_entropy(lt, tt, "none"), ref.none, 1e-10);
  // Unbatched (C,) logits with a 0-dim target.
  Vec one = {0.5, -1.0, 2.0};
  CheckClose(fn::cross_entropy(FromVector(one, {3}), Int64({2}, Shape())),
             {-RefSoftmax(one, {3}, 0, true)[2]}, 1e-6);

  Tensor leaf = Leaf({3, 4, 2}, 62);
  CheckGradients([&](const Inputs& in) { return fn::cross_entropy(in[0], tt); }, {leaf});
  Tensor leaf2 = Leaf({5, 4}, 63);
  Tensor t2 = Int64({0, 3, 1, 1, 2}, {5});
  CheckGradients([&](const Inputs& in) { return fn::cross_entropy(in[0], t2, "sum", 1); }, {leaf2});
}

TEST_CASE("mse_loss", "[nn][loss]") {
  Tensor a = FromVector({1, 2, 3, 4}, {2, 2}), b = FromVector({0, 2, 5, 1}, {2, 2});
  CheckClose(fn::mse_loss(a, b), {(1 + 0 + 4 + 9) / 4.0});
  CheckClose(fn::mse_loss(a, b, "sum"), {14});
  CheckClose(fn::mse_loss(a, b, "none"), {1, 0, 4, 9});
  Tensor x = Leaf({3, 4}, 71), y = Leaf({3, 4}, 72);
  for (const char* reduction : {"none", "sum", "mean"}) {
    CheckGradients([&](const Inputs& in) { return fn::mse_loss(in[0], in[1], reduction); }, {x, y});
  }
}

TEST_CASE("loss errors", "[nn][loss][errors]") {
  Tensor x = Random({3, 5}, 1, DType::kFloat32);
  REQUIRE_THROWS_WITH(fn::nll_loss(x, Int64({0, 7, 1}, {3})),
                      Contains("nll_loss: target 7 is out of bounds for 5 classes"));
  REQUIRE_THROWS_WITH(fn::nll_loss(x, Int64({0, -1, 1}, {3})),
                      Contains("nll_loss: target -1 is out of bounds for 5 classes"));
  REQUIRE_THROWS_WITH(
      fn::nll_loss(x, FromVector({0, 1, 2}, {3})),
      Contains("nll_loss: expected target of dtype int64 or int32 (class indices), got "
               "float32"));
  REQUIRE_THROWS_WITH(fn::nll_loss(x, Int64({0, 1, 2, 3}, {4})),
                      Contains("nll_loss: expected target of shape (3,) for input of shape (3, 5), "
                               "got (4,)"));
  REQUIRE_THROWS_WITH(fn::nll_loss(x, Int64({0, 1, 2}, {3}), "avg"),
                      Contains("nll_loss: reduction must be 'mean', 'sum' or 'none', got 'avg'"));
  REQUIRE_THROWS_WITH(fn::cross_entropy(x, Int64({0, 5, 1}, {3})),
                      Contains("nll_loss: target 5 is out of bounds for 5 classes"));
  REQUIRE_THROWS_WITH(fn::mse_loss(Random({3}, 1), Random({3, 1}, 2)),
                      Contains("mse_loss: expected target of the input's shape (3,), got (3, 1)"));
  REQUIRE_THROWS_WITH(fn::mse_loss(Random({3}, 1), Random({3}, 2), "max"),
                      Contains("mse_loss: reduction must be 'mean', 'sum' or 'none', got 'max'"));
}

// ---------------------------------------------------------------------------------------------
// dropout

TEST_CASE("dropout", "[nn][dropout]") {
  Tensor x = FromVector(RandomValues(10000, 81, 1.0, 2.0), {100, 100}, DType::kFloat64);
  REQUIRE(fn::dropout(x, 0.5, /*training=*/false).is_same(x));
  REQUIRE(fn::dropout(x, 0.0, /*training=*/true).is_same(x));
  CheckClose(fn::dropout(x, 1.0, true), Vec(10000, 0.0));

  // Every element is dropped or scaled by 1 / (1 - p); about p of them are dropped.
  Vec in = ToVector(x), out = ToVector(fn::dropout(x, 0.25, true));
  int64_t dropped = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (out[i] == 0.0) {
      ++dropped;
    } else {
      INFO("element " << i);
      REQUIRE(std::abs(out[i] - in[i] / 0.75) < 1e-12);
    }
  }
  REQUIRE(dropped > 2200);
  REQUIRE(dropped < 2800);

  // Reseeding in f gives the same mask on every call, as finite differences need.
  CheckGradients(
      [](const Inputs& in) {
        fn::manual_seed(5);
        return fn::dropout(in[0], 0.4, true);
      },
      {Leaf({4, 5}, 82)});

  REQUIRE_THROWS_WITH(fn::dropout(x, 1.5, true),
                      Contains("dropout: probability has to be between 0 and 1, got 1.5"));
  REQUIRE_THROWS_WITH(fn::dropout(x, -0.1, false),
                      Contains("dropout: probability has to be between 0 and 1, got -0.1"));
}

}  // namespace
}  // namespace oneflow
