#include "core/kernels/cpu/conv.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/kernels/cpu/blas.h"
#include "core/kernels/cpu/cpu_util.h"
#include "core/kernels/cpu/onednn_eltwise.h"

namespace oneflow {
namespace cpu {
namespace {

using nn_util::ConvGeom;

// ---- gemm and im2col ----

using cpu::Gemm;

// For a kernel tap at offset `off` (= tap * dilation - pad) along one axis: the output positions
// o in [lo, hi) whose input position o * stride + off lies inside [0, in). Computing the range
// once per tap keeps the bounds checks out of the inner loops, which then vectorise.
struct TapRange {
  int64_t lo, hi;
};
TapRange ValidOutputs(int64_t off, int64_t stride, int64_t in, int64_t out) {
  auto ceil_div = [](int64_t a, int64_t b) { return a <= 0 ? 0 : (a + b - 1) / b; };
  const int64_t lo = std::min(ceil_div(-off, stride), out);
  const int64_t hi = std::min(ceil_div(in - off, stride), out);
  return {lo, std::max(lo, hi)};
}

// Copies a row of n elements: memcpy for long rows; short ones (a few kernel widths, as in small
// feature maps) with an inline loop, which costs far less than a library call. The attribute
// keeps GCC from turning the loop back into a memcpy call.
template <typename T>
__attribute__((optimize("no-tree-loop-distribute-patterns"))) inline void CopyRow(
    T* __restrict dst, const T* __restrict src, int64_t n) {
  if (n >= 64) {
    std::memcpy(dst, src, sizeof(T) * n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}

// col (cg * kh * kw, oh * ow), rows `ld` apart: row (c, i, j) holds the input pixel under kernel
// tap (i, j) of channel c for every output position, 0 where the tap falls in the padding.
// ld > oh * ow lets several samples share one buffer, side by side in each row.
template <typename T>
void Im2Col(const ConvGeom& g, const T* x, T* col, int64_t ld) {
  for (int64_t c = 0; c < g.cg(); ++c) {
    const T* xc = x + c * g.h * g.w;
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t off_h = i * g.dh - g.ph;
      const TapRange rh = ValidOutputs(off_h, g.sh, g.h, g.oh);
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t off_w = j * g.dw - g.pw;
        const TapRange rw = ValidOutputs(off_w, g.sw, g.w, g.ow);
        T* row = col + ((c * g.kh + i) * g.kw + j) * ld;
        std::fill(row, row + rh.lo * g.ow, T(0));
        if (g.sw == 1 && rw.lo == 0 && rw.hi == g.ow && g.sh == 1 && g.dh >= 1 && g.ow == g.w) {
          // Whole rows, contiguous in the input: one copy for the valid band.
          const T* src = xc + (rh.lo * g.sh + off_h) * g.w + off_w;
          std::memcpy(row + rh.lo * g.ow, src, sizeof(T) * (rh.hi - rh.lo) * g.ow);
        } else if (g.sw == 1) {
          for (int64_t oh = rh.lo; oh < rh.hi; ++oh) {
            T* out = row + oh * g.ow;
            const T* xrow = xc + (oh * g.sh + off_h) * g.w + off_w;
            std::fill(out, out + rw.lo, T(0));
            CopyRow(out + rw.lo, xrow + rw.lo, rw.hi - rw.lo);
            std::fill(out + rw.hi, out + g.ow, T(0));
          }
        } else {
          for (int64_t oh = rh.lo; oh < rh.hi; ++oh) {
            T* out = row + oh * g.ow;
            const T* xrow = xc + (oh * g.sh + off_h) * g.w + off_w;
            std::fill(out, out + rw.lo, T(0));
            for (int64_t ow = rw.lo; ow < rw.hi; ++ow) out[ow] = xrow[ow * g.sw];
            std::fill(out + rw.hi, out + g.ow, T(0));
          }
        }
        std::fill(row + rh.hi * g.ow, row + g.out_plane(), T(0));
      }
    }
  }
}

// The adjoint of Im2Col: adds every column entry back onto the pixel it was read from.
template <typename T>
void Col2ImAdd(const ConvGeom& g, const T* col, int64_t ld, T* dx) {
  for (int64_t c = 0; c < g.cg(); ++c) {
    T* dxc = dx + c * g.h * g.w;
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t off_h = i * g.dh - g.ph;
      const TapRange rh = ValidOutputs(off_h, g.sh, g.h, g.oh);
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t off_w = j * g.dw - g.pw;
        const TapRange rw = ValidOutputs(off_w, g.sw, g.w, g.ow);
        const T* row = col + ((c * g.kh + i) * g.kw + j) * ld;
        for (int64_t oh = rh.lo; oh < rh.hi; ++oh) {
          const T* in = row + oh * g.ow;
          T* dxrow = dxc + (oh * g.sh + off_h) * g.w + off_w;
          if (g.sw == 1) {
            for (int64_t ow = rw.lo; ow < rw.hi; ++ow) dxrow[ow] += in[ow];
          } else {
            for (int64_t ow = rw.lo; ow < rw.hi; ++ow) dxrow[ow * g.sw] += in[ow];
          }
        }
      }
    }
  }
}

// ---- depthwise: output channel oc reads input channel oc / multiplier only ----
// Each loops over the kernel taps outside and one output plane inside, so the inner loop is a
// strided axpy (or dot product) over a row.

// Visits every (sample n, output channel oc, tap (i, j)): plane(oc, out_plane) once per output
// plane, then tap(in_plane, out_plane, k, rh, rw, off_h, off_w) for each tap, with the planes as
// element offsets of input channel oc / multiplier and output channel oc, k the weight's index
// and [rh.lo, rh.hi) x [rw.lo, rw.hi) the output rows and columns the tap reaches.
template <typename Plane, typename Tap>
void ForEachDepthwiseTap(const ConvGeom& g, Plane plane, Tap tap) {
  const int64_t mult = g.o / g.c;
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t oc = 0; oc < g.o; ++oc) {
      const int64_t in_plane = (n * g.c + oc / mult) * g.h * g.w;
      const int64_t out_plane = (n * g.o + oc) * g.out_plane();
      plane(oc, out_plane);
      for (int64_t i = 0; i < g.kh; ++i) {
        const int64_t off_h = i * g.dh - g.ph;
        const TapRange rh = ValidOutputs(off_h, g.sh, g.h, g.oh);
        for (int64_t j = 0; j < g.kw; ++j) {
          const int64_t off_w = j * g.dw - g.pw;
          const TapRange rw = ValidOutputs(off_w, g.sw, g.w, g.ow);
          tap(in_plane, out_plane, (oc * g.kh + i) * g.kw + j, rh, rw, off_h, off_w);
        }
      }
    }
  }
}

