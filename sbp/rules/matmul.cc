// matmul (batched, with broadcasting batch dims) and linear (x @ w^T + b).
#include "sbp/rules.h"

namespace oneflow {
namespace sbp {
namespace {

using namespace shorthand;  // NOLINT: S(axis), B, P, Wrap (sbp/rules.h)

std::vector<Signature> MatmulRule(const RuleContext& c) {
  const int64_t na = c.in[0].shape.ndim(), nb = c.in[1].shape.ndim(), no = c.out[0].shape.ndim();
  std::vector<Signature> out{AllBroadcast(c)};
  if (na >= 2) out.push_back({{S(na - 2), B}, {S(no - (nb >= 2 ? 2 : 1))}});  // rows of a
  if (nb >= 2) out.push_back({{B, S(nb - 1)}, {S(no - 1)}});                  // columns of b
  out.push_back({{S(na - 1), S(nb >= 2 ? nb - 2 : 0)}, {P}});                 // contraction
  out.push_back({{P, B}, {P}});
  out.push_back({{B, P}, {P}});
  // Batch dims that both operands hold at full size, or that only a holds.
  for (int64_t o = 0; o + 2 < no; ++o) {
    const int64_t ia = o - (no - na), ib = o - (no - nb);
    const bool a_has = ia >= 0 && ia < na - 2 && c.in[0].shape[ia] == c.out[0].shape[o];
    const bool b_has = ib >= 0 && ib < nb - 2 && c.in[1].shape[ib] == c.out[0].shape[o];
    if (a_has && b_has) out.push_back({{S(ia), S(ib)}, {S(o)}});
    if (a_has && !b_has) out.push_back({{S(ia), B}, {S(o)}});
    if (!a_has && b_has) out.push_back({{B, S(ib)}, {S(o)}});
  }
  return out;
}

// linear(x [..., in], w [out, in], b [out]?) -> [..., out]
std::vector<Signature> LinearRule(const RuleContext& c) {
  const bool bias = c.in.size() == 3;
  const int64_t nx = c.in[0].shape.ndim();
  auto sig = [&](Sbp x, Sbp w, Sbp b, Sbp o) {
    Signature s{{x, w}, {o}};
    if (bias) s.in.push_back(b);
    return s;
  };
  std::vector<Signature> out{AllBroadcast(c)};
  for (int64_t a = 0; a + 1 < nx; ++a) out.push_back(sig(S(a), B, B, S(a)));  // data parallel
  out.push_back(sig(B, S(0), S(0), S(nx - 1)));                               // output features
  out.push_back(sig(S(nx - 1), S(1), P, P));                                  // input features
  out.push_back(sig(P, B, P, P));
  return out;
}

// linear_grad_weight_bias(g [m, out], x [m, in]) -> (dw [out, in], db [out])
std::vector<Signature> LinearGradWeightBiasRule(const RuleContext& c) {
  return {AllBroadcast(c),
          {{S(0), S(0)}, {P, P}},     // data parallel: sums over the batch
          {{S(1), B}, {S(0), S(0)}},  // output features
          {{B, S(1)}, {S(1), B}},     // input features
          {{P, B}, {P, P}}};
}

}  // namespace

ONEFLOW_REGISTER_SBP_RULE(matmul, MatmulRule);
ONEFLOW_REGISTER_SBP_RULE(linear_grad_weight_bias, LinearGradWeightBiasRule);
ONEFLOW_REGISTER_SBP_RULE(linear, LinearRule);

}  // namespace sbp
}  // namespace oneflow
