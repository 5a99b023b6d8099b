// The autograd graph: nodes recorded by op calls and the engine that runs them backwards.
//
//   Tensor loss = fn::sum(fn::mul(w, x));
//   RunBackward({loss}, {Tensor()}, /*retain_graph=*/false);  // fills w.grad()
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

// Hook a layer above core installs to adapt a gradient before it reaches a leaf (global
// tensors box it to the leaf's nd_sbp).
using LeafGradHook = Tensor (*)(const Tensor& leaf, const Tensor& grad);
void SetLeafGradHook(LeafGradHook hook);

// The edge a new node should point at for this input.
Edge GradientEdge(const Tensor& t);

void RunBackward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                 bool retain_graph);

// Runs cb once the backward pass that is running on this thread has finished every node (DDP
// waits for its all-reduces there). Callbacks run in the order queued; a callback may queue
// more. Throws when no backward is running on this thread.
void QueueBackwardCallback(std::function<void()> cb);

}  // namespace oneflow