template <typename T>
void DepthwiseForward(const ConvGeom& g, const T* x, const T* w, const T* b, T* y) {
  ForEachDepthwiseTap(
      g,
      [&](int64_t oc, int64_t out_plane) {
        std::fill(y + out_plane, y + out_plane + g.out_plane(), b ? b[oc] : T(0));
      },
      [&](int64_t in_plane, int64_t out_plane, int64_t k, TapRange rh, TapRange rw, int64_t off_h,
          int64_t off_w) {
        const T wv = w[k];
        for (int64_t oh = rh.lo; oh < rh.hi; ++oh) {
          const T* xrow = x + in_plane + (oh * g.sh + off_h) * g.w + off_w;
          T* yrow = y + out_plane + oh * g.ow;
          for (int64_t ow = rw.lo; ow < rw.hi; ++ow) yrow[ow] += wv * xrow[ow * g.sw];
        }
      });
}

// REQUIRES: dx zeroed.
template <typename T>
void DepthwiseGradInput(const ConvGeom& g, const T* dy, const T* w, T* dx) {
  ForEachDepthwiseTap(
      g, [](int64_t, int64_t) {},
      [&](int64_t in_plane, int64_t out_plane, int64_t k, TapRange rh, TapRange rw, int64_t off_h,
          int64_t off_w) {
        const T wv = w[k];
        for (int64_t oh = rh.lo; oh < rh.hi; ++oh) {
          T* dxrow = dx + in_plane + (oh * g.sh + off_h) * g.w + off_w;
          const T* dyrow = dy + out_plane + oh * g.ow;
          for (int64_t ow = rw.lo; ow < rw.hi; ++ow) dxrow[ow * g.sw] += wv * dyrow[ow];
        }
      });
}

