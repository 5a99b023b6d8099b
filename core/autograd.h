// Autograd's engine: runs a recorded graph (core/autograd_node.h) backwards from its roots,
// into the leaves' .grad (backward) or back to the caller (grad). It sits above the op calls
// it makes (gradient formulas, sums of gradients, zeros), and nothing below calls it.
//
//   Tensor loss = fn::sum(fn::mul(w, x));
//   RunBackward({loss});  // fills w.grad()
//   std::vector<Tensor> g = Grad({loss}, {w}, {}, std::nullopt, /*create_graph=*/true);
//   // g[0] is d loss / d w with a graph of its own: differentiate it again.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "core/autograd_node.h"

namespace oneflow {

// backward: the gradients of roots (seeded with grads; empty or undefined entries mean ones
// for one-element roots) accumulated into the leaves' .grad.
void RunBackward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads = {},
                 bool retain_graph = false);

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

// Runs cb once the backward pass that is running on this thread has finished every node (DDP
// waits for its all-reduces there). Callbacks run in the order queued; a callback may queue
// more. Throws when no backward is running on this thread.
void QueueBackwardCallback(std::function<void()> cb);

}  // namespace oneflow
