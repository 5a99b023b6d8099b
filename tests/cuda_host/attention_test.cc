// The fused attention kernels (core/kernels/cuda/kernels/attention.cuh) on the host stand-in,
// against a naive host reference in double: forward (out, lse) and backward (dq, dk, dv) for
// L and S taking each of 1, 3, 31, 64, 65, 127, 130, head dims 16, 64, 100 and 128 (both kernel
// tiles, E != Ev), causal and not, bool and additive masks broadcast over the batch, dropout, rows
// of -inf and NaN, float32 and bfloat16.
#include "core/kernels/cuda/kernels/attention.cuh"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

namespace att = oneflow::cuda::attention;

struct Case {
  int64_t batch, L, S, E, Ev;
  bool causal = false;
  int mask = 0;  // 0 none, 1 bool over [L, S], 2 float over [batch, L, S]
  double dropout = 0;
  bool inf_row = false, nan_row = false;
};

std::string Name(const Case& c) {
  return "batch " + std::to_string(c.batch) + " L " + std::to_string(c.L) + " S " +
         std::to_string(c.S) + " E " + std::to_string(c.E) + " Ev " + std::to_string(c.Ev) +
         (c.causal ? " causal" : "") + (c.mask == 1 ? " bool mask" : "") +
         (c.mask == 2 ? " float mask" : "") + (c.dropout > 0 ? " dropout" : "") +
         (c.inf_row ? " -inf row" : "") + (c.nan_row ? " NaN row" : "");
}

struct Data {
  std::vector<float> q, k, v, dout, fmask;
  std::vector<uint8_t> bmask;  // bool storage
};

Data Make(const Case& c, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  Data d;
  auto fill = [&](std::vector<float>* x, int64_t size) {
    x->resize(size);
    for (float& e : *x) e = n(gen);
  };
  fill(&d.q, c.batch * c.L * c.E);
  fill(&d.k, c.batch * c.S * c.E);
  fill(&d.v, c.batch * c.S * c.Ev);
  fill(&d.dout, c.batch * c.L * c.Ev);
  if (c.mask == 1) {
    d.bmask.resize(c.L * c.S);
    for (int64_t i = 0; i < c.L; ++i) {
      for (int64_t j = 0; j < c.S; ++j) d.bmask[i * c.S + j] = j == 0 || (gen() % 3 != 0);
    }
  }
  if (c.mask == 2 || c.inf_row) {
    fill(&d.fmask, c.batch * c.L * c.S);
    if (c.inf_row) {  // row L / 2 of batch 0 masked whole
      for (int64_t j = 0; j < c.S; ++j) {
        d.fmask[(c.L / 2) * c.S + j] = -std::numeric_limits<float>::infinity();
      }
    }
  }
  if (c.nan_row) d.q[(c.L / 2) * c.E] = std::numeric_limits<float>::quiet_NaN();
  return d;
}

att::Params ParamsOf(const Case& c, const Data& d) {
  att::Params p;
  p.batch = c.batch;
  p.L = c.L;
  p.S = c.S;
  p.E = c.E;
  p.Ev = c.Ev;
  p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.E)));
  p.causal = c.causal;
  if (c.mask == 1) {
    p.mask.kind = 1;
    p.mask.keep = reinterpret_cast<const bool*>(d.bmask.data());
    p.mask.nd = 1;
    p.mask.size[0] = c.batch;
    p.mask.stride[0] = 0;  // broadcast over the batch
    p.mask.row_stride = c.S;
    p.mask.col_stride = 1;
  } else if (!d.fmask.empty()) {
    p.mask.kind = 2;
    p.mask.add = d.fmask.data();
    p.mask.nd = 1;
    p.mask.size[0] = c.batch;
    p.mask.stride[0] = c.L * c.S;
    p.mask.row_stride = c.S;
    p.mask.col_stride = 1;
  }
  if (c.dropout > 0) {
    p.dropout = true;
    p.seed = 1234;
    p.offset = 77;
    p.drop_p = c.dropout;
    p.drop_scale = static_cast<float>(1.0 / (1.0 - c.dropout));
  }
  return p;
}

// The naive reference in double: the definition, written out.
struct Ref {
  std::vector<double> out, lse, dq, dk, dv;
};

