// Data-parallel gradient buckets for global tensors: GlobalHooks.leaf_grad.
#include <algorithm>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/autograd.h"
#include "core/functional.h"
#include "core/trace.h"
#include "oneflow/global/shard.h"

namespace oneflow {
namespace global {
namespace {

// Data parallelism's gradient all-reduces, bucketed: during backward a partial gradient of a
// broadcast leaf is left partial in .grad and the leaf noted; when the pass ends, one
// all-reduce per (placement, layout, dtype) turns them all broadcast (DDP's buckets, without a
// wrapper). The leaves of nested passes (activation checkpointing) join the outermost list.
struct PendingGrads {
  std::vector<std::weak_ptr<TensorImpl>> leaves;
};
thread_local PendingGrads* t_pending_grads = nullptr;

// SetGradLayout's choices: leaf -> the layout its gradient takes.
thread_local std::unordered_map<const TensorImpl*, NdSbp>* t_grad_layouts = nullptr;

bool Bucketable(const Tensor& leaf, const GlobalMeta& l, const Tensor& grad, const GlobalMeta& g) {
  // A traced backward (nn.Graph) boxes each gradient as its own step: the end-of-pass callback
  // would rewrite .grad outside the trace.
  if (CurrentTracer()) return false;
  // Under create_graph the boxed gradient must keep its history: box it now, differentiably.
  if (GradModeEnabled() || grad.requires_grad() || !IsFloating(grad.dtype())) return false;
  if (!(l.placement == g.placement) || !l.placement.Contains(MyRank()) ||
      !leaf.impl()->autograd->post_accumulate_grad_hooks.empty()) {
    return false;
  }
  bool partial = false;
  for (size_t d = 0; d < l.nd_sbp.size(); ++d) {
    if (!l.nd_sbp[d].is_broadcast() || g.nd_sbp[d].is_split()) return false;
    partial = partial || g.nd_sbp[d].is_partial();
  }
  return partial;
}

void FinishPendingGrads() {
  std::unique_ptr<PendingGrads> pending(t_pending_grads);
  t_pending_grads = nullptr;
  struct Bucket {
    Placement placement;
    NdSbp from, to;
    DType dtype;
    std::vector<std::shared_ptr<TensorImpl>> leaves;
  };
  std::vector<Bucket> buckets;  // in the order the leaves came: the same on every rank
  for (const auto& weak : pending->leaves) {
    std::shared_ptr<TensorImpl> leaf = weak.lock();
    if (!leaf || !leaf->autograd || !leaf->autograd->grad) continue;
    Tensor g(leaf->autograd->grad);
    if (!g.is_global()) continue;
    const GlobalMeta& gm = Meta(g);
    const GlobalMeta& lm = Meta(Tensor(leaf));
    if (gm.placement == lm.placement && gm.nd_sbp == lm.nd_sbp) continue;
    auto same = [&](const Bucket& b) {
      return b.placement == gm.placement && b.from == gm.nd_sbp && b.to == lm.nd_sbp &&
             b.dtype == g.dtype();
    };
    auto it = std::find_if(buckets.begin(), buckets.end(), same);
    if (it == buckets.end()) {
      buckets.push_back({gm.placement, gm.nd_sbp, lm.nd_sbp, g.dtype(), {}});
      it = buckets.end() - 1;
    }
    if (std::find(it->leaves.begin(), it->leaves.end(), leaf) == it->leaves.end()) {
      it->leaves.push_back(leaf);
    }
  }
  for (const Bucket& b : buckets) {
    std::vector<Tensor> flat;
    int64_t total = 0;
    for (const auto& leaf : b.leaves) {
      const Tensor& local = Meta(Tensor(leaf->autograd->grad)).local;
      flat.push_back(fn::reshape(fn::contiguous(local), {local.numel()}));
      total += local.numel();
    }
    Tensor joined = flat.size() == 1 ? flat[0] : fn::cat(flat, 0);
    Tensor reduced =
        ChangeLayout(MakeGlobal(joined, Shape{total}, b.placement, b.from), b.placement, b.to);
    const Tensor& whole = Meta(reduced).local;
    int64_t offset = 0;
    for (const auto& leaf : b.leaves) {
      const int64_t n = leaf->shape.numel();
      Tensor piece = fn::reshape(fn::slice(whole, 0, offset, offset + n), leaf->shape.dims());
      offset += n;
      leaf->autograd->grad = MakeGlobal(piece, leaf->shape, b.placement, b.to).impl_ptr();
    }
  }
}

}  // namespace

void SetGradLayout(const Tensor& leaf, const NdSbp& nd_sbp) {
  ONEFLOW_CHECK(leaf.is_global(), "SetGradLayout: the leaf is not a global tensor");
  sbp::CheckNdSbp(nd_sbp, Meta(leaf).placement, leaf.ndim(), "SetGradLayout");
  if (!t_grad_layouts) t_grad_layouts = new std::unordered_map<const TensorImpl*, NdSbp>();
  (*t_grad_layouts)[leaf.impl()] = nd_sbp;
}

void ClearGradLayouts() {
  delete t_grad_layouts;
  t_grad_layouts = nullptr;
}

Tensor LeafGrad(const Tensor& leaf, const Tensor& grad, bool accumulating) {
  if (!leaf.is_global() || !grad.is_global()) return grad;
  const GlobalMeta& l = Meta(leaf);
  const GlobalMeta& g = Meta(grad);
  if (t_grad_layouts) {
    auto it = t_grad_layouts->find(leaf.impl());
    if (it != t_grad_layouts->end()) {
      if (l.placement == g.placement && it->second == g.nd_sbp) return grad;
      return ToGlobal(grad, l.placement, it->second);
    }
  }
  if (l.placement == g.placement && l.nd_sbp == g.nd_sbp) return grad;
  if (accumulating && Bucketable(leaf, l, grad, g)) {
    if (!t_pending_grads) {
      t_pending_grads = new PendingGrads();
      QueueBackwardCallback(&FinishPendingGrads);
    }
    t_pending_grads->leaves.push_back(leaf.impl_ptr());
    return grad;
  }
  // Differentiable: under create_graph the boxed gradient keeps its history (double backward).
  return ToGlobal(grad, l.placement, l.nd_sbp);
}

}  // namespace global
}  // namespace oneflow
