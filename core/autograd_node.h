// Autograd's node: the graph op calls record, and what a tensor's history is made of. Nodes
// hold edges to the nodes of their inputs; a leaf's gradient ends in its AccumulateGrad. The
// engine that runs a graph backwards (core/autograd.h) sits above the op calls; this file sits
// below them and calls nothing that records.
//
//   auto node = std::make_shared<MyNode>();            // a Node subclass: Apply, name
//   node->next_edges.push_back(GradientEdge(x));       // x's history (or its accumulator)
//   y.impl()->mutable_autograd().grad_fn = node;       // y's history is node
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace oneflow {

struct Edge {
  std::shared_ptr<Node> fn;  // null when the input needs no gradient
  int input_nr = 0;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  virtual ~Node() = default;
  // grads[i] is the gradient of output i (undefined when none flowed to it, unless
  // materialize_grads); returns one gradient per next edge (undefined where none).
  virtual std::vector<Tensor> Apply(std::vector<Tensor>&& grads) = 0;
  // Apply where, for each next edge i with dests[i] defined, the gradient may be written into
  // dests[i] and returned as that very tensor (dests is empty or has one entry per edge).
  // Nodes that cannot compute into a given buffer ignore it.
  virtual std::vector<Tensor> ApplyInto(std::vector<Tensor>&& grads,
                                        const std::vector<Tensor>& dests) {
    (void)dests;
    return Apply(std::move(grads));
  }
  // The buffer a gradient arriving here may be computed into (undefined: none).
  virtual Tensor GradBuffer() const { return Tensor(); }
  // With materialize_grads: the tensor a zero gradient for output i is laid out like (global
  // outputs), or undefined to make it from output_metas[i].
  virtual Tensor OutputLike(size_t i) const {
    (void)i;
    return Tensor();
  }
  virtual std::string name() const = 0;
  // Drops saved tensors once backward has run without retain_graph.
  virtual void Release() {}

  std::vector<Edge> next_edges;
  std::vector<TensorMeta> output_metas;  // to make zero gradients for outputs nobody used
  // The engine gives Apply zeros (OutputLike) for outputs no gradient reached.
  bool materialize_grads = false;
  // Hooks on the gradients of this node's outputs (register_hook of a non-leaf): (output,
  // id, hook), run in order once the output's gradient is whole, before Apply; a hook may
  // return a replacement (undefined: keep).
  struct GradHook {
    int output;
    int64_t id;
    std::function<Tensor(const Tensor&)> fn;
  };
  std::vector<GradHook> grad_hooks;
  // Outputs whose tensors keep their gradient in .grad (retain_grad), after the hooks ran.
  std::vector<std::pair<int, std::weak_ptr<TensorImpl>>> retained;
};

// A leaf's end of the graph. Apply gives the leaf's gradient as the leaf gets it (after its
// hooks, laid out like the leaf when global); the engine accumulates it into .grad and runs
// the leaf's post-accumulate hooks. It has no next edges.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : leaf_(std::move(leaf)) {}
  std::vector<Tensor> Apply(std::vector<Tensor>&& grads) override;
  // The gradient as the leaf gets it. `accumulating`: for .grad (backward), not for a caller
  // (autograd.grad).
  Tensor PrepareGrad(Tensor g, bool accumulating) const;
  std::string name() const override { return "AccumulateGrad"; }
  // The leaf's grad_buffer while its .grad is unset.
  Tensor GradBuffer() const override;
  const std::shared_ptr<TensorImpl>& leaf() const { return leaf_; }

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

// fn(g), checked: a replacement must keep g's shape; an undefined result keeps g.
Tensor RunGradHook(const std::function<Tensor(const Tensor&)>& fn, const Tensor& g);

// t.register_hook(fn): fn sees each gradient computed for t and may replace it (returning an
// undefined tensor keeps it). Returns an id for RemoveGradHook. t must require grad.
int64_t RegisterGradHook(const Tensor& t, std::function<Tensor(const Tensor&)> fn);
void RemoveGradHook(const Tensor& t, int64_t id);
// t.retain_grad(): a non-leaf keeps its gradient in .grad (accumulating); a no-op on leaves.
void RetainGrad(const Tensor& t);

// The edge a new node should point at for this input.
Edge GradientEdge(const Tensor& t);

// A differentiable view whose root's history was rebased by an in-place write gets a grad_fn
// that views the root's new history (GradientEdge does this for every op call).
void RefreshViewHistory(const Tensor& t);
// Installed by the ops library: the node that takes a view's gradient to its root's (the
// gradient scattered into zeros of the root's shape), pointing at the root's current history.
using ViewHistoryMaker = std::shared_ptr<Node> (*)(const Tensor& view, const Tensor& root);
void SetViewHistoryMaker(ViewHistoryMaker maker);

}  // namespace oneflow