// REQUIRES: dw zeroed.
template <typename T>
void DepthwiseGradWeight(const ConvGeom& g, const T* dy, const T* x, T* dw) {
  ForEachDepthwiseTap(
      g, [](int64_t, int64_t) {},
      [&](int64_t in_plane, int64_t out_plane, int64_t k, TapRange rh, TapRange rw, int64_t off_h,
          int64_t off_w) {
        T acc = 0;
        for (int64_t oh = rh.lo; oh < rh.hi; ++oh) {
          const T* xrow = x + in_plane + (oh * g.sh + off_h) * g.w + off_w;
          const T* dyrow = dy + out_plane + oh * g.ow;
          for (int64_t ow = rw.lo; ow < rw.hi; ++ow) acc += dyrow[ow] * xrow[ow * g.sw];
        }
        dw[k] += acc;
      });
}

// ---- gemm paths ----
// Samples go through in chunks of nb: the im2col buffer holds (k, nb * plane), the columns of
// sample s at s * plane, so each group costs one gemm per chunk rather than one per sample.

// Samples per chunk, keeping the buffer near kColBudget elements (at least one sample).
constexpr int64_t kColBudget = int64_t(1) << 18;  // 1 MiB of float, about L2
int64_t ChunkSamples(const ConvGeom& g) {
  const int64_t per = std::max<int64_t>(1, g.col_rows() * g.out_plane());
  return std::max<int64_t>(1, std::min(g.n, kColBudget / per));
}

// col (k, nb * plane) for samples [n0, n0 + nb) and group grp.
template <typename T>
void BatchIm2Col(const ConvGeom& g, const T* x, int64_t n0, int64_t nb, int64_t grp, T* col) {
  const int64_t plane = g.out_plane(), ld = nb * plane;
  for (int64_t s = 0; s < nb; ++s) {
    const T* xg = x + ((n0 + s) * g.c + grp * g.cg()) * g.h * g.w;
    if (g.pointwise()) {
      for (int64_t c = 0; c < g.cg(); ++c) {
        CopyRow(col + c * ld + s * plane, xg + c * plane, plane);
      }
    } else {
      Im2Col(g, xg, col + s * plane, ld);
    }
  }
}

template <typename T>
void ConvForward(const ConvGeom& g, const T* x, const T* w, const T* b, T* y) {
  if (g.depthwise()) return DepthwiseForward(g, x, w, b, y);
  const int64_t k = g.col_rows(), plane = g.out_plane(), og = g.og();
  const int64_t chunk = ChunkSamples(g);
  std::vector<T> col(k * chunk * plane), out(og * chunk * plane);
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    const int64_t nb = std::min(chunk, g.n - n0), ld = nb * plane;
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      BatchIm2Col(g, x, n0, nb, grp, col.data());
      Gemm(false, false, og, ld, k, T(1), w + grp * og * k, k, col.data(), ld, T(0), out.data(),
           ld);
      // out (og, nb, plane) -> y (nb, o, plane), adding the bias.
      for (int64_t s = 0; s < nb; ++s) {
        for (int64_t oc = 0; oc < og; ++oc) {
          const int64_t ch = grp * og + oc;
          const T bias = b ? b[ch] : T(0);
          const T* src = out.data() + oc * ld + s * plane;
          T* dst = y + ((n0 + s) * g.o + ch) * plane;
          for (int64_t p = 0; p < plane; ++p) dst[p] = src[p] + bias;
        }
      }
    }
  }
}

// dyt (og, nb, plane) <- dy (nb, o, plane) restricted to group grp.
template <typename T>
void GatherGradOutput(const ConvGeom& g, const T* dy, int64_t n0, int64_t nb, int64_t grp, T* dyt) {
  const int64_t plane = g.out_plane(), og = g.og(), ld = nb * plane;
  for (int64_t s = 0; s < nb; ++s) {
    for (int64_t oc = 0; oc < og; ++oc) {
      CopyRow(dyt + oc * ld + s * plane, dy + ((n0 + s) * g.o + grp * og + oc) * plane, plane);
    }
  }
}

