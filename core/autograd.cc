#include "core/autograd.h"

#include <unordered_map>

#include "core/autocast.h"
#include "core/dispatch.h"
#include "core/profiler.h"

namespace oneflow {

namespace {
// The callbacks of the backward pass running on this thread (null when none runs).
thread_local std::vector<std::function<void()>>* t_backward_callbacks = nullptr;
}  // namespace

void QueueBackwardCallback(std::function<void()> cb) {
  ONEFLOW_CHECK(t_backward_callbacks != nullptr,
                "queue_callback: no backward pass is running on this thread");
  t_backward_callbacks->push_back(std::move(cb));
}

namespace {

// A leaf's gradient (as its AccumulateGrad gave it) into its .grad, then the leaf's
// post-accumulate hooks.
void AccumulateIntoLeaf(const AccumulateGrad& node, Tensor g) {
  Tensor leaf(node.leaf());
  AutogradMeta& am = node.leaf()->mutable_autograd();
  if (!am.grad && am.grad_buffer && g.impl_ptr() == am.grad_buffer) {
    // Computed in place by the node that produced it. .grad gets its own handle on the buffer:
    // what users do to .grad (replace its data) must not move where later gradients go.
    const TensorImpl& b = *am.grad_buffer;
    am.grad = Tensor::MakeView(Tensor(am.grad_buffer), b.shape, b.strides, b.offset).impl_ptr();
  } else if (!am.grad) {
    // Keep g itself only when nothing else can see its memory (one handle on one storage);
    // otherwise a contiguous copy: g may alias another leaf's gradient or a user tensor.
    // (A view's base holds the storage too; it counts only if reachable otherwise.)
    long owners = g.storage().use_count();
    if (g.impl()->view_base && g.impl()->view_base.use_count() == 1) --owners;
    bool sole_owner = g.impl_ptr().use_count() == 1 && owners == 1;
    am.grad = (sole_owner && g.is_contiguous() && g.offset() == 0) ? g.impl_ptr()
                                                                   : CopyGrad(g).impl_ptr();
  } else {
    am.grad = AddGrads(Tensor(am.grad), g).impl_ptr();  // out of place: grads may alias
  }
  for (auto& hook : am.post_accumulate_grad_hooks) hook(leaf);
}

// Zeros for the outputs of node no gradient reached (laid out like the outputs).
void MaterializeGrads(const Node& node, std::vector<Tensor>& grads) {
  for (size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].defined()) continue;
    Tensor like = node.OutputLike(i);
    grads[i] = like.defined() ? FullLike(like, 0.0) : Full(node.output_metas[i], 0.0);
  }
}

}  // namespace

namespace {

// Sets grad mode for the backward pass (on only to build a graph of it) and restores it.
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : prev_(GradModeEnabled()) { SetGradMode(enabled); }
  ~GradModeGuard() { SetGradMode(prev_); }

 private:
  bool prev_;
};

struct EngineOptions {
  const char* api = "backward";
  bool retain_graph = false;
  bool create_graph = false;
  // Empty: a full backward (every leaf accumulates). Otherwise only these tensors get
  // gradients (accumulated into .grad when accumulate, else returned) and only the nodes that
  // lead to them run.
  std::vector<Tensor> inputs;
  bool accumulate = true;
};

