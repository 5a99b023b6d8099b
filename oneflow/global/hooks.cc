// What the global layer installs in core (GlobalHooks, core/dispatch.h): the interpreter over
// this process's rank, and the hooks core's autograd and in-place ops call for global tensors.
#include <mutex>

#include "boxing/execute.h"
#include "core/dispatch.h"
#include "core/functional.h"
#include "core/shard_window.h"
#include "core/trace.h"
#include "oneflow/global/interpret.h"
#include "oneflow/global/shard.h"

namespace oneflow {
namespace global {
namespace {

// This process's rank of the world: boxing runs the cached plans on runtime/ communicators.
class ProcessWorld : public World {
 public:
  const Layout& LayoutOf(const Tensor& t) const override { return Meta(t); }
  Tensor Lift(const Tensor& scalar, const Placement& pl) override {
    return MakeGlobal(fn::to_device(scalar, ShardDevice(pl)), Shape(), pl,
                      NdSbp(pl.ndim(), Sbp::Broadcast()));
  }
  std::pair<int, int> RankRange(const Placement& pl) override {
    const int index = pl.IndexOf(MyRank());
    return index < 0 ? std::make_pair(0, 0) : std::make_pair(index, index + 1);
  }
  Tensor Boxed(const Tensor& t, const NdSbp&, const boxing::Plan* plan, int rank) override {
    const GlobalMeta& m = Meta(t);
    return plan ? boxing::ExecuteBoxing(*plan, m.local, t.shape(), rank) : m.local;
  }
  Tensor Make(const std::vector<std::vector<Tensor>>& rank_outs, size_t k,
              const TensorMeta& logical, const Placement& pl, const NdSbp& nd_sbp) override {
    Tensor local =
        rank_outs.empty() ? EmptyShard(logical.shape, pl, nd_sbp, logical.dtype) : rank_outs[0][k];
    return MakeGlobal(local, logical.shape, pl, nd_sbp);
  }
};

// Global meta tensors: deduction and shape inference only. No shard is computed and nothing
// is boxed; each output is a global meta tensor with the deduced NdSbp (what a planner reads).
class MetaWorld : public ProcessWorld {
 public:
  Tensor Lift(const Tensor& scalar, const Placement& pl) override {
    return MetaGlobal(Shape(), scalar.dtype(), pl, NdSbp(pl.ndim(), Sbp::Broadcast()));
  }
  std::pair<int, int> RankRange(const Placement&) override { return {0, 0}; }
  Tensor Make(const std::vector<std::vector<Tensor>>&, size_t, const TensorMeta& logical,
              const Placement& pl, const NdSbp& nd_sbp) override {
    return MetaGlobal(logical.shape, logical.dtype, pl, nd_sbp);
  }
};

std::vector<Tensor> InterpretHere(const OpDef& op, const std::vector<Tensor>& inputs,
                                  const Attrs& attrs) {
  static ProcessWorld world;
  static MetaWorld meta_world;
  ShardWindowPause pause;  // a global op builds its outputs, not a creation's shard
  for (const Tensor& t : inputs) {
    if (t.defined() && IsMetaGlobal(t)) return Interpret(meta_world, op, inputs, attrs);
  }
  return Interpret(world, op, inputs, attrs);
}

Tensor GlobalFullLike(const Tensor& like, double value) {
  if (CurrentTracer()) {  // autograd's seeds and zero gradients in a traced backward
    return TracedStep("full_like", {like}, [value](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{GlobalFullLike(in[0], value)};
    })[0];
  }
  const GlobalMeta& m = Meta(like);
  NdSbp nd = WithoutPartial(m.nd_sbp);
  if (IsMetaGlobal(like)) return MetaGlobal(like.shape(), like.dtype(), m.placement, nd);
  Tensor local = fn::full(sbp::LocalShape(like.shape(), m.placement, nd, MyRank()), value,
                          like.dtype(), ShardDevice(m.placement));
  return MakeGlobal(local, like.shape(), m.placement, nd);
}

void GlobalCopy(const Tensor& dst, const Tensor& src) {
  if (!dst.is_global()) {
    throw Error("copy_: cannot copy a global tensor into a local one; call to_local() first");
  }
  const GlobalMeta& m = Meta(dst);
  Tensor s = src.is_global() ? ChangeLayout(src, m.placement, m.nd_sbp)
                             : FromWhole(fn::contiguous_copy(fn::expand(src, dst.shape().dims())),
                                         m.placement, m.nd_sbp);
  if (m.placement.Contains(MyRank())) fn::copy_(m.local, Meta(s).local);
}

Tensor GlobalOnPlacementOf(const Tensor& like, const Tensor& local) {
  const Placement& pl = Meta(like).placement;
  return FromWhole(local, pl, NdSbp(pl.ndim(), Sbp::Broadcast()));
}

void GlobalFill(const Tensor& dst, double value) {
  const GlobalMeta& m = Meta(dst);
  if (!m.placement.Contains(MyRank())) return;
  fn::fill_(m.local, KeepsPartial(m.placement, m.nd_sbp, MyRank()) ? value : 0.0);
}

}  // namespace

void Install() {
  static std::once_flag once;
  std::call_once(once, [] {
    GlobalHooks hooks;
    hooks.interpret = &InterpretHere;
    hooks.leaf_grad = &LeafGrad;
    hooks.full_like = &GlobalFullLike;
    hooks.copy = &GlobalCopy;
    hooks.fill = &GlobalFill;
    hooks.on_placement_of = &GlobalOnPlacementOf;
    hooks.whole = &Whole;
    SetGlobalHooks(hooks);
  });
}

}  // namespace global
}  // namespace oneflow
