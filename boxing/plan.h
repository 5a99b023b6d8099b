// The boxing planner: how to turn a tensor laid out as (placement, NdSbp) into
// (placement', NdSbp'). Pure: it returns printable steps with a cost in bytes per rank.
//
//   Plan p = PlanBoxing(P1, {Sbp::PartialSum()}, P1, {Sbp::Broadcast()}, Shape({4, 4}), kFloat32);
//   p.ToString()  // "P->B: all_reduce over cpu:[0, 1]"
//
// 1-D, same placement (DESIGN.md): S(i)->S(j) all-to-all, S->B all-gather, S->P local zero
// pad, B->S local slice, B->P rank 0 keeps, P->S reduce-scatter, P->B all-reduce. n-D: one
// hierarchy dimension at a time, innermost first, each inside the sub-groups of ranks that
// share the other coordinates. When a dimension would change a split that an inner dimension
// also splits, the plan gathers everything to B (innermost first) and slices back (outermost
// first). Another placement: gather to B on the source, send the whole tensor to each
// destination rank that lacks it, slice there.
#pragma once

#include <string>
#include <vector>

#include "core/dtype.h"
#include "sbp/sbp.h"

namespace oneflow {
namespace boxing {

using sbp::NdSbp;
using sbp::Placement;
using sbp::Sbp;

struct Step {
  enum class Kind {
    kAllReduce,      // P -> B
    kAllGather,      // S(i) -> B
    kReduceScatter,  // P -> S(i)
    kAllToAll,       // S(i) -> S(j)
    kSlice,          // B -> S(i), local
    kKeepOnFirst,    // B -> P, local: coordinate 0 keeps, the others hold zeros
    kZeroPad,        // S(i) -> P, local: zeros outside this rank's piece
    kSendWhole,      // B on the source placement -> every destination rank
  };
  Kind kind;
  int dim = 0;        // hierarchy dimension (placement of the step)
  Sbp from = Sbp::Broadcast(), to = Sbp::Broadcast();
  NdSbp before, after;
  bool on_destination = false;  // the step runs on the destination placement
  double cost = 0;              // bytes per rank
  std::string ToString(const Placement& placement) const;
};

struct Plan {
  Placement src, dst;
  NdSbp from, to;
  std::vector<Step> steps;
  double cost = 0;
  std::string ToString() const;  // one line per step; "(nothing to do)" when empty
};

Plan PlanBoxing(const Placement& src, const NdSbp& from, const Placement& dst, const NdSbp& to,
                const Shape& logical, DType dtype);

}  // namespace boxing
}  // namespace oneflow
