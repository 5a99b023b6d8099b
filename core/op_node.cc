#include "core/op_node.h"

#include <cctype>

#include "core/error.h"

namespace oneflow {

namespace {

class OpNode;
// The saved tensors of the gradient formula running on this thread: an op call that reads one
// of them (passes it as an input) checks that no in-place write changed it since the forward.
// Formulas that only look at a saved tensor's shape never trip the check.
struct SavedScope {
  const OpNode* node;
  const std::vector<Tensor>* saved[2];  // inputs, outputs as the formula sees them
  const std::vector<uint64_t>* versions[2];
};
thread_local const SavedScope* t_saved_scope = nullptr;

// The node an op call records: the op's gradient formula over the saved call. Outputs no
// gradient reached come as zeros (materialize_grads), made by the engine.
class OpNode : public Node {
 public:
  OpNode(const OpDef* op, std::vector<Tensor> inputs, const Attrs& attrs,
         std::vector<bool> needs_input_grad)
      : op_(op), inputs_(std::move(inputs)), attrs_(attrs), needs_(std::move(needs_input_grad)) {
    materialize_grads = true;
    for (const Tensor& t : inputs_) input_versions_.push_back(t.storage()->version());
  }

  std::vector<Tensor> Apply(std::vector<Tensor>&& grads) override {
    return ApplyInto(std::move(grads), {});
  }
  // Inputs map one to one to next edges.
  std::vector<Tensor> ApplyInto(std::vector<Tensor>&& grads,
                                const std::vector<Tensor>& dests) override {
    if (released_) {
      throw Error(StrCat("backward: trying to backward through the graph a second time: the ",
                         "saved tensors of '", op_->name, "' were freed by the first backward; ",
                         "pass retain_graph=True to the first backward"));
    }
    if (op_->grad == &NoDoubleBackward) {
      throw Error(StrCat("backward: '", op_->name, "' is part of another op's gradient and has no ",
                         "gradient of its own; second derivatives (create_graph=True) through it ",
                         "are not supported"));
    }
    for (size_t i = 0; i < grads.size(); ++i) {
      ONEFLOW_CHECK(grads[i].defined(), "autograd: '", op_->name, "' got no gradient for output ",
                    i, " (the engine gives zeros: materialize_grads)");
    }
    // Building a graph of the backward pass (create_graph): the formula sees the outputs with
    // this node as their history, so gradients through them (tanh's 1 - y^2) reach the inputs.
    std::vector<Tensor> outputs_with_history;
    const std::vector<Tensor>* outputs = &outputs_;
    if (GradModeEnabled()) {
      outputs_with_history.reserve(outputs_.size());
      for (size_t i = 0; i < outputs_.size(); ++i) {
        Tensor o = outputs_[i].detach();
        if (IsDifferentiable(o.dtype())) {
          AutogradMeta& am = o.impl()->mutable_autograd();
          am.requires_grad = true;
          am.grad_fn = shared_from_this();
          am.output_nr = static_cast<int>(i);
        }
        outputs_with_history.push_back(std::move(o));
      }
      outputs = &outputs_with_history;
    }
    SavedScope scope{this, {&inputs_, outputs}, {&input_versions_, &output_versions_}};
    const SavedScope* outer = t_saved_scope;
    t_saved_scope = &scope;
    struct Restore {
      const SavedScope* outer;
      ~Restore() { t_saved_scope = outer; }
    } restore{outer};
    GradCtx ctx{inputs_, *outputs, attrs_, grads, needs_, dests.empty() ? nullptr : &dests};
    std::vector<Tensor> in_grads = op_->grad(ctx);
    ONEFLOW_CHECK(in_grads.size() == inputs_.size(), "autograd: gradient of '", op_->name,
                  "' returned ", in_grads.size(), " gradients for ", inputs_.size(), " inputs");
    return in_grads;
  }
  Tensor OutputLike(size_t i) const override {
    return i < outputs_.size() ? outputs_[i] : Tensor();
  }
  // PyTorch-style names: max_pool2d -> MaxPool2DBackward0.
  std::string name() const override {
    std::string n;
    bool upper = true;
    for (char ch : op_->name) {
      if (ch == '_') {
        upper = true;
        continue;
      }
      n += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(ch))) : ch;
      upper = false;
    }
    return n + "Backward0";
  }
  void Release() override {
    released_ = true;
    inputs_.clear();
    outputs_.clear();
  }
  // A saved tensor the formula reads, written in place since the forward, would give a wrong
  // gradient.
  void CheckSavedRead(const Tensor& t, const SavedScope& scope) const {
    static const char* const kWhat[2] = {"input", "output"};
    for (int w = 0; w < 2; ++w) {
      const std::vector<Tensor>& saved = *scope.saved[w];
      for (size_t i = 0; i < saved.size(); ++i) {
        if (saved[i].impl() != t.impl()) continue;
        uint64_t then = (*scope.versions[w])[i];
        uint64_t now = t.storage()->version();
        if (now != then) {
          throw Error(StrCat("backward: ", kWhat[w], " ", i, " of '", op_->name,
                             "', which its gradient needs, was modified by an in-place operation "
                             "(version ",
                             now, ", saved at version ", then, ")"));
        }
      }
    }
  }

