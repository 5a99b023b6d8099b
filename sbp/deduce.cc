#include "sbp/deduce.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "sbp/boxing_steps.h"

namespace oneflow {
namespace sbp {

std::string Deduction::ToString() const {
  std::string s = "(";
  for (size_t i = 0; i < in.size(); ++i) s += (i ? ", " : "") + sbp::ToString(in[i]);
  s += ") -> (";
  for (size_t i = 0; i < out.size(); ++i) s += (i ? ", " : "") + sbp::ToString(out[i]);
  return s + ")";
}

namespace {

// metas as the shards of `sbps[d]` over hierarchy[d] for every d < sbps.size(); false when a
// split is uneven.
bool ShardMetas(std::vector<TensorMeta>& metas, const std::vector<std::vector<Sbp>>& sbps,
                const std::vector<int64_t>& hierarchy) {
  for (size_t d = 0; d < sbps.size(); ++d) {
    for (size_t i = 0; i < metas.size() && i < sbps[d].size(); ++i) {
      if (!sbps[d][i].is_split()) continue;
      std::vector<int64_t> dims = metas[i].shape.dims();
      const int64_t a = sbps[d][i].axis();
      if (a >= static_cast<int64_t>(dims.size()) || dims[a] % hierarchy[d] != 0) return false;
      dims[a] /= hierarchy[d];
      metas[i].shape = Shape(dims);
    }
  }
  return true;
}

}  // namespace

std::vector<Signature> CandidatesAt(const SbpRule& rule, const RuleContext& logical,
                                    const std::vector<int64_t>& hierarchy,
                                    const std::vector<Signature>& prefix) {
  const size_t h = prefix.size();
  if (h == 0) {
    RuleContext c{logical.in, logical.out, logical.attrs, hierarchy[0]};
    return rule.candidates(c);
  }
  std::vector<TensorMeta> in = logical.in, out = logical.out;
  std::vector<std::vector<Sbp>> in_sbps, out_sbps;
  for (const Signature& s : prefix) in_sbps.push_back(s.in), out_sbps.push_back(s.out);
  if (!ShardMetas(in, in_sbps, hierarchy) || !ShardMetas(out, out_sbps, hierarchy)) {
    return rule.candidates(logical);
  }
  RuleContext c{in, out, logical.attrs, hierarchy[h]};
  return rule.candidates(c);
}

Deduction Deduce(const std::string& op, const SbpRule& rule, const RuleContext& ctx,
                 const Placement& placement, const std::vector<NdSbp>& in_sbps) {
  const int nd = placement.ndim();
  Deduction d;
  d.in.assign(ctx.in.size(), NdSbp(nd, Sbp::Broadcast()));
  d.out.assign(ctx.out.size(), NdSbp(nd, Sbp::Broadcast()));
  std::vector<Signature> chosen;
  for (int h = 0; h < nd; ++h) {
    const std::vector<Signature> cands = CandidatesAt(rule, ctx, placement.hierarchy(), chosen);
    const Signature* best = nullptr;
    double best_cost = std::numeric_limits<double>::infinity();
    int best_changes = 0;
    for (const Signature& s : cands) {
      if (s.in.size() != ctx.in.size() || s.out.size() != ctx.out.size()) {
        throw Error(StrCat(op, ": SBP rule gave signature ", s.ToString(), " for ", ctx.in.size(),
                           " inputs and ", ctx.out.size(), " outputs"));
      }
      bool keeps_inplace = true;
      for (int i : rule.inplace_inputs) {
        if (i < static_cast<int>(s.in.size()) && s.in[i] != in_sbps[i][h]) keeps_inplace = false;
      }
      if (!keeps_inplace) continue;
      double cost = 0;
      int changes = 0;  // inputs boxed at all: among equal costs, the fewest (a dimension of
                        // one rank costs nothing to change, but keeps what the user gave)
      for (size_t i = 0; i < s.in.size(); ++i) {
        const double bytes = static_cast<double>(ctx.in[i].shape.numel()) * SizeOf(ctx.in[i].dtype);
        cost += BoxingCost(in_sbps[i][h], s.in[i], bytes, placement.hierarchy()[h]);
        changes += in_sbps[i][h] != s.in[i];
      }
      if (cost < best_cost || (cost == best_cost && changes < best_changes)) {
        best = &s, best_cost = cost, best_changes = changes;
      }
    }
    if (!best) {
      std::string have;
      for (size_t i = 0; i < in_sbps.size(); ++i) have += (i ? ", " : "") + ToString(in_sbps[i]);
      throw Error(StrCat(op,
                         ": no SBP signature keeps the tensors it updates in place as they are (",
                         have, "); give them one Sbp"));
    }
    chosen.push_back(*best);
    for (size_t i = 0; i < ctx.in.size(); ++i) d.in[i][h] = best->in[i];
    for (size_t i = 0; i < ctx.out.size(); ++i) d.out[i][h] = best->out[i];
    d.cost += best_cost;
  }
  return d;
}

}  // namespace sbp
}  // namespace oneflow
