// SBP rules: for each op of the registry, the 1-D signatures it can run under.
//
// A rule sees the logical metas of the inputs and outputs and the attrs and lists candidate
// signatures (one Sbp per input and per output). Deduction (deduce.h) picks the cheapest. Every
// list should start with the all-broadcast signature when it is valid, so that broadcast
// inputs stay broadcast on ties. Rules live in sbp/rules/, grouped by op family:
//
//   ONEFLOW_REGISTER_SBP_RULE(relu, Pointwise(/*linear=*/false));
//
// A rule also says everything else the global interpreter (oneflow/global/interpret.h) needs
// about its op: the attrs of the local kernel on one rank (by default the shape attributes
// "shape", "input_shape", "weight_shape", which describe output 0, become the rank's shard
// shape), a per-rank lowering for ops whose global form is not "run the local kernel on the
// shards" (dropout_mask: the whole mask, sliced), and a rewrite for ops whose global form is
// other global op calls (nll_loss 'mean': a sum and a global count).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/attrs.h"
#include "core/op_registry.h"
#include "core/tensor.h"
#include "sbp/sbp.h"

namespace oneflow {
namespace sbp {

struct Signature {
  std::vector<Sbp> in;
  std::vector<Sbp> out;
  std::string ToString() const;  // "(S(0), B) -> S(0)"
};

// What a rule sees for one hierarchy dimension: the shapes each rank's piece has there (the
// logical shapes on the first dimension; the shards left by the earlier dimensions' choices on
// the later ones) and how many ranks that dimension splits over (0: unknown).
struct RuleContext {
  const std::vector<TensorMeta>& in;
  const std::vector<TensorMeta>& out;
  const Attrs& attrs;
  int64_t parts = 0;
};

using RuleFn = std::function<std::vector<Signature>(const RuleContext&)>;

// One rank's part of a global op call under a chosen signature (logical metas, the call's
// attrs, the signature's NdSbps).
struct ShardCall {
  const std::vector<TensorMeta>& in;
  const std::vector<TensorMeta>& out;
  const Attrs& attrs;
  const Placement& placement;
  const std::vector<NdSbp>& in_sbps;
  const std::vector<NdSbp>& out_sbps;
  int rank;
};
// Sets *local and returns true when the local kernel on call.rank needs other attrs.
using LocalAttrsFn = std::function<bool(const ShardCall& call, Attrs* local)>;
// The rank's local outputs from its local inputs (boxed to call.in_sbps).
using LowerFn = std::function<std::vector<Tensor>(const OpDef& op, const ShardCall& call,
                                                  const std::vector<Tensor>& locals)>;

// A global op call before deduction: the global inputs and their layouts.
struct GlobalCall {
  const OpDef& op;
  const std::vector<Tensor>& in;
  const std::vector<NdSbp>& in_sbps;
  const Attrs& attrs;
};
// Sets *out from other global op calls and returns true, or returns false to run as usual.
using RewriteFn = std::function<bool(const GlobalCall& call, std::vector<Tensor>* out)>;

struct SbpRule {
  RuleFn candidates;
  // Inputs the op writes in place (optimizer updates): candidates must keep their current Sbp.
  std::vector<int> inplace_inputs;
  std::string at;            // where it was registered ("sbp/rules/pointwise.cc:40")
  LocalAttrsFn local_attrs;  // null: ShapeAttrsAsShard
  LowerFn lower;             // null: the local kernel with local_attrs
  RewriteFn rewrite;         // null: deduce, box, lower
};

// The default local attrs: "shape", "input_shape" and "weight_shape" as output 0's shard shape.
bool ShapeAttrsAsShard(const ShardCall& call, Attrs* local);
// rule.local_attrs, or the default.
bool LocalAttrs(const SbpRule& rule, const ShardCall& call, Attrs* local);

void RegisterSbpRule(const std::string& op, SbpRule rule);
const SbpRule* FindSbpRule(const std::string& op);  // null when the op has none
std::vector<std::string> SbpRuleNames();

// Shorthands for the rule files (`using namespace shorthand;` in their anonymous namespace):
// S(axis), B, P, and Wrap(d, n) for a negative axis d of n.
namespace shorthand {
inline Sbp S(int64_t axis) { return Sbp::Split(static_cast<int>(axis)); }
inline const Sbp B = Sbp::Broadcast();
inline const Sbp P = Sbp::PartialSum();
inline int64_t Wrap(int64_t d, int64_t n) { return d < 0 ? d + n : d; }
}  // namespace shorthand

// Building blocks shared by the rule files.
Signature AllBroadcast(const RuleContext& c);
// Every input and output B: valid for any deterministic op (each rank computes everything).
std::vector<Signature> BroadcastOnly(const RuleContext& c);
// Elementwise with broadcasting: split along any output axis every input has at full size
// (inputs broadcast along it stay B); `partial`: which inputs may be P together (all others
// B) giving a P output, e.g. {{0, 1}} for add, {{0}, {1}} for mul; never for bool tensors.
RuleFn Pointwise(std::vector<std::vector<int>> partial = {});
// Same Sbp for every input and output, for any split axis of input 0 or B (optimizer updates).
RuleFn SameEverywhere();

struct RuleRegistrar {
  RuleRegistrar(const char* at, const char* op, SbpRule rule) {
    rule.at = at;
    RegisterSbpRule(op, std::move(rule));
  }
  RuleRegistrar(const char* at, const char* op, RuleFn fn) {
    SbpRule rule;
    rule.candidates = std::move(fn);
    rule.at = at;
    RegisterSbpRule(op, std::move(rule));
  }
};

#define ONEFLOW_SBP_CONCAT_(a, b) a##b
#define ONEFLOW_SBP_CONCAT(a, b) ONEFLOW_SBP_CONCAT_(a, b)
#define ONEFLOW_SBP_STR_(x) #x
#define ONEFLOW_SBP_STR(x) ONEFLOW_SBP_STR_(x)
#define ONEFLOW_REGISTER_SBP_RULE(op, ...)                                                   \
  static ::oneflow::sbp::RuleRegistrar ONEFLOW_SBP_CONCAT(sbp_rule_registrar_, __COUNTER__)( \
      __FILE__ ":" ONEFLOW_SBP_STR(__LINE__), #op, __VA_ARGS__)

}  // namespace sbp
}  // namespace oneflow
