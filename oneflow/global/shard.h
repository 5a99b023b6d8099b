// The global layer's own helpers, shared by its files (global_tensor.cc: layout changes;
// hooks.cc: what core calls; grad_buckets.cc: data-parallel gradient buckets). Not its API
// (global_tensor.h is).
#pragma once

#include "oneflow/global/global_tensor.h"

namespace oneflow {
namespace global {

// nd with every P read as B (a gradient's or a constant's layout).
NdSbp WithoutPartial(NdSbp nd);
// True when rank's coordinate is 0 on every dimension holding P (it keeps the value).
bool KeepsPartial(const Placement& pl, const NdSbp& nd, int rank);
// Where this rank's shard of a placement lives: its GPU (the current CUDA device, the local
// rank's under the launcher) for cuda placements, else the CPU.
Device ShardDevice(const Placement& pl);
// This rank's (uninitialised) shard of a tensor of that layout.
Tensor EmptyShard(const Shape& logical, const Placement& pl, const NdSbp& nd, DType dtype);
// A global meta tensor (its shard a meta tensor: shapes, dtypes and SBPs, no data, on any
// placement); MetaGlobal makes one, this rank's shard shape of the logical one.
bool IsMetaGlobal(const Tensor& t);
Tensor MetaGlobal(const Shape& logical, DType dtype, const Placement& pl, const NdSbp& nd);
// A layout change without autograd (ToGlobal records its gradient around it).
Tensor ChangeLayout(const Tensor& global, const Placement& placement, const NdSbp& nd_sbp);
// GlobalHooks.leaf_grad: boxes a gradient to its leaf's layout, or leaves a data-parallel one
// partial for the bucketed all-reduce at the end of the pass (grad_buckets.cc).
Tensor LeafGrad(const Tensor& leaf, const Tensor& grad, bool accumulating);

}  // namespace global
}  // namespace oneflow
