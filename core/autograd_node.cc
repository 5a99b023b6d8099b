#include "core/autograd_node.h"

#include <algorithm>
#include <atomic>

#include "core/error.h"
#include "core/global_hooks.h"

namespace oneflow {

Tensor RunGradHook(const std::function<Tensor(const Tensor&)>& fn, const Tensor& g) {
  Tensor r = fn(g);
  if (!r.defined()) return g;
  if (r.shape() != g.shape()) {
    throw Error(StrCat("register_hook: the hook returned a gradient of shape ", r.shape(),
                       " for a gradient of shape ", g.shape()));
  }
  return r;
}

namespace {

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
    for (const auto& hook : hooks) g = RunGradHook(hook.second, g);
  }
  if (GetGlobalHooks().leaf_grad) g = GetGlobalHooks().leaf_grad(leaf, g, accumulating);
  if (g.shape() != leaf.shape()) {
    throw Error(
        StrCat("backward: gradient of shape ", g.shape(), " for a leaf of shape ", leaf.shape()));
  }
  return g;
}

std::vector<Tensor> AccumulateGrad::Apply(std::vector<Tensor>&& grads) {
  return {PrepareGrad(std::move(grads[0]), /*accumulating=*/true)};
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

}  // namespace oneflow