  void SaveOutputs(const std::vector<Tensor>& outputs) {
    outputs_.reserve(outputs.size());
    for (const Tensor& t : outputs) {
      outputs_.push_back(t.detach());
      output_versions_.push_back(t.storage()->version());
    }
  }

 private:
  const OpDef* op_;
  std::vector<Tensor> inputs_;   // inputs never point back at this node: no cycle
  std::vector<Tensor> outputs_;  // detached: outputs do point at this node
  Attrs attrs_;
  std::vector<bool> needs_;
  std::vector<uint64_t> input_versions_, output_versions_;
  bool released_ = false;
};

}  // namespace

bool ShouldRecord(const OpDef& op, const std::vector<Tensor>& inputs) {
  if (!op.differentiable || !GradModeEnabled()) return false;
  for (const Tensor& t : inputs) {
    if (t.requires_grad()) return true;
  }
  return false;
}

void CheckSavedReads(const std::vector<Tensor>& inputs) {
  if (t_saved_scope == nullptr) return;
  for (const Tensor& t : inputs) t_saved_scope->node->CheckSavedRead(t, *t_saved_scope);
}

void RecordOpCall(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                  const std::vector<Tensor>& outputs) {
  std::vector<bool> needs(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) needs[i] = inputs[i].requires_grad();
  for (int i : op.nondiff_inputs) needs[i] = false;
  auto node = std::make_shared<OpNode>(&op, inputs, attrs, needs);
  node->next_edges.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    node->next_edges.push_back(needs[i] ? GradientEdge(inputs[i]) : Edge{});
  }
  node->SaveOutputs(outputs);
  for (size_t i = 0; i < outputs.size(); ++i) {
    node->output_metas.push_back(outputs[i].meta());
    if (!IsDifferentiable(outputs[i].dtype())) continue;  // indices and masks carry none
    AutogradMeta& am = outputs[i].impl()->mutable_autograd();
    am.requires_grad = true;
    am.grad_fn = node;
    am.output_nr = static_cast<int>(i);
    // A view of an input that requires grad: its history follows its root's across in-place
    // writes (see AutogradMeta::is_view).
    const std::shared_ptr<TensorImpl>& root = outputs[i].impl()->view_base;
    if (root && !outputs[i].is_global()) {
      for (size_t j = 0; j < inputs.size(); ++j) {
        if (!needs[j] || inputs[j].storage() != outputs[i].storage()) continue;
        am.is_view = true;
        am.root_generation = root->autograd ? root->autograd->generation : 0;
        break;
      }
    }
  }
}

}  // namespace oneflow