template <typename T>
void ConvGradInput(const ConvGeom& g, const T* dy, const T* w, T* dx) {
  std::fill(dx, dx + g.n * g.c * g.h * g.w, T(0));
  if (g.depthwise()) return DepthwiseGradInput(g, dy, w, dx);
  const int64_t k = g.col_rows(), plane = g.out_plane(), og = g.og();
  const int64_t chunk = ChunkSamples(g);
  std::vector<T> col(k * chunk * plane), dyt(og * chunk * plane);  // zeroed: valid if og == 0
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    const int64_t nb = std::min(chunk, g.n - n0), ld = nb * plane;
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      GatherGradOutput(g, dy, n0, nb, grp, dyt.data());
      Gemm(true, false, k, ld, og, T(1), w + grp * og * k, k, dyt.data(), ld, T(0), col.data(), ld);
      for (int64_t s = 0; s < nb; ++s) {
        T* dxg = dx + ((n0 + s) * g.c + grp * g.cg()) * g.h * g.w;
        if (g.pointwise()) {
          for (int64_t c = 0; c < k; ++c) {
            CopyRow(dxg + c * plane, col.data() + c * ld + s * plane, plane);
          }
        } else {
          Col2ImAdd(g, col.data() + s * plane, ld, dxg);
        }
      }
    }
  }
}

template <typename T>
void ConvGradWeight(const ConvGeom& g, const T* dy, const T* x, T* dw) {
  std::fill(dw, dw + g.o * g.col_rows(), T(0));
  if (g.depthwise()) return DepthwiseGradWeight(g, dy, x, dw);
  const int64_t k = g.col_rows(), plane = g.out_plane(), og = g.og();
  const int64_t chunk = ChunkSamples(g);
  std::vector<T> col(k * chunk * plane), dyt(og * chunk * plane);
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    const int64_t nb = std::min(chunk, g.n - n0), ld = nb * plane;
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      BatchIm2Col(g, x, n0, nb, grp, col.data());
      GatherGradOutput(g, dy, n0, nb, grp, dyt.data());
      Gemm(false, true, og, k, ld, T(1), dyt.data(), ld, col.data(), ld, T(1), dw + grp * og * k,
           k);
    }
  }
}

// ---- oneDNN path (float32) ----
// Forward, backward-data and backward-weights of non-depthwise float32 convolutions go through
// oneDNN (what PyTorch uses on CPU). Primitives are built once per geometry and cached; the
// user tensors are plain NCHW / (G)OIHW. The im2col path stays for float64, for depthwise
// convolutions (the direct loops are faster there) and for anything oneDNN refuses.

// Set to false to route every convolution through the im2col / depthwise kernels.
constexpr bool kUseOneDnn = true;
// true: let oneDNN pick blocked layouts ("any") and reorder to and from the plain tensors;
// false: run the primitives on the plain layouts directly.
constexpr bool kOneDnnAnyLayout = true;

// Backward-data through oneDNN only from this many input channels per group (see GradInput).
constexpr int64_t kOneDnnMinGradInputChannels = 4;

