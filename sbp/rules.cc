#include "sbp/rules.h"

#include <map>
#include <mutex>

#include "core/error.h"

namespace oneflow {
namespace sbp {
namespace {

std::map<std::string, SbpRule>& Rules() {
  static auto* rules = new std::map<std::string, SbpRule>();
  return *rules;
}

}  // namespace

std::string Signature::ToString() const {
  std::string s = "(";
  for (size_t i = 0; i < in.size(); ++i) s += (i ? ", " : "") + in[i].ToString();
  s += ") -> ";
  if (out.size() == 1) return s + out[0].ToString();
  s += "(";
  for (size_t i = 0; i < out.size(); ++i) s += (i ? ", " : "") + out[i].ToString();
  return s + ")";
}

void RegisterSbpRule(const std::string& op, SbpRule rule) {
  if (!Rules().emplace(op, std::move(rule)).second) {
    throw Error(StrCat("sbp: a rule for '", op, "' is registered twice"));
  }
}

const SbpRule* FindSbpRule(const std::string& op) {
  auto it = Rules().find(op);
  return it == Rules().end() ? nullptr : &it->second;
}

std::vector<std::string> SbpRuleNames() {
  std::vector<std::string> names;
  for (const auto& kv : Rules()) names.push_back(kv.first);
  return names;
}

bool ShapeAttrsAsShard(const ShardCall& call, Attrs* local) {
  bool changed = false;
  for (const char* name : {"shape", "input_shape", "weight_shape"}) {
    if (!call.attrs.Has(name)) continue;
    if (!changed) *local = call.attrs, changed = true;
    local->Set(name,
               LocalShape(call.out[0].shape, call.placement, call.out_sbps[0], call.rank).dims());
  }
  return changed;
}

bool LocalAttrs(const SbpRule& rule, const ShardCall& call, Attrs* local) {
  return rule.local_attrs ? rule.local_attrs(call, local) : ShapeAttrsAsShard(call, local);
}

Signature AllBroadcast(const RuleContext& c) {
  return Signature{std::vector<Sbp>(c.in.size(), Sbp::Broadcast()),
                   std::vector<Sbp>(c.out.size(), Sbp::Broadcast())};
}

std::vector<Signature> BroadcastOnly(const RuleContext& c) { return {AllBroadcast(c)}; }

RuleFn Pointwise(std::vector<std::vector<int>> partial) {
  return [partial](const RuleContext& c) {
    std::vector<Signature> out{AllBroadcast(c)};
    const Shape& o = c.out[0].shape;
    for (int64_t a = 0; a < o.ndim(); ++a) {
      Signature s;
      bool any_split = false;
      for (const TensorMeta& m : c.in) {
        const int64_t lead = o.ndim() - m.shape.ndim();
        const int64_t ia = a - lead;
        if (ia >= 0 && m.shape[ia] == o[a]) {
          s.in.push_back(Sbp::Split(static_cast<int>(ia)));
          any_split = true;
        } else {
          s.in.push_back(Sbp::Broadcast());
        }
      }
      if (!any_split) continue;
      s.out.assign(c.out.size(), Sbp::Split(static_cast<int>(a)));
      out.push_back(std::move(s));
    }
    // A partial sum of bools is their OR, which sub and div do not carry through (and no
    // caller needs bool partial sums): P only for number tensors.
    bool numbers = true;
    for (const TensorMeta& m : c.in) numbers &= m.dtype != DType::kBool;
    for (const TensorMeta& m : c.out) numbers &= m.dtype != DType::kBool;
    for (const auto& group : numbers ? partial : std::vector<std::vector<int>>{}) {
      Signature s;
      s.in.assign(c.in.size(), Sbp::Broadcast());
      for (int i : group) s.in[i] = Sbp::PartialSum();
      s.out.assign(c.out.size(), Sbp::PartialSum());
      out.push_back(std::move(s));
    }
    return out;
  };
}

RuleFn SameEverywhere() {
  return [](const RuleContext& c) {
    std::vector<Signature> out{AllBroadcast(c)};
    for (int64_t a = 0; a < c.in[0].shape.ndim(); ++a) {
      Sbp s = Sbp::Split(static_cast<int>(a));
      out.push_back(Signature{std::vector<Sbp>(c.in.size(), s), std::vector<Sbp>(c.out.size(), s)});
    }
    return out;
  };
}

}  // namespace sbp
}  // namespace oneflow