// Runs the graph backwards from roots; returns the gradients captured for options.inputs when
// !options.accumulate (undefined where none arrived).
std::vector<Tensor> RunEngine(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                              const EngineOptions& options) {
  profiler::Range prof(profiler::Kind::kBackward, options.api);
  GradModeGuard grad_mode(options.create_graph);
  AutocastSuspendGuard no_autocast;  // gradients run in the dtypes the forward chose
  std::vector<std::function<void()>> callbacks;
  std::vector<std::function<void()>>* outer_callbacks = t_backward_callbacks;
  t_backward_callbacks = &callbacks;
  struct Restore {
    std::vector<std::function<void()>>* outer;
    ~Restore() { t_backward_callbacks = outer; }
  } restore{outer_callbacks};
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  std::unordered_map<Node*, int> dependencies;
  std::vector<std::shared_ptr<Node>> ready;
  const char* api = options.api;

  auto add_to_buffer = [&](const Edge& e, Tensor g) {
    std::vector<Tensor>& buf = buffers[e.fn.get()];
    if (buf.empty()) buf.resize(e.fn->output_metas.size());
    Tensor& slot = buf[e.input_nr];
    slot = slot.defined() ? AddGrads(slot, g) : std::move(g);
  };

  std::vector<Edge> root_edges;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    if (!r.requires_grad()) {
      throw Error(StrCat(api, ": tensor ", i,
                         " does not require grad and has no grad_fn (did you forget "
                         "requires_grad=True, or run the forward under no_grad?)"));
    }
    Tensor g = i < grads.size() ? grads[i] : Tensor();
    if (!g.defined()) {
      if (r.numel() != 1) {
        throw Error(StrCat(api, ": grad can be implicitly created only for outputs with one ",
                           "element, got a tensor of shape ", r.shape(),
                           "; pass a gradient of that shape"));
      }
      g = FullLike(r, 1.0);
    } else if (g.shape() != r.shape()) {
      throw Error(
          StrCat(api, ": gradient of shape ", g.shape(), " for a tensor of shape ", r.shape()));
    }
    Edge e = GradientEdge(r);
    root_edges.push_back(e);
    add_to_buffer(e, g);
  }

  // The inputs' edges: where their gradients arrive whole (a leaf's accumulator, a non-leaf's
  // grad_fn and output number).
  struct Capture {
    size_t slot;
    int input_nr;
  };
  std::unordered_map<Node*, std::vector<Capture>> captures;
  std::vector<std::shared_ptr<Node>> keep_alive;  // accumulators made here for unused leaves
  std::vector<Tensor> captured(options.inputs.size());
  for (size_t i = 0; i < options.inputs.size(); ++i) {
    const Tensor& t = options.inputs[i];
    if (!t.defined() || !t.requires_grad()) {
      throw Error(StrCat(api, ": input ", i, " does not require grad; only tensors that require ",
                         "grad can be differentiated against"));
    }
    Edge e = GradientEdge(t);
    keep_alive.push_back(e.fn);
    captures[e.fn.get()].push_back({i, e.input_nr});
  }
  const bool limited = !options.inputs.empty();

  // Count, for every node reachable from the roots, how many edges point at it; note an order
  // where every node comes after all nodes it points at (for the pruning below).
  std::vector<Node*> post_order;
  {
    std::unordered_map<Node*, bool> seen;
    std::vector<std::pair<Node*, size_t>> stack;
    for (const Edge& e : root_edges) {
      if (seen[e.fn.get()]) continue;
      seen[e.fn.get()] = true;
      stack.push_back({e.fn.get(), 0});
      while (!stack.empty()) {
        auto& [n, next] = stack.back();
        if (next == n->next_edges.size()) {
          post_order.push_back(n);
          stack.pop_back();
          continue;
        }
        Node* child = n->next_edges[next++].fn.get();
        if (!child) continue;
        ++dependencies[child];
        if (!seen[child]) {
          seen[child] = true;
          stack.push_back({child, 0});
        }
      }
    }
  }
  // With inputs given, only nodes from which an input can be reached run.
  std::unordered_map<Node*, bool> needed;
  if (limited) {
    for (Node* n : post_order) {
      bool need = captures.count(n) > 0;
      for (const Edge& e : n->next_edges) need = need || (e.fn && needed[e.fn.get()]);
      needed[n] = need;
    }
  }
  for (const Edge& e : root_edges) {
    if (dependencies[e.fn.get()] == 0) {
      bool dup = false;
      for (auto& r : ready) dup |= r.get() == e.fn.get();
      if (!dup) ready.push_back(e.fn);
    }
  }

  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.back();
    ready.pop_back();
    std::vector<Tensor> in = std::move(buffers[node.get()]);
    buffers.erase(node.get());
    in.resize(node->output_metas.size());
    // The outputs' gradients are whole now: their tensors' hooks, then retain_grad.
    if (!node->grad_hooks.empty()) {
      auto hooks = node->grad_hooks;
      for (const Node::GradHook& h : hooks) {
        if (in[h.output].defined()) in[h.output] = RunGradHook(h.fn, in[h.output]);
      }
    }
    if (options.accumulate) {
      for (const auto& [output, weak] : node->retained) {
        std::shared_ptr<TensorImpl> impl = weak.lock();
        if (!impl || !in[output].defined()) continue;
        AutogradMeta& am = impl->mutable_autograd();
        am.grad = am.grad ? AddGrads(Tensor(am.grad), in[output]).impl_ptr()
                          : CopyGrad(in[output]).impl_ptr();
      }
    }
    auto* accumulator = dynamic_cast<AccumulateGrad*>(node.get());
    // With inputs given: an accumulator runs for an input of backward(inputs=...), never for
    // autograd.grad (.grad is left alone); other nodes run when they lead to an input.
    bool run = true;
    if (accumulator && !options.accumulate) {
      run = false;
    } else if (limited && accumulator) {
      run = captures.count(node.get()) > 0;
    } else if (limited) {
      run = false;
      for (const Edge& e : node->next_edges) run = run || (e.fn && needed[e.fn.get()]);
    }
    auto found = captures.find(node.get());
    if (found != captures.end()) {
      for (const Capture& c : found->second) {
        const Tensor& g = in[c.input_nr];
        if (!g.defined()) continue;
        if (!options.accumulate) {
          captured[c.slot] = accumulator ? accumulator->PrepareGrad(g, /*accumulating=*/false) : g;
        } else if (!accumulator) {
          // backward(inputs=[non-leaf]): its .grad, as retain_grad would keep it.
          AutogradMeta& am = options.inputs[c.slot].impl()->mutable_autograd();
          am.grad = am.grad ? AddGrads(Tensor(am.grad), g).impl_ptr() : CopyGrad(g).impl_ptr();
        }
      }
    }
    bool any_grad = false;
    for (const Tensor& t : in) any_grad |= t.defined();
    // A leaf's gradient buffer is offered to the node on the only edge into its accumulator,
    // when no other gradient for it is waiting: that node's gradient is then the whole of it.
    // (Not while recording the backward pass: formulas write those buffers outside autograd.)
    std::vector<Tensor> dests;
    for (size_t i = 0; run && any_grad && !options.create_graph && i < node->next_edges.size();
         ++i) {
      Node* next = node->next_edges[i].fn.get();
      if (!next || dependencies[next] != 1 || buffers.count(next)) continue;
      if (limited && !needed[next]) continue;
      Tensor buffer = next->GradBuffer();
      if (!buffer.defined()) continue;
      if (dests.empty()) dests.resize(node->next_edges.size());
      dests[i] = std::move(buffer);
    }
    // A node no gradient reached (its consumers' gradient formulas gave none) has nothing to
    // pass on; its successors are still released from waiting on it below.
    std::vector<Tensor> out;
    if (run && any_grad) {
      profiler::Range prof(profiler::Kind::kBackward, "backward node");
      if (prof.active()) prof.set_name(node->name());
      if (node->materialize_grads) MaterializeGrads(*node, in);
      out = node->ApplyInto(std::move(in), dests);
      if (accumulator) {
        AccumulateIntoLeaf(*accumulator, std::move(out[0]));
        out.clear();
      }
    }
    if (!options.retain_graph && run) node->Release();
    for (size_t i = 0; i < node->next_edges.size(); ++i) {
      const Edge& e = node->next_edges[i];
      if (!e.fn) continue;
      if (i < out.size() && out[i].defined()) add_to_buffer(e, out[i]);
      if (--dependencies[e.fn.get()] == 0) ready.push_back(e.fn);
    }
  }
  for (size_t i = 0; i < callbacks.size(); ++i) {
    std::function<void()> cb = std::move(callbacks[i]);  // cb may queue more (reallocating)
    cb();
  }
  return captured;
}

}  // namespace