Ref Reference(const Case& c, const Data& d, const att::Params& p, const std::vector<float>& q,
              const std::vector<float>& k, const std::vector<float>& v,
              const std::vector<float>& dout) {
  const double inf = std::numeric_limits<double>::infinity();
  Ref r;
  r.out.assign(c.batch * c.L * c.Ev, 0);
  r.lse.assign(c.batch * c.L, 0);
  r.dq.assign(q.size(), 0);
  r.dk.assign(k.size(), 0);
  r.dv.assign(v.size(), 0);
  std::vector<double> s(c.S), pr(c.S), keep(c.S);
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t i = 0; i < c.L; ++i) {
      double mx = -inf;
      for (int64_t j = 0; j < c.S; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < c.E; ++e)
          dot += double(q[(b * c.L + i) * c.E + e]) * k[(b * c.S + j) * c.E + e];
        s[j] = dot * p.scale;
        bool ok = !c.causal || j <= i;
        if (c.mask == 1) ok = ok && d.bmask[i * c.S + j];
        if (!d.fmask.empty()) s[j] += d.fmask[(b * c.L + i) * c.S + j];
        if (!ok) s[j] = -inf;
        if (!std::isnan(s[j])) mx = std::max(mx, s[j]);
      }
      double l = 0;
      for (int64_t j = 0; j < c.S; ++j) {
        pr[j] = mx == -inf || s[j] == -inf ? 0 : std::exp(s[j] - mx);
        l += pr[j];
        keep[j] = p.dropout ? (att::DropoutKeeps(p, b, i, j) ? p.drop_scale : 0) : 1;
      }
      r.lse[b * c.L + i] = mx + std::log(l);
      double di = 0;
      for (int64_t e = 0; e < c.Ev; ++e) {
        double o = 0;
        for (int64_t j = 0; j < c.S; ++j) o += pr[j] * keep[j] * v[(b * c.S + j) * c.Ev + e];
        r.out[(b * c.L + i) * c.Ev + e] = o / l;
        di += (o / l) * dout[(b * c.L + i) * c.Ev + e];
      }
      // A masked element, or any of a fully masked row, has ds = 0 and p' = 0; the products
      // with q_i and dout_i are still summed (a NaN there reaches dk and dv, as on the GPU).
      for (int64_t j = 0; j < c.S; ++j) {
        const bool live = mx != -inf && s[j] != -inf;
        const double pij = live ? pr[j] / l : 0;
        double dp = 0;
        for (int64_t e = 0; e < c.Ev; ++e) {
          dp += double(dout[(b * c.L + i) * c.Ev + e]) * v[(b * c.S + j) * c.Ev + e];
          r.dv[(b * c.S + j) * c.Ev + e] += pij * keep[j] * dout[(b * c.L + i) * c.Ev + e];
        }
        const double ds = live ? pij * (dp * keep[j] - di) * p.scale : 0;
        for (int64_t e = 0; e < c.E; ++e) {
          r.dq[(b * c.L + i) * c.E + e] += ds * k[(b * c.S + j) * c.E + e];
          r.dk[(b * c.S + j) * c.E + e] += ds * q[(b * c.L + i) * c.E + e];
        }
      }
    }
  }
  return r;
}

template <typename T>
std::vector<T> As(const std::vector<float>& x) {
  std::vector<T> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = static_cast<T>(x[i]);
  return y;
}
template <typename T>
std::vector<float> Back(const std::vector<T>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = static_cast<float>(x[i]);
  return y;
}

struct Got {
  std::vector<float> out, lse, dq, dk, dv;
};

template <typename T, int kD>
Got Run(const att::Params& p, const std::vector<T>& q, const std::vector<T>& k,
        const std::vector<T>& v, const std::vector<T>& dout) {
  std::vector<T> out(p.batch * p.L * p.Ev), dq(q.size()), dk(k.size()), dv(v.size());
  std::vector<float> lse(p.batch * p.L), dsum(p.batch * p.L);
  OF_CUDA_LAUNCH((att::AttentionForwardKernel<T, kD>), static_cast<int>(att::ForwardBlocks<kD>(p)),
                 att::ForwardThreads<kD>(), att::ForwardSmemBytes<kD>(), nullptr, p, q.data(),
                 k.data(), v.data(), out.data(), lse.data());
  OF_CUDA_LAUNCH(att::AttentionBackwardDotKernel<T>, static_cast<int>((p.batch * p.L + 3) / 4), 128,
                 0, nullptr, p.batch * p.L, p.Ev, dout.data(), out.data(), dsum.data());
  OF_CUDA_LAUNCH((att::AttentionBackwardQueryKernel<T, kD>),
                 static_cast<int>(att::BackwardQueryBlocks<kD>(p)), att::BackwardThreads<kD>(),
                 att::BackwardSmemBytes<kD>(), nullptr, p, q.data(), k.data(), v.data(),
                 dout.data(), lse.data(), dsum.data(), dq.data());
  OF_CUDA_LAUNCH((att::AttentionBackwardKeyValueKernel<T, kD>),
                 static_cast<int>(att::BackwardKeyBlocks<kD>(p)), att::BackwardThreads<kD>(),
                 att::BackwardSmemBytes<kD>(), nullptr, p, q.data(), k.data(), v.data(),
                 dout.data(), lse.data(), dsum.data(), dk.data(), dv.data());
  return {Back(out), lse, Back(dq), Back(dk), Back(dv)};
}

