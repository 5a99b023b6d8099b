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
// also splits ((S(0), S(1)) -> (S(1), S(0))), and between placements: one route step, point to
// point, in which each destination rank gets from the source pieces only their overlap with the
// region it needs (Route below); with an N-D placement on either side, the source's partial
// dimensions are reduced first and the destination's made locally afterwards. No plan gathers
// the whole tensor on a rank whose result is a shard; execute.cc moves large pieces in rounds.
#pragma once

#include <string>
#include <vector>

#include "core/dtype.h"
#include "sbp/boxing_steps.h"
#include "sbp/sbp.h"

namespace oneflow {
namespace boxing {

using sbp::NdSbp;
using sbp::Placement;
using sbp::Sbp;

struct Step {
  using Kind = sbp::BoxingKind;  // the step kinds: sbp/boxing_steps.h
  Kind kind;
  int dim = 0;  // hierarchy dimension (placement of the step)
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

// Between two 1-D placements (same device type), OneFlow's naive eager boxing: each destination
// rank's local tensor is the sum of the regions sent to it, zeros elsewhere.
//   to S or B: from S, every source piece's overlap with the region the destination needs; from
//     B, that region from the destination itself when it is a source, else from source
//     (destination index % sources); from P, that region from every source (summed).
//   to P: from S or P, each source's piece goes to itself when it is a destination, else to
//     destination (source index % destinations); from B, the whole once, to the first source
//     that is a destination, else from the first source to the first destination.
// A transfer with src == dst is a local copy. Regions: [begin, end) per axis of the logical.
struct Transfer {
  int src = 0, dst = 0;
  std::vector<std::pair<int64_t, int64_t>> region;
  int64_t numel() const;
};
// Per logical axis, the [begin, end) `rank` holds under nd on pl; a partial piece is the whole.
std::vector<std::pair<int64_t, int64_t>> RankRegion(const Placement& pl, NdSbp nd,
                                                    const Shape& logical, int rank);
std::vector<Transfer> Route(const Placement& src, const Sbp& from, const Placement& dst,
                            const Sbp& to, const Shape& logical);
// The same between placements of any number of dimensions, neither layout partial: each
// destination rank gets, from one holder of each distinct source piece (itself when it holds
// it, else holder (destination index % holders)), the piece's overlap with what it needs.
std::vector<Transfer> Route(const Placement& src, const NdSbp& from, const Placement& dst,
                            const NdSbp& to, const Shape& logical);

}  // namespace boxing
}  // namespace oneflow
