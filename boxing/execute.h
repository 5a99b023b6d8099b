// The boxing executor: runs a Plan's steps on this rank with the runtime's communicators.
//
//   Tensor shard = ExecuteBoxing(plan, local, logical_shape, my_rank);
//
// `local` is this rank's shard under (plan.src, plan.from), empty for a rank outside plan.src;
// the result is its shard under (plan.dst, plan.to). Every member of each step's group must
// run the same plan. The input is never modified. With ONEFLOW_DEBUG_BOXING=1 the first rank
// of the source placement prints each step to stderr ("P->B: all_reduce over cpu:[0, 1]").
#pragma once

#include "boxing/plan.h"
#include "core/tensor.h"

namespace oneflow {
namespace boxing {

Tensor ExecuteBoxing(const Plan& plan, const Tensor& local, const Shape& logical, int my_rank);

}  // namespace boxing
}  // namespace oneflow