// Equal within tol relative to the reference's scale (NaN where the reference is NaN, the same
// infinity where it is infinite).
void Expect(const char* what, const std::vector<float>& got, const std::vector<double>& ref,
            double tol, const std::string& name) {
  REQUIRE(got.size() == ref.size());
  double scale = 1;
  for (double r : ref) {
    if (std::isfinite(r)) scale = std::max(scale, std::abs(r));
  }
  for (size_t i = 0; i < ref.size(); ++i) {
    INFO(name << ": " << what << "[" << i << "] = " << got[i] << ", reference " << ref[i]);
    if (std::isnan(ref[i])) {
      REQUIRE(std::isnan(got[i]));
    } else if (std::isinf(ref[i])) {
      REQUIRE(got[i] == ref[i]);
    } else {
      REQUIRE(std::abs(got[i] - ref[i]) <= tol * scale);
    }
  }
}

template <typename T>
void Check(const Case& c, double tol) {
  const Data d = Make(c, static_cast<uint32_t>(c.L * 131 + c.S * 7 + c.E));
  const att::Params p = ParamsOf(c, d);
  // The reference sees the values the kernel sees (rounded to T).
  const std::vector<T> q = As<T>(d.q), k = As<T>(d.k), v = As<T>(d.v), dout = As<T>(d.dout);
  const Ref r = Reference(c, d, p, Back(q), Back(k), Back(v), Back(dout));
  const Got g =
      std::max(c.E, c.Ev) <= 64 ? Run<T, 64>(p, q, k, v, dout) : Run<T, 128>(p, q, k, v, dout);
  const std::string name = Name(c);
  Expect("out", g.out, r.out, tol, name);
  Expect("lse", g.lse, r.lse, 1e-5, name);
  Expect("dq", g.dq, r.dq, tol, name);
  Expect("dk", g.dk, r.dk, tol, name);
  Expect("dv", g.dv, r.dv, tol, name);
}

const int64_t kLengths[][2] = {{1, 1},    {3, 31},    {31, 3},  {64, 64}, {65, 127},
                               {127, 65}, {130, 130}, {1, 130}, {130, 1}};

}  // namespace

TEST_CASE("attention kernels match the host reference, float32", "[attention]") {
  // Every length on both sides, causal on every other pair; head dims of both kernel tiles.
  bool causal = false;
  for (const auto& ls : kLengths) {
    Check<float>({1, ls[0], ls[1], 64, 64, causal}, 2e-5);
    causal = !causal;
  }
  Check<float>({3, 33, 40, 16, 8}, 2e-5);
  Check<float>({1, 65, 40, 100, 128, true}, 2e-5);
  Check<float>({1, 31, 66, 128, 128}, 2e-5);
}

TEST_CASE("attention kernels apply masks and dropout as the reference", "[attention]") {
  Case bool_mask{2, 65, 33, 64, 64};
  bool_mask.mask = 1;
  Check<float>(bool_mask, 2e-5);
  Case float_mask{2, 31, 65, 128, 96};
  float_mask.mask = 2;
  Check<float>(float_mask, 2e-5);
  Case dropout{2, 65, 31, 64, 32, true};
  dropout.dropout = 0.3;
  Check<float>(dropout, 2e-5);
  Case all_dropped{1, 3, 31, 16, 16};
  all_dropped.dropout = 1.0;
  Check<float>(all_dropped, 2e-5);
}

TEST_CASE("attention kernels: a row of -inf is NaN with lse -inf, a NaN stays NaN", "[attention]") {
  Case inf_row{2, 31, 33, 64, 64};
  inf_row.inf_row = true;
  Check<float>(inf_row, 2e-5);
  Case nan_row{1, 31, 33, 64, 64};
  nan_row.nan_row = true;
  Check<float>(nan_row, 2e-5);
}

TEST_CASE("attention kernels in bfloat16 compute in float", "[attention]") {
  Check<__nv_bfloat16>({1, 65, 127, 64, 64, true}, 2e-2);
  Case masked{1, 33, 64, 128, 100};
  masked.mask = 1;
  Check<__nv_bfloat16>(masked, 2e-2);
  Check<__half>({1, 31, 3, 64, 64}, 5e-3);
}
