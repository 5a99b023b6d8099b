// The global op interpreter, over a World: where global tensors live and how they are boxed.
// global_tensor.cc runs it for this process's rank; tests/sbp/rules_validation_test.cc runs it
// for every rank of a simulated placement, so the validation checks the code global ops run.
//
//   std::vector<Tensor> outs = global::Interpret(world, op, inputs, attrs);
//   // or, one rank's part under a given signature:
//   std::vector<Tensor> mine = global::RunShard(op, rule, call, locals);
//
// The interpreter names no op: what an op needs beyond "box the inputs, run the local kernel on
// the shards" is in its SBP rule (sbp/rules.h: local_attrs, lower, rewrite).
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "boxing/plan.h"
#include "core/op_registry.h"
#include "oneflow/global/layout.h"
#include "sbp/deduce.h"
#include "sbp/rules.h"

namespace oneflow {
namespace global {

// An op call's signature and what it takes to get there, cached by (op, attrs, input shapes,
// dtypes, placements, nd_sbps): the deduction, and per input the boxing plan (null when the
// input already has its Sbp).
struct Decision {
  const sbp::SbpRule* rule = nullptr;
  sbp::Deduction deduction;
  std::vector<std::unique_ptr<const boxing::Plan>> plans;
};

class World {
 public:
  virtual ~World() = default;
  virtual const Layout& LayoutOf(const Tensor& global) const = 0;
  // A 0-dim local tensor (a Python scalar) as a broadcast global tensor on pl.
  virtual Tensor Lift(const Tensor& scalar, const sbp::Placement& pl) = 0;
  // The ranks of pl whose shards this world computes: pl.ranks()[first, last) (empty: only the
  // outputs' metadata).
  virtual std::pair<int, int> RankRange(const sbp::Placement& pl) = 0;
  // Input `global`'s local on `rank`, laid out as `to` (plan: how, null when it already is).
  virtual Tensor Boxed(const Tensor& global, const sbp::NdSbp& to, const boxing::Plan* plan,
                       int rank) = 0;
  // Output k as a global tensor: rank_outs[i][k] is its shard on the i-th rank of RankRange.
  virtual Tensor Make(const std::vector<std::vector<Tensor>>& rank_outs, size_t k,
                      const TensorMeta& logical, const sbp::Placement& pl,
                      const sbp::NdSbp& nd_sbp) = 0;
};

// One rank's part of a call under a signature: its local outputs from its local inputs (the
// rule's lower hook, else the local kernel with the rule's local attrs).
std::vector<Tensor> RunShard(const OpDef& op, const sbp::SbpRule& rule, const sbp::ShardCall& call,
                             const std::vector<Tensor>& locals);

// A whole global op call: one placement for every global input (0-dim local inputs join as B),
// the rule's rewrite if it has one for the call, else deduction, boxing and RunShard per rank.
std::vector<Tensor> Interpret(World& world, const OpDef& op, const std::vector<Tensor>& inputs,
                              const Attrs& attrs);

// The decision of this thread's last Interpret call that deduced a signature (null before any):
// what nn.Graph prints for a global op of its plan.
const Decision* LastDecision();

}  // namespace global
}  // namespace oneflow
