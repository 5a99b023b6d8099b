// SBP rules of the everyday-API kernels (core/ops/index.cc, core/ops/sort.cc,
// core/ops/random.cc): row ops (sort, cumsum, cumprod) split any axis but their dim; tril/triu
// split the batch axes in front of the matrix; flip splits the axes it keeps; scatter splits an
// axis the index covers whole.
#include "sbp/rules.h"

namespace oneflow {
namespace sbp {
namespace {

using namespace shorthand;  // NOLINT: S(axis), B, P, Wrap (sbp/rules.h)

// Every input and output split along the same axis a, for each axis but `dim`; `linear` adds
// P -> P (not for bool, whose partial sum is an OR).
std::vector<Signature> AlongDim(const RuleContext& c, bool linear) {
  const int64_t n = c.in[0].shape.ndim();
  std::vector<Signature> out{AllBroadcast(c)};
  if (n == 0) return out;
  const int64_t dim = Wrap(c.attrs.Get<int64_t>("dim"), n);
  for (int64_t a = 0; a < n; ++a) {
    if (a != dim) out.push_back({{S(a)}, std::vector<Sbp>(c.out.size(), S(a))});
  }
  if (linear && c.in[0].dtype != DType::kBool) out.push_back({{P}, {P}});
  return out;
}

// tril/triu: the batch axes in front of the last two; linear.
std::vector<Signature> TriangleRule(const RuleContext& c) {
  const int64_t n = c.in[0].shape.ndim();
  std::vector<Signature> out{AllBroadcast(c)};
  for (int64_t a = 0; a + 2 < n; ++a) out.push_back({{S(a)}, {S(a)}});
  if (c.in[0].dtype != DType::kBool) out.push_back({{P}, {P}});
  return out;
}

// flip: any axis it does not flip; linear.
std::vector<Signature> FlipRule(const RuleContext& c) {
  const int64_t n = c.in[0].shape.ndim();
  std::vector<bool> flipped(n, false);
  for (int64_t d : c.attrs.Get<std::vector<int64_t>>("dims")) flipped[Wrap(d, n)] = true;
  std::vector<Signature> out{AllBroadcast(c)};
  for (int64_t a = 0; a < n; ++a) {
    if (!flipped[a]) out.push_back({{S(a)}, {S(a)}});
  }
  if (c.in[0].dtype != DType::kBool) out.push_back({{P}, {P}});
  return out;
}

// scatter(x, index, src): an axis other than dim that the index covers whole splits all three
// alike. With x and src partial (index whole), each rank writes its part of src into its part
// of x; the parts sum to the full result for both reduce modes.
std::vector<Signature> ScatterRule(const RuleContext& c) {
  const Shape &x = c.in[0].shape, &index = c.in[1].shape;
  const int64_t n = x.ndim();
  std::vector<Signature> out{AllBroadcast(c)};
  if (n == 0) return out;
  const int64_t dim = Wrap(c.attrs.Get<int64_t>("dim"), n);
  for (int64_t a = 0; a < n; ++a) {
    if (a != dim && index[a] == x[a]) out.push_back({{S(a), S(a), S(a)}, {S(a)}});
  }
  if (c.in[0].dtype != DType::kBool) out.push_back({{P, B, P}, {P}});
  return out;
}

}  // namespace

ONEFLOW_REGISTER_SBP_RULE(sort, [](const RuleContext& c) { return AlongDim(c, false); });
ONEFLOW_REGISTER_SBP_RULE(cumsum, [](const RuleContext& c) { return AlongDim(c, true); });
ONEFLOW_REGISTER_SBP_RULE(cumprod, [](const RuleContext& c) { return AlongDim(c, false); });
ONEFLOW_REGISTER_SBP_RULE(tril, TriangleRule);
ONEFLOW_REGISTER_SBP_RULE(triu, TriangleRule);
ONEFLOW_REGISTER_SBP_RULE(flip, FlipRule);
ONEFLOW_REGISTER_SBP_RULE(scatter, ScatterRule);
// Draw s of row r uses counter r * num_samples + s of the whole tensor: every rank draws all.
ONEFLOW_REGISTER_SBP_RULE(multinomial, BroadcastOnly);

}  // namespace sbp
}  // namespace oneflow
