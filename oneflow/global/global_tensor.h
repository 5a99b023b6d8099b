// Global tensors: a logical shape, dtype, placement and NdSbp, and this rank's local shard.
//
// A global Tensor is an ordinary core Tensor whose TensorImpl has the logical shape (no data of
// its own) and a GlobalMeta extension holding the placement, the NdSbp and the shard. Core's
// dispatch hands every op call with a global input to the interpreter installed here
// (oneflow/global/interpret.h over this process's rank: deduce the signature, box the inputs,
// run the rule's per-rank part on the shards, wrap the outputs), so every op and autograd work
// on global tensors.
//
//   global::Install();   // once, before the first global op
//   Tensor w = global::LocalToGlobal(fn::randn({4, 4}), placement, {Sbp::Broadcast()});
//   Tensor x = global::LocalToGlobal(my_batch, placement, {Sbp::Split(0)});
//   Tensor y = fn::matmul(x, w);            // S(0) x B -> S(0), no communication
//   Tensor full = global::ToGlobal(y, placement, {Sbp::Broadcast()});   // all-gather
#pragma once

#include <functional>

#include "core/tensor.h"
#include "oneflow/global/layout.h"
#include "sbp/sbp.h"

namespace oneflow {
namespace global {

using sbp::NdSbp;
using sbp::Placement;
using sbp::Sbp;

// placement and nd_sbp: the Layout the interpreter reads.
struct GlobalMeta : TensorExtension, Layout {
  Tensor local;  // this rank's shard; empty (zeros in every dim) outside the placement
};

// Installs the interpreter and hooks in core (idempotent).
void Install();
int MyRank();

const GlobalMeta& Meta(const Tensor& t);  // REQUIRES: t.is_global()
// Wraps a shard as a global tensor without communication (the caller vouches for it).
Tensor MakeGlobal(const Tensor& local, const Shape& logical, const Placement& placement,
                  const NdSbp& nd_sbp);
// From this rank's local data: the global shape is the local one with each split axis summed
// over the shards that split it (gathered from every member, which also checks that ranks
// agree on ndim and dtype and that the shards follow the balanced split). check_meta also
// compares the other dims and names the rank that differs. global_shape, when the caller
// knows it (to_local's backward), replaces the gathering.
Tensor LocalToGlobal(const Tensor& local, const Placement& placement, const NdSbp& nd_sbp,
                     bool check_meta = false, const Shape* global_shape = nullptr);
// Boxing to another placement and/or NdSbp.
Tensor ToGlobal(const Tensor& global, const Placement& placement, const NdSbp& nd_sbp);
// This rank's shard (a view of the tensor's data, not a copy).
Tensor ToLocal(const Tensor& global);
// A global tensor built whole on every rank (same values everywhere, e.g. from the same seed)
// and laid out as nd_sbp: each rank keeps its slice (P: the first rank keeps it).
Tensor FromWhole(const Tensor& whole, const Placement& placement, const NdSbp& nd_sbp);
// A global tensor created by build() (which asks creation ops for the logical tensor) with each
// rank building only its shard: the first creation op under build takes this rank's window of
// it (core/shard_window.h; the random ones draw from each element's logical position, so the
// logical tensor is the same for every layout), ranks outside the placement allocate nothing
// and, under P, the ranks that do not keep the value hold zeros. A build that creates no
// windowed op (flow.tensor(data), eye, randperm) is built whole and sliced (FromWhole).
//   Tensor w = BuildGlobal([] { return fn::randn({8192, 8192}); }, placement, {Sbp::Split(0)});
Tensor BuildGlobal(const std::function<Tensor()>& build, const Placement& placement,
                   const NdSbp& nd_sbp);
// The whole value of t as a local tensor on every rank of the job, also outside t's placement
// (collective: every rank calls it); a local t as it is.
Tensor Whole(const Tensor& t);

// The layout that backward gives leaf's gradient on this thread instead of the leaf's own (same
// placement): nn.Graph's ZeRO stage 2 keeps each rank's shard of a broadcast parameter's
// gradient, so a partial gradient is reduce-scattered, not all-reduced. ClearGradLayouts ends
// every such choice of this thread.
void SetGradLayout(const Tensor& leaf, const NdSbp& nd_sbp);
void ClearGradLayouts();

// "placement=cpu:[0, 1], sbp=(S(0))" for messages.
std::string Describe(const Tensor& t);

}  // namespace global
}  // namespace oneflow
