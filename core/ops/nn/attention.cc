// scaled_dot_product_attention as one op, with its backward op:
//
//   scaled_dot_product_attention(q [..., L, E], k [..., S, E], v [..., S, Ev][, mask])
//       -> (out [..., L, Ev], lse [..., L])
//   scaled_dot_product_attention_grad(dout, q, k, v, out, lse[, mask]) -> (dq, dk, dv)
//
//   Tensor y = fn::scaled_dot_product_attention(q, k, v, Tensor(), /*dropout_p=*/0.0,
//                                               /*is_causal=*/true, std::nullopt);
//
// out = softmax(q k^T * scale + mask) v per batch element; lse is the log-sum-exp of each row of
// the masked scores (what the backward recomputes the softmax from). The mask (bool: keep where
// true; floating: added to the scores) broadcasts to [..., L, S]; is_causal keeps j <= i (top
// left aligned). A row whose every element is masked gives NaN (0 / 0, as the softmax of such
// a row) and lse -inf, and takes no part in the gradients. Dropout (attrs dropout_p, seed,
// offset) multiplies the weights by the keep-mask dropout_mask would draw for a tensor of shape
// [..., L, S] at that seed and offset, scaled by 1 / (1 - p), in the forward and the backward.
//
// The CPU kernels below compute per batch element with GEMMs (core/kernels/cpu/blas.h) and row
// passes for the softmax, in the compute type (float32 for the half types); the CUDA kernels are
// core/kernels/cuda/attention.cu, the SBP rule sbp/rules/nn.cc; the op composed of other ops
// (ComposedAttention, attention.h) serves the CUDA kernel outside the fused kernels' reach.
#include "core/ops/nn/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/kernels/cpu/blas.h"
#include "core/kernels/cpu/cpu_util.h"
#include "core/ops/counter_rng.h"
#include "core/ops/nn/nn.h"
#include "core/ops/op_util.h"

