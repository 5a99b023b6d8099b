#include "core/dispatch.h"

#include <cctype>

#include "core/autograd.h"

namespace oneflow {

namespace {

GlobalInterpreter g_global_interpreter = nullptr;

// The node an op call records: the op's gradient formula over the saved call.
class OpNode : public Node {
 public:
  OpNode(const OpDef* op, std::vector<Tensor> inputs, const Attrs& attrs,
         std::vector<bool> needs_input_grad)
      : op_(op), inputs_(std::move(inputs)), attrs_(attrs), needs_(std::move(needs_input_grad)) {
    for (const Tensor& t : inputs_) input_versions_.push_back(t.storage()->version());
  }

  std::vector<Tensor> Apply(std::vector<Tensor>&& grads) override {
    return ApplyInto(std::move(grads), {});
  }
  // Inputs map one to one to next edges.
  std::vector<Tensor> ApplyInto(std::vector<Tensor>&& grads,
                                const std::vector<Tensor>& dests) override {
    CheckVersions(inputs_, input_versions_, "input");
    CheckVersions(outputs_, output_versions_, "output");
    if (released_) {
      throw Error(StrCat("backward: trying to backward through the graph a second time: the ",
                         "saved tensors of '", op_->name, "' were freed by the first backward; ",
                         "pass retain_graph=True to the first backward"));
    }
    for (size_t i = 0; i < grads.size(); ++i) {
      if (grads[i].defined()) continue;
      grads[i] = i < outputs_.size() && outputs_[i].defined() ? FullLike(outputs_[i], 0.0)
                                                              : Full(output_metas[i], 0.0);
    }
    GradCtx ctx{inputs_, outputs_, attrs_, grads, needs_, dests.empty() ? nullptr : &dests};
    std::vector<Tensor> in_grads = op_->grad(ctx);
    ONEFLOW_CHECK(in_grads.size() == inputs_.size(), "autograd: gradient of '", op_->name,
                  "' returned ", in_grads.size(), " gradients for ", inputs_.size(), " inputs");
    return in_grads;
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
  // A saved tensor written in place since the forward would give a wrong gradient.
  void CheckVersions(const std::vector<Tensor>& saved, const std::vector<uint64_t>& versions,
                     const char* what) const {
    for (size_t i = 0; i < saved.size(); ++i) {
      uint64_t now = saved[i].storage()->version();
      if (now != versions[i]) {
        throw Error(StrCat("backward: ", what, " ", i, " of '", op_->name,
                           "', which its gradient needs, was modified by an in-place operation "
                           "(version ", now, ", saved at version ", versions[i], ")"));
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

void CheckArity(const OpDef& op, const std::vector<Tensor>& inputs) {
  if (op.num_inputs >= 0 && static_cast<int>(inputs.size()) != op.num_inputs) {
    throw Error(
        StrCat(op.name, ": expected ", op.num_inputs, " tensor inputs, got ", inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined())
      throw Error(StrCat(op.name, ": input ", i, " is an undefined tensor"));
  }
}

}  // namespace

void SetGlobalInterpreter(GlobalInterpreter interpreter) { g_global_interpreter = interpreter; }

namespace {
GlobalHooks g_global_hooks;
}  // namespace

void SetGlobalHooks(const GlobalHooks& hooks) { g_global_hooks = hooks; }
const GlobalHooks& GetGlobalHooks() { return g_global_hooks; }

namespace {
DeviceHooks g_device_hooks;
}  // namespace

void SetDeviceHooks(const DeviceHooks& hooks) { g_device_hooks = hooks; }
const DeviceHooks& GetDeviceHooks() { return g_device_hooks; }

Tensor FullLike(const Tensor& like, double value) {
  if (like.is_global() && g_global_hooks.full_like) return g_global_hooks.full_like(like, value);
  return Full(like.meta(), value);
}

std::vector<Tensor> RunLocalKernel(const OpDef& op, const std::vector<Tensor>& inputs,
                                   const Attrs& attrs) {
  std::vector<TensorMeta> metas;
  metas.reserve(inputs.size());
  for (const Tensor& t : inputs) metas.push_back(t.meta());
  Device device = inputs.empty() ? Device::CPU() : metas[0].device;
  for (size_t i = 1; i < metas.size(); ++i) {
    if (metas[i].device != device) {
      throw Error(StrCat(op.name, ": expected all tensors on one device, got ", device.ToString(),
                         " (input 0) and ", metas[i].device.ToString(), " (input ", i, ")"));
    }
  }
  std::vector<TensorMeta> out = op.infer(metas, attrs);
  if (inputs.empty() && attrs.Has("device"))
    device = Device::Parse(attrs.Get<std::string>("device"));
  KernelFn kernel = op.kernels[static_cast<int>(device.type)];
  if (!kernel) {
    throw Error(StrCat(op.name, ": no kernel for device ", device.ToString(), " in this build"));
  }
  return kernel(inputs, attrs, out);
}

std::vector<Tensor> CallOp(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  CheckArity(op, inputs);
  bool any_global = false;
  bool any_requires_grad = false;
  for (const Tensor& t : inputs) {
    any_global |= t.is_global();
    any_requires_grad |= t.requires_grad();
  }
  bool record = any_requires_grad && op.differentiable && GradModeEnabled();
  std::vector<Tensor> outputs;
  if (any_global && g_global_interpreter) {
    NoGradGuard no_grad;
    outputs = g_global_interpreter(op, inputs, attrs);
  } else {
    NoGradGuard no_grad;  // kernels may call ops internally; those are not part of the graph
    outputs = RunLocalKernel(op, inputs, attrs);
  }
  if (!record) return outputs;

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
    if (!IsFloating(outputs[i].dtype())) continue;  // indices and masks carry no gradient
    AutogradMeta& am = outputs[i].impl()->mutable_autograd();
    am.requires_grad = true;
    am.grad_fn = node;
    am.output_nr = static_cast<int>(i);
  }
  return outputs;
}

Tensor CallOp1(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  return CallOp(op, inputs, attrs)[0];
}

// The engine runs below the functional API (which lives in the ops library), so it reaches
// the few ops it needs through the registry.
Tensor Full(const TensorMeta& meta, double value) {
  static const OpDef& full = OpRegistry::Global().Get("full");
  Attrs a;
  a.Set("shape", meta.shape.dims()).Set("value", value).Set("dtype", meta.dtype);
  a.Set("device", meta.device.ToString());
  return CallOp1(full, {}, a);
}

Tensor AddGrads(const Tensor& a, const Tensor& b) {
  static const OpDef& add = OpRegistry::Global().Get("add");
  return CallOp1(add, {a, b});
}

Tensor CopyGrad(const Tensor& g) {
  static const OpDef& copy = OpRegistry::Global().Get("copy");
  return CallOp1(copy, {g});
}

}  // namespace oneflow