namespace dnn {

using dnnl::memory;
using Tag = memory::format_tag;

// The process's oneDNN engine and stream (core/kernels/cpu/onednn_eltwise.h).
struct Runtime {
  dnnl::engine& eng = cpu::OneDnnEngine();
  dnnl::stream& strm = cpu::OneDnnStream();
};
Runtime Rt() { return Runtime(); }

// One primitive argument: the user's plain memory (its handle set per call) and, when oneDNN
// wants another layout, an internal buffer with the reorder between the two.
struct Arg {
  memory user, inner;
  bool reordered = false;
  dnnl::reorder reorder;  // user -> inner for inputs, inner -> user for outputs
  void Init(const memory::desc& user_md, const memory::desc& prim_md, bool output) {
    auto& eng = Rt().eng;
    user = memory(user_md, eng, DNNL_MEMORY_NONE);
    if (prim_md != user_md) {
      reordered = true;
      inner = memory(prim_md, eng);
      reorder = output ? dnnl::reorder(inner, user) : dnnl::reorder(user, inner);
    } else {
      inner = user;
    }
  }
  void In(const void* p, dnnl::stream& s) {
    user.set_data_handle(const_cast<void*>(p));
    if (reordered) reorder.execute(s, user, inner);
  }
  void Out(void* p) { user.set_data_handle(p); }
  void Finish(dnnl::stream& s) {
    if (reordered) reorder.execute(s, inner, user);
  }
};

enum Kind : int64_t { kFwd = 0, kBwdData = 1, kBwdWeights = 2 };

struct Entry {
  std::mutex mu;  // the memories hold per-call handles
  dnnl::primitive prim;
  Arg a, b, c;  // fwd: src, weights, dst; bwd_data: diff_dst, weights, diff_src;
                // bwd_weights: src, diff_dst, diff_weights
  Arg bias;     // fwd only, when has_bias
  bool has_bias = false;
};

using Key = std::array<int64_t, 18>;

struct Descs {
  memory::desc src, wei, dst, bias;
  memory::desc src_any, wei_any, dst_any, bias_any;
  memory::dims strides, dil, padl, padr;
};

// dt: f32, or bf16 (oneDNN's bf16 convolutions accumulate in f32).
Descs MakeDescs(const ConvGeom& g, memory::data_type dt) {
  Descs d;
  memory::dims src{g.n, g.c, g.h, g.w}, dst{g.n, g.o, g.oh, g.ow};
  memory::dims wei = g.groups > 1 ? memory::dims{g.groups, g.og(), g.cg(), g.kh, g.kw}
                                  : memory::dims{g.o, g.c, g.kh, g.kw};
  d.src = memory::desc(src, dt, Tag::nchw);
  d.dst = memory::desc(dst, dt, Tag::nchw);
  d.wei = memory::desc(wei, dt, g.groups > 1 ? Tag::goihw : Tag::oihw);
  d.bias = memory::desc({g.o}, dt, Tag::x);
  if (kOneDnnAnyLayout) {
    d.src_any = memory::desc(src, dt, Tag::any);
    d.dst_any = memory::desc(dst, dt, Tag::any);
    d.wei_any = memory::desc(wei, dt, Tag::any);
  } else {
    d.src_any = d.src, d.dst_any = d.dst, d.wei_any = d.wei;
  }
  d.bias_any = d.bias;
  d.strides = {g.sh, g.sw};
  d.dil = {g.dh - 1, g.dw - 1};
  d.padl = {g.ph, g.pw};
  d.padr = {(g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1 - g.h - g.ph,
            (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1 - g.w - g.pw};
  return d;
}

dnnl::convolution_forward::primitive_desc FwdPd(const Descs& d, bool bias) {
  auto& eng = Rt().eng;
  const auto prop = dnnl::prop_kind::forward_training;
  const auto algo = dnnl::algorithm::convolution_direct;
  if (bias) {
    return {
        {prop, algo, d.src_any, d.wei_any, d.bias_any, d.dst_any, d.strides, d.dil, d.padl, d.padr},
        eng};
  }
  return {{prop, algo, d.src_any, d.wei_any, d.dst_any, d.strides, d.dil, d.padl, d.padr}, eng};
}

// oneDNN's reference bf16 convolution (no JIT kernel for the geometry) is slower than float32.
bool SlowHalf(memory::data_type dt, const char* impl) {
  return dt != memory::data_type::f32 && std::string(impl).rfind("ref", 0) == 0;
}

// Null where a bf16 case would run on oneDNN's reference kernels.
std::shared_ptr<Entry> Build(const ConvGeom& g, Kind kind, bool bias, memory::data_type dt) {
  auto& eng = Rt().eng;
  Descs d = MakeDescs(g, dt);
  auto e = std::make_shared<Entry>();
  const auto algo = dnnl::algorithm::convolution_direct;
  if (kind == kFwd) {
    auto pd = FwdPd(d, bias);
    if (SlowHalf(dt, pd.impl_info_str())) return nullptr;
    e->prim = dnnl::convolution_forward(pd);
    e->a.Init(d.src, pd.src_desc(), false);
    e->b.Init(d.wei, pd.weights_desc(), false);
    e->c.Init(d.dst, pd.dst_desc(), true);
    if (bias) e->bias.Init(d.bias, pd.bias_desc(), false);
    e->has_bias = bias;
  } else if (kind == kBwdData) {
    auto hint = FwdPd(d, false);
    dnnl::convolution_backward_data::primitive_desc pd(
        {algo, d.src_any, d.wei_any, d.dst_any, d.strides, d.dil, d.padl, d.padr}, eng, hint);
    if (SlowHalf(dt, pd.impl_info_str())) return nullptr;
    e->prim = dnnl::convolution_backward_data(pd);
    e->a.Init(d.dst, pd.diff_dst_desc(), false);
    e->b.Init(d.wei, pd.weights_desc(), false);
    e->c.Init(d.src, pd.diff_src_desc(), true);
  } else {
    auto hint = FwdPd(d, false);
    dnnl::convolution_backward_weights::primitive_desc pd(
        {algo, d.src_any, d.wei_any, d.dst_any, d.strides, d.dil, d.padl, d.padr}, eng, hint);
    if (SlowHalf(dt, pd.impl_info_str())) return nullptr;
    e->prim = dnnl::convolution_backward_weights(pd);
    e->a.Init(d.src, pd.src_desc(), false);
    e->b.Init(d.dst, pd.diff_dst_desc(), false);
    e->c.Init(d.wei, pd.diff_weights_desc(), true);
  }
  return e;
}

// The cached primitive for (g, kind, bias), or null where oneDNN does not take the case.
std::shared_ptr<Entry> Get(const ConvGeom& g, Kind kind, bool bias,
                           memory::data_type dt = memory::data_type::f32) {
  if (!kUseOneDnn || g.depthwise()) return nullptr;
  const Key key = {g.n,
                   g.c,
                   g.h,
                   g.w,
                   g.o,
                   g.kh,
                   g.kw,
                   g.sh,
                   g.sw,
                   g.ph,
                   g.pw,
                   g.dh,
                   g.dw,
                   g.groups,
                   kind,
                   bias,
                   static_cast<int64_t>(dt),
                   0};
  static std::mutex mu;
  static auto* cache = new std::map<Key, std::shared_ptr<Entry>>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache->find(key);
  if (it != cache->end()) return it->second;
  std::shared_ptr<Entry> e;
  try {
    e = Build(g, kind, bias, dt);
  } catch (const dnnl::error&) {
    e = nullptr;  // remembered: the fallback handles this geometry from now on
  }
  cache->emplace(key, e);
  return e;
}

// Runs the cached primitive of (g, kind) on a (first input), b (second input) and an optional
// bias into c, the three named by oneDNN's argument ids; false when oneDNN does not take g.
bool Execute(const ConvGeom& g, Kind kind, memory::data_type dt, std::pair<int, const void*> a,
             std::pair<int, const void*> b, std::pair<int, void*> c, const void* bias = nullptr) {
  auto e = Get(g, kind, bias != nullptr, dt);
  if (!e) return false;
  std::lock_guard<std::mutex> lock(e->mu);
  auto& s = Rt().strm;
  e->a.In(a.second, s);
  e->b.In(b.second, s);
  if (bias) e->bias.In(bias, s);
  e->c.Out(c.second);
  std::unordered_map<int, memory> args = {
      {a.first, e->a.inner}, {b.first, e->b.inner}, {c.first, e->c.inner}};
  if (bias) args[DNNL_ARG_BIAS] = e->bias.inner;
  e->prim.execute(s, args);
  e->c.Finish(s);
  s.wait();
  return true;
}

bool Forward(const ConvGeom& g, const void* x, const void* w, const void* b, void* y,
             memory::data_type dt = memory::data_type::f32) {
  return Execute(g, kFwd, dt, {DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}, b);
}

bool GradInput(const ConvGeom& g, const void* dy, const void* w, void* dx,
               memory::data_type dt = memory::data_type::f32) {
  // With few input channels per group oneDNN's backward-data pads them to a full vector block
  // (5.7 ms vs about 3 ms for col2im on 64x3x32x32, k5 -> 6): keep the im2col path there.
  if (g.cg() < kOneDnnMinGradInputChannels) return false;
  return Execute(g, kBwdData, dt, {DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_WEIGHTS, w},
                 {DNNL_ARG_DIFF_SRC, dx});
}

bool GradWeight(const ConvGeom& g, const void* dy, const void* x, void* dw,
                memory::data_type dt = memory::data_type::f32) {
  return Execute(g, kBwdWeights, dt, {DNNL_ARG_SRC, x}, {DNNL_ARG_DIFF_DST, dy},
                 {DNNL_ARG_DIFF_WEIGHTS, dw});
}

}  // namespace dnn

// Type dispatch: oneDNN for float32 where it takes the case, im2col otherwise.
template <typename T>
bool TryOneDnnForward(const ConvGeom&, const T*, const T*, const T*, T*) {
  return false;
}
template <>
bool TryOneDnnForward<float>(const ConvGeom& g, const float* x, const float* w, const float* b,
                             float* y) {
  return dnn::Forward(g, x, w, b, y);
}
template <typename T>
bool TryOneDnnGradInput(const ConvGeom&, const T*, const T*, T*) {
  return false;
}
template <>
bool TryOneDnnGradInput<float>(const ConvGeom& g, const float* dy, const float* w, float* dx) {
  return dnn::GradInput(g, dy, w, dx);
}
template <typename T>
bool TryOneDnnGradWeight(const ConvGeom&, const T*, const T*, T*) {
  return false;
}
template <>
bool TryOneDnnGradWeight<float>(const ConvGeom& g, const float* dy, const float* x, float* dw) {
  return dnn::GradWeight(g, dy, x, dw);
}

}  // namespace

template <typename T>
void Conv2dForward(const ConvGeom& g, const T* x, const T* w, const T* b, T* y) {
  if (!TryOneDnnForward<T>(g, x, w, b, y)) ConvForward<T>(g, x, w, b, y);
}

template <typename T>
void Conv2dGradInput(const ConvGeom& g, const T* dy, const T* w, T* dx) {
  if (!TryOneDnnGradInput<T>(g, dy, w, dx)) ConvGradInput<T>(g, dy, w, dx);
}

template <typename T>
void Conv2dGradWeight(const ConvGeom& g, const T* dy, const T* x, T* dw) {
  if (!TryOneDnnGradWeight<T>(g, dy, x, dw)) ConvGradWeight<T>(g, dy, x, dw);
}

bool Conv2dForwardBf16(const ConvGeom& g, const BFloat16* x, const BFloat16* w, const BFloat16* b,
                       BFloat16* y) {
  return HasBf16Gemm() && dnn::Forward(g, x, w, b, y, dnnl::memory::data_type::bf16);
}
bool Conv2dGradInputBf16(const ConvGeom& g, const BFloat16* dy, const BFloat16* w, BFloat16* dx) {
  return HasBf16Gemm() && dnn::GradInput(g, dy, w, dx, dnnl::memory::data_type::bf16);
}
bool Conv2dGradWeightBf16(const ConvGeom& g, const BFloat16* dy, const BFloat16* x, BFloat16* dw) {
  return HasBf16Gemm() && dnn::GradWeight(g, dy, x, dw, dnnl::memory::data_type::bf16);
}

#define ONEFLOW_CONV_INSTANTIATE(T)                                                  \
  template void Conv2dForward<T>(const ConvGeom&, const T*, const T*, const T*, T*); \
  template void Conv2dGradInput<T>(const ConvGeom&, const T*, const T*, T*);         \
  template void Conv2dGradWeight<T>(const ConvGeom&, const T*, const T*, T*);
ONEFLOW_CONV_INSTANTIATE(float)
ONEFLOW_CONV_INSTANTIATE(double)
#undef ONEFLOW_CONV_INSTANTIATE

}  // namespace cpu
}  // namespace oneflow