void RunBackward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                 bool retain_graph) {
  EngineOptions o;
  o.retain_graph = retain_graph;
  RunEngine(roots, grads, o);
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  RunBackward({*this}, {grad}, retain_graph);
}

void Backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph,
              bool create_graph, const std::vector<Tensor>& inputs) {
  EngineOptions o;
  o.retain_graph = retain_graph;
  o.create_graph = create_graph;
  o.inputs = inputs;
  RunEngine(roots, grads, o);
}

std::vector<Tensor> Grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, std::optional<bool> retain_graph,
                         bool create_graph, bool allow_unused) {
  if (outputs.empty()) throw Error("grad: no outputs to differentiate");
  if (inputs.empty()) throw Error("grad: no inputs to differentiate against");
  if (!grad_outputs.empty() && grad_outputs.size() != outputs.size()) {
    throw Error(StrCat("grad: got ", grad_outputs.size(), " grad_outputs for ", outputs.size(),
                       " outputs; pass one per output (None for a one-element output)"));
  }
  EngineOptions o;
  o.api = "grad";
  o.retain_graph = retain_graph.value_or(create_graph);
  o.create_graph = create_graph;
  o.inputs = inputs;
  o.accumulate = false;
  std::vector<Tensor> result = RunEngine(outputs, grad_outputs, o);
  for (size_t i = 0; i < result.size(); ++i) {
    if (result[i].defined() || allow_unused) continue;
    throw Error(StrCat("grad: input ", i, " (", inputs[i].ToString(),
                       ") was not used to compute the outputs (no gradient reached it); pass "
                       "allow_unused=True to get None for it"));
  }
  return result;
}

}  // namespace oneflow
