#include "core/autograd.h"

#include <algorithm>
#include <atomic>
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

Tensor RunHook(const std::function<Tensor(const Tensor&)>& fn, const Tensor& g) {
  Tensor r = fn(g);
  if (!r.defined()) return g;
  if (r.shape() != g.shape()) {
    throw Error(StrCat("register_hook: the hook returned a gradient of shape ", r.shape(),
                       " for a gradient of shape ", g.shape()));
  }
  return r;
}

int64_t NextHookId() {
  static std::atomic<int64_t> next{0};
  return ++next;
}

}  // namespace

int64_t RegisterGradHook(const Tensor& t, std::function<Tensor(const Tensor&)> fn) {
  ONEFLOW_CHECK(t.requires_grad(),
                "register_hook: cannot register a hook on a tensor that "
                "does not require grad");
  const int64_t id = NextHookId();
  AutogradMeta& am = t.impl()->mutable_autograd();
  if (am.grad_fn) {
    am.grad_fn->grad_hooks.push_back({am.output_nr, id, std::move(fn)});
  } else {
    am.grad_hooks.emplace_back(id, std::move(fn));
  }
  return id;
}

void RemoveGradHook(const Tensor& t, int64_t id) {
  AutogradMeta& am = t.impl()->mutable_autograd();
  if (am.grad_fn) {
    auto& hooks = am.grad_fn->grad_hooks;
    hooks.erase(std::remove_if(hooks.begin(), hooks.end(),
                               [id](const Node::GradHook& h) { return h.id == id; }),
                hooks.end());
  }
  auto& leaf = am.grad_hooks;
  leaf.erase(
      std::remove_if(leaf.begin(), leaf.end(), [id](const auto& h) { return h.first == id; }),
      leaf.end());
}

void RetainGrad(const Tensor& t) {
  ONEFLOW_CHECK(t.requires_grad(),
                "retain_grad: cannot retain the gradient of a tensor that "
                "does not require grad");
  AutogradMeta& am = t.impl()->mutable_autograd();
  if (!am.grad_fn || am.retains_grad) return;  // leaves keep theirs anyway
  am.retains_grad = true;
  am.grad_fn->retained.emplace_back(am.output_nr, t.impl_ptr());
}

Tensor AccumulateGrad::PrepareGrad(Tensor g, bool accumulating) const {
  Tensor leaf(leaf_);
  if (leaf_->autograd) {
    // A copy: a hook may remove itself (or add another) while running.
    auto hooks = leaf_->autograd->grad_hooks;
    for (const auto& hook : hooks) g = RunHook(hook.second, g);
  }
  if (GetGlobalHooks().leaf_grad) g = GetGlobalHooks().leaf_grad(leaf, g, accumulating);
  if (g.shape() != leaf.shape()) {
    throw Error(
        StrCat("backward: gradient of shape ", g.shape(), " for a leaf of shape ", leaf.shape()));
  }
  return g;
}

std::vector<Tensor> AccumulateGrad::Apply(std::vector<Tensor>&& grads) {
  Tensor leaf(leaf_);
  Tensor g = PrepareGrad(std::move(grads[0]), /*accumulating=*/true);
  AutogradMeta& am = leaf_->mutable_autograd();
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
  return {};
}

Tensor AccumulateGrad::GradBuffer() const {
  const AutogradMeta* am = leaf_->autograd.get();
  if (!am || am->grad || !am->grad_buffer) return Tensor();
  return Tensor(am->grad_buffer);
}

namespace {
ViewHistoryMaker g_view_history_maker = nullptr;
}  // namespace

void SetViewHistoryMaker(ViewHistoryMaker maker) { g_view_history_maker = maker; }

void RefreshViewHistory(const Tensor& t) {
  AutogradMeta* am = t.impl()->autograd.get();
  if (am == nullptr || !am->is_view) return;
  const std::shared_ptr<TensorImpl>& root = t.impl()->view_base;
  if (!root) return;
  const uint64_t generation = root->autograd ? root->autograd->generation : 0;
  if (generation == am->root_generation) return;
  ONEFLOW_CHECK(g_view_history_maker != nullptr, "autograd: no view history maker installed");
  Tensor r(root);
  am->root_generation = generation;
  am->requires_grad = r.requires_grad();
  am->grad_fn = r.requires_grad() ? g_view_history_maker(t, r) : nullptr;
  am->output_nr = 0;
}

Edge GradientEdge(const Tensor& t) {
  if (t.impl()->autograd && t.impl()->autograd->is_view) RefreshViewHistory(t);
  if (!t.requires_grad()) return Edge{};
  AutogradMeta& am = t.impl()->mutable_autograd();
  if (am.grad_fn) return Edge{am.grad_fn, am.output_nr};
  std::shared_ptr<Node> acc = am.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    acc->output_metas.push_back(t.meta());
    am.grad_accumulator = acc;
  }
  return Edge{acc, 0};
}

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
        if (in[h.output].defined()) in[h.output] = RunHook(h.fn, in[h.output]);
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
      out = node->ApplyInto(std::move(in), dests);
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
