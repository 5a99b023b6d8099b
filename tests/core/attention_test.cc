// scaled_dot_product_attention composed of other ops (core/ops/nn/attention.h: what the CUDA
// kernel runs for head dims above 128 and float64) against the op's CPU kernels, forward and
// backward: plain, causal with L != S, bool and float masks broadcast over the batch, dropout,
// float64, a fully masked row (NaN out, lse -inf, no gradient from it).
#include "core/ops/nn/attention.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/dispatch.h"
#include "core/op_registry.h"
#include "tests/test_util.h"

namespace oneflow {
namespace {

using testing::FromVector;
using testing::ToVector;

Tensor Random(const Shape& s, std::mt19937* gen, DType dt = DType::kFloat32) {
  std::normal_distribution<double> n(0, 1);
  std::vector<double> v(s.numel());
  for (double& x : v) x = n(*gen);
  return FromVector(v, s, dt);
}

Attrs AttentionAttrs(bool causal, double p) {
  Attrs a;
  a.Set("scale", 0.4).Set("is_causal", causal).Set("dropout_p", p);
  a.Set("seed", int64_t{9}).Set("offset", int64_t{3}).Set("batch_offset", int64_t{0});
  return a;
}

// Equal, NaN where the kernel has NaN.
void Same(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  const std::vector<double> g = ToVector(got), w = ToVector(want);
  for (size_t i = 0; i < g.size(); ++i) {
    INFO(what << "[" << i << "]: composed " << g[i] << ", kernel " << w[i]);
    if (std::isnan(w[i]) || std::isinf(w[i])) {
      REQUIRE((std::isnan(g[i]) ? std::isnan(w[i]) : g[i] == w[i]));
    } else {
      REQUIRE(std::abs(g[i] - w[i]) <= tol * (1 + std::abs(w[i])));
    }
  }
}

void Compare(const std::vector<Tensor>& in, const Attrs& a, std::mt19937* gen, double tol) {
  const OpDef& fwd = OpRegistry::Global().Get("scaled_dot_product_attention");
  const OpDef& bwd = OpRegistry::Global().Get("scaled_dot_product_attention_grad");
  std::vector<TensorMeta> metas;
  for (const Tensor& t : in) metas.push_back(t.meta());
  const std::vector<TensorMeta> out = fwd.infer(metas, a);
  const std::vector<Tensor> want = RunLocalKernel(fwd, in, a);
  const std::vector<Tensor> got = ComposedAttention(in, a, out);
  Same(got[0], want[0], tol, "out");
  Same(got[1], want[1], tol, "lse");
  std::vector<Tensor> gin = {
      Random(want[0].shape(), gen, want[0].dtype()), in[0], in[1], in[2], want[0], want[1]};
  if (in.size() > 3) gin.push_back(in[3]);
  std::vector<TensorMeta> gmetas;
  for (const Tensor& t : gin) gmetas.push_back(t.meta());
  const std::vector<Tensor> gwant = RunLocalKernel(bwd, gin, a);
  const std::vector<Tensor> ggot = ComposedAttentionGrad(gin, a, bwd.infer(gmetas, a));
  for (int i = 0; i < 3; ++i) Same(ggot[i], gwant[i], tol, std::string("grad ") + "qkv"[i]);
}

TEST_CASE("attention composed of ops equals the op's CPU kernels", "[attention]") {
  std::mt19937 gen(5);
  const Shape q{2, 3, 5, 4}, k{2, 3, 7, 4}, v{2, 3, 7, 6};
  SECTION("plain") {
    Compare({Random(q, &gen), Random(k, &gen), Random(v, &gen)}, AttentionAttrs(false, 0), &gen,
            1e-5);
  }
  SECTION("causal, L < S and L > S") {
    Compare({Random(q, &gen), Random(k, &gen), Random(v, &gen)}, AttentionAttrs(true, 0), &gen,
            1e-5);
    Compare({Random({2, 9, 4}, &gen), Random({2, 4, 4}, &gen), Random({2, 4, 3}, &gen)},
            AttentionAttrs(true, 0), &gen, 1e-5);
  }
  SECTION("bool mask [L, S] with a fully masked row") {
    std::vector<double> keep(5 * 7, 1);
    for (int j = 0; j < 7; ++j) keep[2 * 7 + j] = 0;
    keep[3 * 7 + 1] = keep[4 * 7 + 6] = 0;
    const Tensor m = FromVector(keep, Shape({5, 7}), DType::kBool);
    Compare({Random(q, &gen), Random(k, &gen), Random(v, &gen), m}, AttentionAttrs(false, 0), &gen,
            1e-5);
  }
  SECTION("float mask [2, 1, L, S]") {
    Compare({Random(q, &gen), Random(k, &gen), Random(v, &gen), Random({2, 1, 5, 7}, &gen)},
            AttentionAttrs(false, 0), &gen, 1e-5);
  }
  SECTION("dropout, and dropout 1") {
    Compare({Random(q, &gen), Random(k, &gen), Random(v, &gen)}, AttentionAttrs(true, 0.3), &gen,
            1e-5);
    Compare({Random(q, &gen), Random(k, &gen), Random(v, &gen)}, AttentionAttrs(false, 1.0), &gen,
            1e-5);
  }
  SECTION("float64") {
    const DType f64 = DType::kFloat64;
    Compare({Random(q, &gen, f64), Random(k, &gen, f64), Random(v, &gen, f64)},
            AttentionAttrs(true, 0.2), &gen, 1e-12);
  }
}

}  // namespace
}  // namespace oneflow
