// Reductions, views and index ops: split axes are mapped through; reducing a split axis by
// sum leaves partial sums, other reductions and index ops need their axis whole.
#include "sbp/rules.h"

namespace oneflow {
namespace sbp {
namespace {

using namespace shorthand;  // NOLINT: S(axis), B, P, Wrap (sbp/rules.h)

// Where input axis a lands after reducing `mask` (-1 when reduced).
int64_t ReducedAxis(int64_t a, const std::vector<bool>& mask, bool keepdim) {
  if (mask[a]) return -1;
  if (keepdim) return a;
  int64_t k = 0;
  for (int64_t i = 0; i < a; ++i) k += mask[i] ? 0 : 1;
  return k;
}

// The axes a reduction over attrs "dims" (empty: all) removes.
std::vector<bool> ReducedDims(const RuleContext& c) {
  const int64_t n = c.in[0].shape.ndim();
  std::vector<bool> mask(n, false);
  const auto& dims = c.attrs.Get<std::vector<int64_t>>("dims");
  if (dims.empty()) mask.assign(n, true);
  for (int64_t d : dims) mask[Wrap(d, n)] = true;
  return mask;
}

std::vector<Signature> SumRule(const RuleContext& c) {
  const std::vector<bool> mask = ReducedDims(c);
  const bool keepdim = c.attrs.Get<bool>("keepdim");
  std::vector<Signature> out{AllBroadcast(c)};
  for (int64_t a = 0; a < static_cast<int64_t>(mask.size()); ++a) {
    int64_t o = ReducedAxis(a, mask, keepdim);
    out.push_back({{S(a)}, {o < 0 ? P : S(o)}});
  }
  // A partial bool is an OR of its parts: summing the parts would count a true twice.
  if (c.in[0].dtype != DType::kBool) out.push_back({{P}, {P}});
  return out;
}

// prod over dims: a split of a kept axis stays split; the reduced axes must be whole (a product
// of parts is not a sum of anything).
std::vector<Signature> ProdRule(const RuleContext& c) {
  const std::vector<bool> mask = ReducedDims(c);
  const bool keepdim = c.attrs.Get<bool>("keepdim");
  std::vector<Signature> out{AllBroadcast(c)};
  for (int64_t a = 0; a < static_cast<int64_t>(mask.size()); ++a) {
    int64_t o = ReducedAxis(a, mask, keepdim);
    if (o >= 0) out.push_back({{S(a)}, {S(o)}});
  }
  return out;
}

// max_dim/min_dim(x, dim, keepdim) -> (values, indices): split any other axis.
std::vector<Signature> ArgReduceRule(const RuleContext& c) {
  const int64_t n = c.in[0].shape.ndim();
  if (n == 0) return {AllBroadcast(c)};
  std::vector<bool> mask(n, false);
  mask[Wrap(c.attrs.Get<int64_t>("dim"), n)] = true;
  const bool keepdim = c.attrs.Get<bool>("keepdim");
  std::vector<Signature> out{AllBroadcast(c)};
  for (int64_t a = 0; a < n; ++a) {
    int64_t o = ReducedAxis(a, mask, keepdim);
    if (o >= 0) out.push_back({{S(a)}, std::vector<Sbp>(c.out.size(), S(o))});
  }
  return out;
}

// reshape keeps a split of input axis a as a split of output axis b when the elements before
// them agree and the pieces are the same runs of memory: the axis survives whole (any split,
// even or not), or both divide evenly into the c.parts pieces ((8, 4) -> (2, 4, 4): rows split
// in two are the first output axis split in two).
std::vector<Signature> ReshapeRule(const RuleContext& c) {
  const Shape& in = c.in[0].shape;
  const Shape& o = c.out[0].shape;
  std::vector<Signature> out{AllBroadcast(c)};
  for (int64_t a = 0; a < in.ndim(); ++a) {
    int64_t before = 1;
    for (int64_t i = 0; i < a; ++i) before *= in[i];
    int64_t ob = 1;
    for (int64_t b = 0; b < o.ndim() && ob <= before; ob *= o[b], ++b) {
      if (ob != before) continue;
      const bool whole = o[b] == in[a];
      const bool even = c.parts > 1 && in[a] % c.parts == 0 && o[b] % c.parts == 0;
      if (whole || even) {
        out.push_back({{S(a)}, {S(b)}});
        break;
      }
    }
  }
  out.push_back({{P}, {P}});
  return out;
}

std::vector<Signature> PermuteRule(const RuleContext& c) {
  const auto& dims = c.attrs.Get<std::vector<int64_t>>("dims");
  const int64_t n = c.in[0].shape.ndim();
  std::vector<Signature> out{AllBroadcast(c)};
  for (int64_t o = 0; o < static_cast<int64_t>(dims.size()); ++o) {
    out.push_back({{S(Wrap(dims[o], n))}, {S(o)}});
  }
  out.push_back({{P}, {P}});
  return out;
}

// Ops that need axis `dim` whole and keep every other axis: slice, slice_grad, cat, gather.
std::vector<Signature> KeepOtherAxes(const RuleContext& c, bool linear) {
  const int64_t n = c.out[0].shape.ndim();
  const int64_t dim = Wrap(c.attrs.Get<int64_t>("dim"), n);
  std::vector<Signature> out{AllBroadcast(c)};
  for (int64_t a = 0; a < n; ++a) {
    if (a == dim) continue;
    out.push_back({std::vector<Sbp>(c.in.size(), S(a)), std::vector<Sbp>(c.out.size(), S(a))});
  }
  if (linear) {
    out.push_back({std::vector<Sbp>(c.in.size(), P), std::vector<Sbp>(c.out.size(), P)});
  }
  return out;
}

// expand: split an axis the input holds at full size; P stays P.
std::vector<Signature> ExpandRule(const RuleContext& c) {
  const Shape& in = c.in[0].shape;
  const Shape& o = c.out[0].shape;
  const int64_t lead = o.ndim() - in.ndim();
  std::vector<Signature> out{AllBroadcast(c)};
  for (int64_t a = 0; a < in.ndim(); ++a) {
    if (in[a] == o[a + lead]) out.push_back({{S(a)}, {S(a + lead)}});
  }
  out.push_back({{P}, {P}});
  return out;
}

// index_select(x, index) along dim: split another axis of x, or split the index (dim of out).
// A 0-dim index (one row) or a 0-dim x has no axis to split.
std::vector<Signature> IndexSelectRule(const RuleContext& c) {
  const int64_t n = c.in[0].shape.ndim();
  std::vector<Signature> out{AllBroadcast(c)};
  if (n > 0) {
    const int64_t dim = Wrap(c.attrs.Get<int64_t>("dim"), n);
    for (int64_t a = 0; a < n; ++a) {
      if (a != dim) out.push_back({{S(a), B}, {S(a)}});
    }
    if (c.in[1].shape.ndim() == 1) out.push_back({{B, S(0)}, {S(dim)}});
  }
  out.push_back({{P, B}, {P}});
  return out;
}

// index_select_grad(g, index) into zeros of the input's shape along dim: split another axis, or
// split the rows of g with the index (partial sums).
std::vector<Signature> IndexSelectGradRule(const RuleContext& c) {
  const int64_t n = c.out[0].shape.ndim();
  const int64_t dim = Wrap(c.attrs.Get<int64_t>("dim"), n);
  std::vector<Signature> out{AllBroadcast(c)};
  for (int64_t a = 0; a < n; ++a) {
    if (a != dim) out.push_back({{S(a), B}, {S(a)}});
  }
  if (c.in[1].shape.ndim() == 1) out.push_back({{S(dim), S(0)}, {P}});
  out.push_back({{P, B}, {P}});
  return out;
}

// scatter_add(index, src) into zeros of the output's shape along dim.
std::vector<Signature> ScatterAddRule(const RuleContext& c) {
  const int64_t n = c.out[0].shape.ndim();
  const int64_t dim = Wrap(c.attrs.Get<int64_t>("dim"), n);
  std::vector<Signature> out{AllBroadcast(c)};
  for (int64_t a = 0; a < n; ++a) {
    if (a != dim && c.in[1].shape[a] == c.out[0].shape[a]) out.push_back({{S(a), S(a)}, {S(a)}});
  }
  out.push_back({{B, P}, {P}});
  return out;
}

}  // namespace

ONEFLOW_REGISTER_SBP_RULE(sum, SumRule);
ONEFLOW_REGISTER_SBP_RULE(prod, ProdRule);
ONEFLOW_REGISTER_SBP_RULE(max_dim, ArgReduceRule);
ONEFLOW_REGISTER_SBP_RULE(min_dim, ArgReduceRule);
ONEFLOW_REGISTER_SBP_RULE(reshape, ReshapeRule);
ONEFLOW_REGISTER_SBP_RULE(permute, PermuteRule);
ONEFLOW_REGISTER_SBP_RULE(expand, ExpandRule);
ONEFLOW_REGISTER_SBP_RULE(slice, [](const RuleContext& c) { return KeepOtherAxes(c, true); });
ONEFLOW_REGISTER_SBP_RULE(slice_grad, [](const RuleContext& c) { return KeepOtherAxes(c, true); });
ONEFLOW_REGISTER_SBP_RULE(cat, [](const RuleContext& c) { return KeepOtherAxes(c, true); });
ONEFLOW_REGISTER_SBP_RULE(gather, [](const RuleContext& c) { return KeepOtherAxes(c, false); });
ONEFLOW_REGISTER_SBP_RULE(index_select, IndexSelectRule);
ONEFLOW_REGISTER_SBP_RULE(scatter_add, ScatterAddRule);
ONEFLOW_REGISTER_SBP_RULE(index_select_grad, IndexSelectGradRule);

}  // namespace sbp
}  // namespace oneflow
