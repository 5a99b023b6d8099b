// The autograd graph: nodes recorded by op calls and the engine that runs them backwards.
//
//   Tensor loss = fn::sum(fn::mul(w, x));
//   RunBackward({loss}, {Tensor()}, /*retain_graph=*/false);  // fills w.grad()
//   std::vector<Tensor> g = Grad({loss}, {w}, {}, std::nullopt, /*create_graph=*/true);
//   // g[0] is d loss / d w with a graph of its own: differentiate it again.
#pragma once

#include <functional>
#include <memory>
#include <optional>
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
  // grads[i] is the gradient of output i (undefined when none flowed to it); returns one
  // gradient per next edge (undefined where none).
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
  virtual std::string name() const = 0;
  // Drops saved tensors once backward has run without retain_graph.
  virtual void Release() {}

  std::vector<Edge> next_edges;
  std::vector<TensorMeta> output_metas;  // to make zero gradients for outputs nobody used
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

// Accumulates into a leaf's .grad, then runs the leaf's post-accumulate hooks.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : leaf_(std::move(leaf)) {}
  std::vector<Tensor> Apply(std::vector<Tensor>&& grads) override;
  // The gradient as the leaf gets it: after its hooks, laid out like the leaf (global).
  Tensor PrepareGrad(Tensor g, bool accumulating) const;
  std::string name() const override { return "AccumulateGrad"; }
  // The leaf's grad_buffer while its .grad is unset.
  Tensor GradBuffer() const override;

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

// t.register_hook(fn): fn sees each gradient computed for t and may replace it (returning an
// undefined tensor keeps it). Returns an id for RemoveGradHook. t must require grad.
int64_t RegisterGradHook(const Tensor& t, std::function<Tensor(const Tensor&)> fn);
void RemoveGradHook(const Tensor& t, int64_t id);
// t.retain_grad(): a non-leaf keeps its gradient in .grad (accumulating); a no-op on leaves.
void RetainGrad(const Tensor& t);

// The edge a new node should point at for this input.
Edge GradientEdge(const Tensor& t);

void RunBackward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                 bool retain_graph);

// backward with PyTorch's options: create_graph records the backward pass itself (the
// gradients get a history: second derivatives); inputs (when not empty) limits accumulation
// to those tensors' .grad (non-leaves included) and runs only the part of the graph leading
// to them.
void Backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph,
              bool create_graph, const std::vector<Tensor>& inputs = {});

// torch.autograd.grad: the gradients of outputs (seeded with grad_outputs; empty or undefined
// entries mean ones for one-element outputs) with respect to inputs (leaves or not), returned
// instead of accumulated: no .grad changes. retain_graph defaults to create_graph. An input
// no gradient reached is an error unless allow_unused, which returns an undefined tensor for it.
std::vector<Tensor> Grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {},
                         std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                         bool allow_unused = false);

// A differentiable view whose root's history was rebased by an in-place write gets a grad_fn
// that views the root's new history (GradientEdge does this for every op call).
void RefreshViewHistory(const Tensor& t);
// Installed by the ops library: the node that takes a view's gradient to its root's (the
// gradient scattered into zeros of the root's shape), pointing at the root's current history.
using ViewHistoryMaker = std::shared_ptr<Node> (*)(const Tensor& view, const Tensor& root);
void SetViewHistoryMaker(ViewHistoryMaker maker);

// Runs cb once the backward pass that is running on this thread has finished every node (DDP
// waits for its all-reduces there). Callbacks run in the order queued; a callback may queue
// more. Throws when no backward is running on this thread.
void QueueBackwardCallback(std::function<void()> cb);

}  // namespace oneflow
