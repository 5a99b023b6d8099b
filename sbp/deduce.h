// Signature deduction: for an op on global inputs, the NdSbp every input must be boxed to and
// the NdSbp of every output. One 1-D candidate per hierarchy dimension, the one whose boxing of
// the inputs moves the fewest bytes; among equal costs, the one that boxes the fewest inputs, then
// the candidate declared first.
//
//   Deduction d = Deduce("matmul", rule, ctx, placement, {{S(0)}, {B}});   // d.out = {{S(0)}}
#pragma once

#include <string>
#include <vector>

#include "sbp/boxing_steps.h"  // BoxingCost
#include "sbp/rules.h"

namespace oneflow {
namespace sbp {

struct Deduction {
  std::vector<NdSbp> in;
  std::vector<NdSbp> out;
  double cost = 0;
  std::string ToString() const;  // "((S(0)), (B)) -> ((S(0)))"
};

// The rule's candidates for hierarchy dimension prefix.size(), judged on the shards the chosen
// signatures of the earlier dimensions (prefix) leave: (8, 4) split over rows on a first
// dimension of 2 is judged as (4, 4) on the second. An uneven earlier split keeps the logical
// shapes (its ranks' shards differ) and tells the rule no part count.
std::vector<Signature> CandidatesAt(const SbpRule& rule, const RuleContext& logical,
                                    const std::vector<int64_t>& hierarchy,
                                    const std::vector<Signature>& prefix);

Deduction Deduce(const std::string& op, const SbpRule& rule, const RuleContext& ctx,
                 const Placement& placement, const std::vector<NdSbp>& in_sbps);

}  // namespace sbp
}  // namespace oneflow