namespace oneflow {

namespace {

constexpr char kOp[] = "scaled_dot_product_attention";

// The attrs' dropout: element c of the [..., L, S] weights is kept when the generator's uniform
// draw at offset + c is >= p (rng::DropoutKeep, as dropout_mask).
struct Dropout {
  bool on = false;
  double p = 0, scale = 1;
  uint64_t seed = 0, offset = 0;
  int64_t batch_offset = 0;
  explicit Dropout(const Attrs& a) {
    p = a.Get<double>("dropout_p");
    on = p > 0;
    scale = p < 1 ? 1.0 / (1.0 - p) : 0.0;
    seed = static_cast<uint64_t>(a.Get<int64_t>("seed"));
    offset = static_cast<uint64_t>(a.Get<int64_t>("offset"));
    batch_offset = a.Get<int64_t>("batch_offset");
  }
  bool Keeps(int64_t b, int64_t i, int64_t j, int64_t L, int64_t S) const {
    const uint64_t c = offset + static_cast<uint64_t>(((batch_offset + b) * L + i) * S + j);
    return rng::DropoutKeep(seed, c, p);
  }
};

struct Dims {
  int64_t batch = 1, L = 0, S = 0, E = 0, Ev = 0;
};

Dims DimsOf(const Shape& q, const Shape& k, const Shape& v) {
  Dims d;
  const int64_t n = q.ndim();
  for (int64_t a = 0; a < n - 2; ++a) d.batch *= q[a];
  d.L = q[n - 2];
  d.E = q[n - 1];
  d.S = k[n - 2];
  d.Ev = v[n - 1];
  return d;
}

void CheckInputs(const std::vector<TensorMeta>& in, size_t first, const char* op) {
  const TensorMeta &q = in[first], &k = in[first + 1], &v = in[first + 2];
  ONEFLOW_CHECK(IsFloating(q.dtype), op, ": expected floating point query, key and value, got ",
                DTypeName(q.dtype));
  ONEFLOW_CHECK(k.dtype == q.dtype && v.dtype == q.dtype, op,
                ": query, key and value must have one dtype, got ", DTypeName(q.dtype), ", ",
                DTypeName(k.dtype), ", ", DTypeName(v.dtype));
  const int64_t n = q.shape.ndim();
  ONEFLOW_CHECK(n >= 2 && k.shape.ndim() == n && v.shape.ndim() == n, op,
                ": expected query, key and value of one rank >= 2, got ", q.shape, ", ", k.shape,
                ", ", v.shape);
  for (int64_t a = 0; a < n - 2; ++a) {
    ONEFLOW_CHECK(k.shape[a] == q.shape[a] && v.shape[a] == q.shape[a], op,
                  ": query, key and value must share their batch dims, got ", q.shape, ", ",
                  k.shape, ", ", v.shape);
  }
  ONEFLOW_CHECK(k.shape[n - 1] == q.shape[n - 1], op, ": query's last dim ", q.shape[n - 1],
                " differs from key's ", k.shape[n - 1]);
  ONEFLOW_CHECK(v.shape[n - 2] == k.shape[n - 2], op, ": key has ", k.shape[n - 2],
                " positions but value has ", v.shape[n - 2]);
}

// The mask (input `at` when present) broadcasts to q's batch dims + [L, S].
void CheckMask(const std::vector<TensorMeta>& in, size_t at, const Dims& d, const Shape& q,
               const char* op) {
  if (in.size() <= at) return;
  const TensorMeta& m = in[at];
  ONEFLOW_CHECK(m.dtype == DType::kBool || IsFloating(m.dtype), op,
                ": expected a bool or floating point attn_mask, got ", DTypeName(m.dtype));
  std::vector<int64_t> fd = q.dims();
  fd.back() = d.S;
  const Shape full(fd);
  bool fits = m.shape.ndim() <= full.ndim();
  for (int64_t a = 1; fits && a <= m.shape.ndim(); ++a) {
    const int64_t ms = m.shape[m.shape.ndim() - a], fs = full[full.ndim() - a];
    fits = ms == 1 || ms == fs;
  }
  ONEFLOW_CHECK(fits, op, ": attn_mask of shape ", m.shape, " does not broadcast to ", full);
}

std::vector<TensorMeta> InferAttention(const std::vector<TensorMeta>& in, const Attrs&) {
  ONEFLOW_CHECK(in.size() == 3 || in.size() == 4, kOp,
                ": expected query, key, value and an optional attn_mask, got ", in.size(),
                " tensors");
  CheckInputs(in, 0, kOp);
  const Dims d = DimsOf(in[0].shape, in[1].shape, in[2].shape);
  CheckMask(in, 3, d, in[0].shape, kOp);
  std::vector<int64_t> out = in[0].shape.dims();
  out.back() = d.Ev;
  std::vector<int64_t> lse(out.begin(), out.end() - 1);
  const DType lse_type = in[0].dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  return {{Shape(out), in[0].dtype, in[0].device}, {Shape(lse), lse_type, in[0].device}};
}

std::vector<TensorMeta> InferAttentionGrad(const std::vector<TensorMeta>& in, const Attrs&) {
  return {in[1], in[2], in[3]};
}

// The mask as the compute type T (bool masks as they are), with its strides over q's batch
// dims + [L, S] (0 where it broadcasts).
struct CpuMask {
  int kind = 0;  // 0 none, 1 bool, 2 additive
  Tensor t;
  std::vector<int64_t> size, stride;  // batch dims of q
  int64_t row_stride = 0, col_stride = 0;

