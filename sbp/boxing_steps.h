// The atomic boxing steps as one table: the change each makes on one hierarchy dimension and
// what it costs. Deduction prices a signature with it (deduce.cc), the planner builds plans
// from it (boxing/plan.cc), and the executor runs each kind (boxing/execute.cc, an array of run
// functions indexed by kind). A new step kind is one row here and one run function there.
//
//   const BoxingStep& s = StepFor(Sbp::PartialSum(), Sbp::Broadcast());   // all_reduce
//   double bytes_per_rank = s.cost(/*bytes=*/4096, /*n=*/2);                // 4096
#pragma once

#include <cstdint>

#include "sbp/sbp.h"

namespace oneflow {
namespace sbp {

enum class BoxingKind : int8_t {
  kAllReduce,      // P -> B
  kAllGather,      // S(i) -> B
  kReduceScatter,  // P -> S(i)
  kAllToAll,       // S(i) -> S(j)
  kSlice,          // B -> S(i), local
  kKeepOnFirst,    // B -> P, local: coordinate 0 keeps, the others hold zeros
  kZeroPad,        // S(i) -> P, local: zeros outside this rank's piece
  kRoute,          // between placements: point-to-point pieces (boxing::Route)
  kCount,
};

struct BoxingStep {
  BoxingKind kind;
  const char* name;  // in printed plans: "all_reduce"
  // For the steps within one placement: whether this step turns `from` into `to` (from != to)
  // on one hierarchy dimension; null for the steps between placements.
  bool (*turns)(const Sbp& from, const Sbp& to);
  // Bytes each rank moves for a tensor of `bytes` over n ranks (kRoute: priced by its
  // transfers instead).
  double (*cost)(double bytes, int64_t n);
  bool collective;  // runs on a communicator of the dimension's sub-group
};

const BoxingStep& Step(BoxingKind kind);
// The step turning from into to on one hierarchy dimension. REQUIRES: from != to.
const BoxingStep& StepFor(const Sbp& from, const Sbp& to);
// What one rank moves to turn `from` into `to` for a tensor of `bytes` over n ranks.
double BoxingCost(const Sbp& from, const Sbp& to, double bytes, int64_t n);

}  // namespace sbp
}  // namespace oneflow
