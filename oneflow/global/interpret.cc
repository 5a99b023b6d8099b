#include "oneflow/global/interpret.h"

#include <mutex>
#include <string>
#include <unordered_map>

#include "core/dispatch.h"
#include "core/error.h"

namespace oneflow {
namespace global {

using sbp::NdSbp;
using sbp::Placement;
using sbp::Sbp;

namespace {

// The decision cache's key: raw bytes of everything deduction depends on (op, attrs, and per
// input the logical shape, dtype, nd_sbp and placement). Built on every global op call, so no
// text formatting.
template <typename T>
void PutBytes(std::string& k, const T& v) {
  k.append(reinterpret_cast<const char*>(&v), sizeof(T));
}
void PutValue(std::string& k, const std::vector<int64_t>& v) {
  PutBytes(k, v.size());
  k.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int64_t));
}
void PutValue(std::string& k, const std::string& v) {
  PutBytes(k, v.size());
  k += v;
}
template <typename T>
void PutValue(std::string& k, const T& v) {
  PutBytes(k, v);
}

std::string DecisionKey(const OpDef& op, const Attrs& attrs, const std::vector<Tensor>& ins,
                        const World& world) {
  std::string k;
  k.reserve(128);
  PutBytes(k, &op);
  for (const auto& [name, value] : attrs.items()) {
    k += name;
    PutBytes(k, static_cast<uint8_t>(value.index()));
    std::visit([&k](const auto& v) { PutValue(k, v); }, value);
  }
  for (const Tensor& t : ins) {
    const Layout& layout = world.LayoutOf(t);
    const Placement& pl = layout.placement;
    PutValue(k, t.shape().dims());
    PutBytes(k, static_cast<uint8_t>(t.dtype()));
    for (const Sbp& s : layout.nd_sbp) {
      PutBytes(k, static_cast<uint8_t>(s.kind()));
      PutBytes(k, static_cast<int32_t>(s.axis()));
    }
    PutBytes(k, static_cast<uint8_t>(pl.device()));
    PutBytes(k, pl.ranks().size());
    k.append(reinterpret_cast<const char*>(pl.ranks().data()), pl.ranks().size() * sizeof(int));
    PutValue(k, pl.hierarchy());
  }
  return k;
}

std::vector<NdSbp> NdSbps(const std::vector<Tensor>& ins, const World& world) {
  std::vector<NdSbp> out;
  out.reserve(ins.size());
  for (const Tensor& t : ins) out.push_back(world.LayoutOf(t).nd_sbp);
  return out;
}

const Decision& DecideCached(const OpDef& op, const Attrs& attrs, const std::vector<Tensor>& ins,
                             const std::vector<TensorMeta>& in_metas,
                             const std::vector<TensorMeta>& out_metas, const Placement& pl,
                             const World& world) {
  static std::mutex mu;
  static std::unordered_map<std::string, Decision> cache;
  const std::string key = DecisionKey(op, attrs, ins, world);
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const sbp::SbpRule* rule = sbp::FindSbpRule(op.name);
  if (!rule) throw Error(StrCat(op.name, ": has no SBP rule, so it cannot run on global tensors"));
  Decision d;
  d.rule = rule;
  const std::vector<NdSbp> in_sbps = NdSbps(ins, world);
  sbp::RuleContext ctx{in_metas, out_metas, attrs};
  d.deduction = sbp::Deduce(op.name, *rule, ctx, pl, in_sbps);
  for (size_t i = 0; i < ins.size(); ++i) {
    if (in_sbps[i] == d.deduction.in[i]) {
      d.plans.emplace_back();
    } else {
      d.plans.emplace_back(std::make_unique<const boxing::Plan>(boxing::PlanBoxing(
          pl, in_sbps[i], pl, d.deduction.in[i], ins[i].shape(), ins[i].dtype())));
    }
  }
  return cache.emplace(key, std::move(d)).first->second;
}

thread_local const Decision* t_last_decision = nullptr;

}  // namespace

const Decision* LastDecision() { return t_last_decision; }

std::vector<Tensor> RunShard(const OpDef& op, const sbp::SbpRule& rule, const sbp::ShardCall& call,
                             const std::vector<Tensor>& locals) {
  if (rule.lower) return rule.lower(op, call, locals);
  Attrs local;
  return RunLocalKernel(op, locals, sbp::LocalAttrs(rule, call, &local) ? local : call.attrs);
}

std::vector<Tensor> Interpret(World& world, const OpDef& op, const std::vector<Tensor>& inputs,
                              const Attrs& attrs) {
  // One placement for every global input; 0-dim local tensors (Python scalars) join as B.
  const Placement* pl = nullptr;
  int pl_input = -1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].is_global()) continue;
    const Placement& p = world.LayoutOf(inputs[i]).placement;
    if (!pl) {
      pl = &p, pl_input = static_cast<int>(i);
    } else if (p != *pl) {
      throw Error(StrCat(op.name, ": input ", pl_input, " is on placement ", pl->ToString(),
                         " but input ", i, " is on ", p.ToString(),
                         "; move one with to_global(placement=...)"));
    }
  }
  std::vector<Tensor> ins = inputs;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (ins[i].is_global()) continue;
    if (ins[i].ndim() != 0) {
      throw Error(StrCat(op.name, ": input ", i, " is a local tensor of shape ", ins[i].shape(),
                         " while input ", pl_input,
                         " is global; make it global with to_global(placement, sbp) first"));
    }
    ins[i] = world.Lift(ins[i], *pl);
  }
  std::vector<TensorMeta> in_metas;
  in_metas.reserve(ins.size());
  for (const Tensor& t : ins) in_metas.push_back(t.meta());
  std::vector<TensorMeta> out_metas = op.infer(in_metas, attrs);

  const Decision& dec = DecideCached(op, attrs, ins, in_metas, out_metas, *pl, world);
  if (dec.rule->rewrite) {
    std::vector<Tensor> outs;
    const std::vector<NdSbp> in_sbps = NdSbps(ins, world);
    if (dec.rule->rewrite(sbp::GlobalCall{op, ins, in_sbps, attrs}, &outs)) {
      t_last_decision = &dec;  // after the calls the rewrite made
      return outs;
    }
  }
  t_last_decision = &dec;
  const sbp::Deduction& d = dec.deduction;
  const auto [first, last] = world.RankRange(*pl);
  std::vector<std::vector<Tensor>> rank_outs;
  rank_outs.reserve(last - first);
  std::vector<Tensor> locals(ins.size());
  for (int index = first; index < last; ++index) {
    const int rank = pl->ranks()[index];
    for (size_t i = 0; i < ins.size(); ++i) {
      locals[i] = world.Boxed(ins[i], d.in[i], dec.plans[i].get(), rank);
    }
    const sbp::ShardCall call{in_metas, out_metas, attrs, *pl, d.in, d.out, rank};
    rank_outs.push_back(RunShard(op, *dec.rule, call, locals));
  }
  std::vector<Tensor> outs;
  outs.reserve(out_metas.size());
  for (size_t k = 0; k < out_metas.size(); ++k) {
    outs.push_back(world.Make(rank_outs, k, out_metas[k], *pl, d.out[k]));
  }
  return outs;
}

}  // namespace global
}  // namespace oneflow