  template <typename T>
  CpuMask(const std::vector<Tensor>& in, size_t at, const Shape& q, DType dt, T*) {
    if (in.size() <= at) return;
    t = in[at].dtype() == DType::kBool ? in[at] : fn::to_dtype(in[at], dt);
    kind = t.dtype() == DType::kBool ? 1 : 2;
    const int64_t n = q.ndim(), mn = t.ndim();
    auto stride_at = [&](int64_t a) {  // a: axis of the full [..., L, S]
      const int64_t ma = a - (n - mn);
      return ma < 0 || t.shape()[ma] == 1 ? int64_t{0} : t.strides()[ma];
    };
    for (int64_t a = 0; a < n - 2; ++a) {
      size.push_back(q[a]);
      stride.push_back(stride_at(a));
    }
    row_stride = stride_at(n - 2);
    col_stride = stride_at(n - 1);
  }
  int64_t BatchOffset(int64_t b) const {
    int64_t off = 0;
    for (int64_t d = static_cast<int64_t>(size.size()) - 1; d >= 0; --d) {
      off += (b % size[d]) * stride[d];
      b /= size[d];
    }
    return off;
  }
};

template <typename T>
T Dot(const T* a, const T* b, int64_t n) {
  T s = 0;
  for (int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

// s = scale * q_b k_b^T ([L, S], one batch element), then -inf where masked (causal, bool mask)
// and the additive mask added.
template <typename T>
void MaskedScores(const CpuMask& m, const T* mdata, const bool* mkeep, int64_t b, const Dims& d,
                  bool causal, double scale, const T* qb, const T* kb, T* s) {
  if (d.E > 0) {
    cpu::Gemm(false, true, d.L, d.S, d.E, static_cast<T>(scale), qb, d.E, kb, d.E, T(0), s, d.S);
  } else {
    std::fill_n(s, d.L * d.S, T(0));
  }
  const T inf = std::numeric_limits<T>::infinity();
  const int64_t mbase = m.kind ? m.BatchOffset(b) : 0;
  for (int64_t i = 0; i < d.L; ++i) {
    T* si = s + i * d.S;
    if (m.kind == 1) {
      for (int64_t j = 0; j < d.S; ++j) {
        if (!mkeep[mbase + i * m.row_stride + j * m.col_stride]) si[j] = -inf;
      }
    } else if (m.kind == 2) {
      for (int64_t j = 0; j < d.S; ++j) si[j] += mdata[mbase + i * m.row_stride + j * m.col_stride];
    }
    if (causal) std::fill(si + std::min(i + 1, d.S), si + d.S, -inf);
  }
}

// Per batch element: the scores by one GEMM, the softmax row by row (its max ignoring NaN; a row
// with nothing unmasked gives 0 / 0), the weights (after dropout) times v by another GEMM.
std::vector<Tensor> AttentionCpu(const std::vector<Tensor>& in, const Attrs& a,
                                 const std::vector<TensorMeta>& out) {
  Tensor q = Contig(in[0]), k = Contig(in[1]), v = Contig(in[2]);
  Tensor y = Tensor::Empty(out[0]), lse = Tensor::Empty(out[1]);
  const Dims d = DimsOf(q.shape(), k.shape(), v.shape());
  const double scale = a.Get<double>("scale");
  const bool causal = a.Get<bool>("is_causal");
  const Dropout drop(a);
  DispatchFloating(q.dtype(), kOp, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const CpuMask m(in, 3, q.shape(), q.dtype(), static_cast<T*>(nullptr));
    const T* mdata = m.kind == 2 ? m.t.data<T>() : nullptr;
    const bool* mkeep = m.kind == 1 ? m.t.data<bool>() : nullptr;
    const T inf = std::numeric_limits<T>::infinity();
    std::vector<T> s(d.L * d.S);
    for (int64_t b = 0; b < d.batch; ++b) {
      MaskedScores(m, mdata, mkeep, b, d, causal, scale, q.data<T>() + b * d.L * d.E,
                   k.data<T>() + b * d.S * d.E, s.data());
      for (int64_t i = 0; i < d.L; ++i) {
        T* si = s.data() + i * d.S;
        T mx = -inf;
        for (int64_t j = 0; j < d.S; ++j) mx = std::fmax(mx, si[j]);
        T l = 0;
        for (int64_t j = 0; j < d.S; ++j) {
          si[j] = mx == -inf ? T(0) : std::exp(si[j] - mx);
          l += si[j];
        }
        for (int64_t j = 0; j < d.S; ++j) {
          T p = si[j];
          if (drop.on && p != T(0)) {
            p = drop.Keeps(b, i, j, d.L, d.S) ? p * static_cast<T>(drop.scale) : T(0);
          }
          si[j] = p / l;  // 0 / 0 = NaN for a row with nothing unmasked
        }
        lse.data<T>()[b * d.L + i] = mx + std::log(l);
      }
      T* yb = y.data<T>() + b * d.L * d.Ev;
      if (d.S > 0 && d.Ev > 0) {
        cpu::Gemm(false, false, d.L, d.Ev, d.S, T(1), s.data(), d.S, v.data<T>() + b * d.S * d.Ev,
                  d.Ev, T(0), yb, d.Ev);
      } else {
        std::fill_n(yb, d.L * d.Ev, std::numeric_limits<T>::quiet_NaN());
      }
    }
  });
  return {y, lse};
}

// ds_ij = p_ij (dp'_ij - D_i) scale with p_ij = exp(score - lse_i), dp' = dout_i . v_j after
// dropout, D_i = dout_i . out_i; dq = ds k, dk = ds^T q, dv = p'^T dout (p' after dropout), by
// GEMMs per batch element. A masked element, or any of a fully masked row (lse -inf), has
// ds = 0 and p' = 0.
std::vector<Tensor> AttentionGradCpu(const std::vector<Tensor>& in, const Attrs& a,
                                     const std::vector<TensorMeta>& out) {
  Tensor dy = Contig(in[0]), q = Contig(in[1]), k = Contig(in[2]), v = Contig(in[3]),
         y = Contig(in[4]), lse = Contig(in[5]);
  Tensor dq = Tensor::Empty(out[0]), dk = Tensor::Empty(out[1]), dv = Tensor::Empty(out[2]);
  const Dims d = DimsOf(q.shape(), k.shape(), v.shape());
  const double scale = a.Get<double>("scale");
  const bool causal = a.Get<bool>("is_causal");
  const Dropout drop(a);
  DispatchFloating(q.dtype(), "scaled_dot_product_attention backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const CpuMask m(in, 6, q.shape(), q.dtype(), static_cast<T*>(nullptr));
    const T* mdata = m.kind == 2 ? m.t.data<T>() : nullptr;
    const bool* mkeep = m.kind == 1 ? m.t.data<bool>() : nullptr;
    const T inf = std::numeric_limits<T>::infinity();
    std::vector<T> s(d.L * d.S), pv(d.L * d.S), dp(d.L * d.S);
    auto gemm = [](bool ta, bool tb, int64_t mm, int64_t n, int64_t kk, const T* x, int64_t lx,
                   const T* w, int64_t lw, T* c, int64_t lc) {
      if (mm * n == 0) return;
      if (kk == 0) {
        std::fill_n(c, mm * n, T(0));
        return;
      }
      cpu::Gemm(ta, tb, mm, n, kk, T(1), x, lx, w, lw, T(0), c, lc);
    };
    for (int64_t b = 0; b < d.batch; ++b) {
      const T* qb = q.data<T>() + b * d.L * d.E;
      const T* kb = k.data<T>() + b * d.S * d.E;
      const T* vb = v.data<T>() + b * d.S * d.Ev;
      const T* dyb = dy.data<T>() + b * d.L * d.Ev;
      MaskedScores(m, mdata, mkeep, b, d, causal, scale, qb, kb, s.data());
      gemm(false, true, d.L, d.S, d.Ev, dyb, d.Ev, vb, d.Ev, dp.data(), d.S);
      for (int64_t i = 0; i < d.L; ++i) {
        const T di = Dot(dyb + i * d.Ev, y.data<T>() + (b * d.L + i) * d.Ev, d.Ev);
        const T li = lse.data<T>()[b * d.L + i];
        T* si = s.data() + i * d.S;
        T* pvi = pv.data() + i * d.S;
        T* dpi = dp.data() + i * d.S;
        for (int64_t j = 0; j < d.S; ++j) {
          if (si[j] == -inf || li == -inf) {
            si[j] = pvi[j] = 0;  // si becomes ds
            continue;
          }
          const T p = std::exp(si[j] - li);
          T dpj = dpi[j], pj = p;
          if (drop.on) {
            const bool kept = drop.Keeps(b, i, j, d.L, d.S);
            dpj = kept ? dpj * static_cast<T>(drop.scale) : T(0);
            pj = kept ? p * static_cast<T>(drop.scale) : T(0);
          }
          pvi[j] = pj;
          si[j] = p * (dpj - di) * static_cast<T>(scale);
        }
      }
      gemm(false, false, d.L, d.E, d.S, s.data(), d.S, kb, d.E, dq.data<T>() + b * d.L * d.E, d.E);
      gemm(true, false, d.S, d.E, d.L, s.data(), d.S, qb, d.E, dk.data<T>() + b * d.S * d.E, d.E);
      gemm(true, false, d.S, d.Ev, d.L, pv.data(), d.S, dyb, d.Ev, dv.data<T>() + b * d.S * d.Ev,
           d.Ev);
    }
  });
  return {dq, dk, dv};
}

std::vector<Tensor> AttentionGrad(const GradCtx& c) {
  std::vector<Tensor> in = {c.grad_outputs[0], c.inputs[0],  c.inputs[1],
                            c.inputs[2],       c.outputs[0], c.outputs[1]};
  if (c.inputs.size() == 4) in.push_back(c.inputs[3]);
  auto g = CallOp(OP(scaled_dot_product_attention_grad), in, c.attrs);
  std::vector<Tensor> r;
  for (size_t i = 0; i < 3; ++i) r.push_back(c.needs_input_grad[i] ? g[i] : Tensor());
  if (c.inputs.size() == 4) r.push_back(Tensor());
  return r;
}

// ---- the composed form (attention.h): float32 work (float64 for float64 inputs), masked
// elements -inf, a fully masked row NaN with lse -inf and no gradient.

struct ComposedParams {
  double scale;
  bool causal, dropout;
  int64_t L, S;
  ComposedParams(const Attrs& a, const Tensor& q, const Tensor& k)
      : scale(a.Get<double>("scale")),
        causal(a.Get<bool>("is_causal")),
        dropout(a.Get<double>("dropout_p") > 0),
        L(q.shape()[q.ndim() - 2]),
        S(k.shape()[k.ndim() - 2]) {}
};

DType WorkType(const Tensor& t) {
  return t.dtype() == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
}
Tensor As(const Tensor& t, DType wt) { return t.dtype() == wt ? t : fn::to_dtype(t, wt); }

// The scaled, masked scores (float32, -inf where masked).
Tensor ComposedScores(const Tensor& q, const Tensor& k, const std::vector<Tensor>& in,
                      size_t mask_at, const ComposedParams& p) {
  const DType wt = WorkType(q);
  Tensor s = fn::mul_scalar(fn::matmul(As(q, wt), fn::transpose(As(k, wt), -2, -1)), p.scale);
  Tensor ok;
  if (p.causal) {
    ok = fn::ne(fn::tril(fn::constant_like(q, Shape({p.L, p.S}), 1.0, wt)),
                fn::constant_like(q, Shape(), 0.0, wt));
  }
  if (in.size() > mask_at) {
    if (in[mask_at].dtype() == DType::kBool) {
      ok = in[mask_at];
    } else {
      s = fn::add(s, As(in[mask_at], wt));
    }
  }
  if (ok.defined()) {
    s = fn::where(ok, s, fn::constant_like(s, Shape(), -INFINITY, wt));
  }
  return s;
}

// The dropout keep-mask scaled by 1 / (1 - p) over the scores' elements: dropout_mask's draws
// at the op's counters (offset + ((batch_offset + b) * L + i) * S + j).
Tensor ComposedKeep(const Tensor& s, const Attrs& a, const ComposedParams& p) {
  const double dp = a.Get<double>("dropout_p");
  if (dp >= 1.0) return fn::constant_like(s, Shape(), 0.0, s.dtype());
  Attrs m;
  m.Set("p", dp).Set("seed", a.Get<int64_t>("seed"));
  m.Set("offset", a.Get<int64_t>("offset") + a.Get<int64_t>("batch_offset") * p.L * p.S);
  return CallOp1(OP(dropout_mask), {s}, m);
}

}  // namespace

std::vector<Tensor> ComposedAttention(const std::vector<Tensor>& in, const Attrs& a,
                                      const std::vector<TensorMeta>& out) {
  const ComposedParams p(a, in[0], in[1]);
  const DType wt = WorkType(in[0]);
  Tensor s = ComposedScores(in[0], in[1], in, 3, p);
  Tensor m = fn::amax(s, {-1}, true);
  const Tensor neg_inf = fn::constant_like(s, Shape(), -INFINITY, wt);
  const Tensor zero = fn::constant_like(s, Shape(), 0.0, wt);
  m = fn::where(fn::eq(m, neg_inf), zero, m);  // a fully masked row: exp(-inf) = 0 below
  Tensor e = fn::exp(fn::sub(s, m));
  Tensor l = fn::sum(e, {-1}, true);
  Tensor w = fn::div(e, l);  // 0 / 0 = NaN for a fully masked row
  if (p.dropout) w = fn::mul(w, ComposedKeep(s, a, p));
  Tensor y = fn::to_dtype(fn::matmul(w, As(in[2], wt)), out[0].dtype);
  Tensor lse = fn::squeeze(fn::add(m, fn::log(l)), -1);
  return {fn::contiguous(y), fn::contiguous(fn::to_dtype(lse, out[1].dtype))};
}

std::vector<Tensor> ComposedAttentionGrad(const std::vector<Tensor>& in, const Attrs& a,
                                          const std::vector<TensorMeta>& out) {
  const ComposedParams p(a, in[1], in[2]);
  const DType wt = WorkType(in[1]);
  const Tensor dy = As(in[0], wt), q = As(in[1], wt), k = As(in[2], wt), v = As(in[3], wt),
               y = As(in[4], wt);
  Tensor s = ComposedScores(q, k, in, 6, p);
  const Tensor lse = fn::unsqueeze(As(in[5], wt), -1);
  const Tensor neg_inf = fn::constant_like(s, Shape(), -INFINITY, wt);
  const Tensor zero = fn::constant_like(s, Shape(), 0.0, wt);
  const Tensor dead = fn::eq(lse, neg_inf);  // fully masked rows: no gradient
  Tensor w = fn::where(dead, zero, fn::exp(fn::sub(s, lse)));
  Tensor dp = fn::matmul(dy, fn::transpose(v, -2, -1));
  Tensor wv = w;
  if (p.dropout) {
    Tensor keep = ComposedKeep(s, a, p);
    dp = fn::mul(dp, keep);
    wv = fn::mul(w, keep);
  }
  Tensor d = fn::sum(fn::mul(dy, y), {-1}, true);
  Tensor ds = fn::mul_scalar(fn::mul(w, fn::sub(dp, d)), p.scale);
  ds = fn::where(dead, zero, ds);
  auto back = [](const Tensor& t, const TensorMeta& m) {
    return fn::contiguous(fn::to_dtype(t, m.dtype));
  };
  return {back(fn::matmul(ds, k), out[0]), back(fn::matmul(fn::transpose(ds, -2, -1), q), out[1]),
          back(fn::matmul(fn::transpose(wv, -2, -1), dy), out[2])};
}

ONEFLOW_REGISTER_OP(scaled_dot_product_attention)
    .Inputs(-1)
    .Infer(InferAttention)
    .Grad(AttentionGrad)
    .NonDiffInputs({3})
    .Kernel(DeviceType::kCPU, AttentionCpu);
ONEFLOW_REGISTER_OP(scaled_dot_product_attention_grad)
    .Inputs(-1)
    .Infer(InferAttentionGrad)
    .Grad(NoDoubleBackward)
    .Kernel(DeviceType::kCPU, AttentionGradCpu);

namespace fn {

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale) {
  ONEFLOW_CHECK(query.ndim() >= 2 && key.ndim() >= 2 && value.ndim() >= 2, kOp,
                ": query, key and value need at least 2 dims, got ", query.shape(), ", ",
                key.shape(), ", ", value.shape());
  ONEFLOW_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0, kOp,
                ": dropout_p has to be between 0 and 1, got ", dropout_p);
  ONEFLOW_CHECK(!(is_causal && attn_mask.defined()), kOp,
                ": pass attn_mask or is_causal, not both");
  ONEFLOW_CHECK(!attn_mask.defined() || !attn_mask.requires_grad(), kOp,
                ": attn_mask requires grad, but its gradient is not computed; pass "
                "attn_mask.detach()");
  // Batch dims broadcast between query, key and value (matmul's rule).
  auto lead = [](const Tensor& t) {
    return Shape(std::vector<int64_t>(t.shape().dims().begin(), t.shape().dims().end() - 2));
  };
  const Shape batch =
      BroadcastShapes(BroadcastShapes(lead(query), lead(key), kOp), lead(value), kOp);
  auto widen = [&](const Tensor& t) {
    std::vector<int64_t> s = batch.dims();
    s.push_back(t.shape()[t.ndim() - 2]);
    s.push_back(t.shape()[t.ndim() - 1]);
    return Shape(s) == t.shape() ? t : expand(t, s);
  };
  Tensor q = widen(query), k = widen(key), v = widen(value);
  const double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.shape()[q.ndim() - 1]));
  Attrs a;
  a.Set("scale", s).Set("is_causal", is_causal).Set("dropout_p", dropout_p);
  a.Set("batch_offset", int64_t{0});
  if (dropout_p > 0.0) {
    // The draws of a [..., L, S] dropout mask: the numbers F.dropout would use at this point.
    const int64_t n = batch.numel() * q.shape()[q.ndim() - 2] * k.shape()[k.ndim() - 2];
    a.Set("seed", static_cast<int64_t>(initial_seed()));
    a.Set("offset", static_cast<int64_t>(generator_advance(static_cast<uint64_t>(n))));
  } else {
    a.Set("seed", int64_t{0}).Set("offset", int64_t{0});
  }
  std::vector<Tensor> in = {q, k, v};
  if (attn_mask.defined()) in.push_back(attn_mask);
  return CallOp(OP(scaled_dot_product_attention), in, a)[0];
}

}  // namespace fn
}  // namespace oneflow
