#include "core/dispatch.h"

#include <cctype>
#include <cstring>

#include "core/autocast.h"
#include "core/autograd.h"
#include "core/profiler.h"
#include "core/size_check.h"
#include "core/sync_check.h"
#include "core/trace.h"

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
      if (grads[i].defined()) continue;
      grads[i] = i < outputs_.size() && outputs_[i].defined() ? FullLike(outputs_[i], 0.0)
                                                              : Full(output_metas[i], 0.0);
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

// What the profiler shows of an op call: its input shapes (record_shapes) and, for a kernel on
// a CUDA device, that device's time.
void DescribeOpCall(profiler::Range& r, const std::vector<Tensor>& inputs) {
  if (profiler::RecordShapes()) {
    std::string shapes = "[";
    for (size_t i = 0; i < inputs.size(); ++i) {
      shapes += (i ? ", " : "") + (inputs[i].defined() ? inputs[i].shape().ToString() : "[]");
    }
    r.set_shapes(shapes + "]");
  }
  if (!inputs.empty() && inputs[0].defined() && inputs[0].device().type == DeviceType::kCUDA &&
      !OnHost(inputs[0].device())) {
    r.MarkDevice(inputs[0].device().index);
  }
}

}  // namespace

namespace {
GlobalHooks g_global_hooks;
}  // namespace

void SetGlobalHooks(const GlobalHooks& hooks) { g_global_hooks = hooks; }
const GlobalHooks& GetGlobalHooks() { return g_global_hooks; }

namespace {
DeviceHooks g_device_hooks;

// The stand-in CUDA device's copies: its memory is host memory (copy_ and fill_ write it as
// they write the CPU's), so moving a tensor between it and the CPU is a byte copy.
Tensor FakeCudaCopyTo(const Tensor& src, const Device& device) {
  if (device.type == DeviceType::kCUDA && device.index >= FakeCudaDeviceCount()) {
    throw Error(StrCat("to: ", device.ToString(), " does not exist: the stand-in CUDA device ",
                       "(ONEFLOW_FAKE_CUDA=1) has ", FakeCudaDeviceCount(), " devices"));
  }
  // The real device's copy waits for the stream (cuda::CopyBytes): reported the same way.
  HostSync(StrCat("a copy from ", src.device().ToString(), " to ", device.ToString()).c_str());
  Tensor dst = Tensor::Empty(src.shape(), src.dtype(), device);
  if (src.numel() > 0) {
    std::memcpy(dst.raw_data(), src.raw_data(),
                static_cast<size_t>(src.numel()) * SizeOf(src.dtype()));
  }
  return dst;
}
}  // namespace

void SetDeviceHooks(const DeviceHooks& hooks) { g_device_hooks = hooks; }
const DeviceHooks& GetDeviceHooks() {
  if (FakeCuda()) {
    static const DeviceHooks fake = [] {
      DeviceHooks h;
      h.copy_to = FakeCudaCopyTo;  // copy_strided stays null: copy_ and fill_ write host memory
      return h;
    }();
    return fake;
  }
  return g_device_hooks;
}

Tensor FullLike(const Tensor& like, double value) {
  if (like.is_global() && g_global_hooks.full_like) return g_global_hooks.full_like(like, value);
  return Full(like.meta(), value);
}

namespace {

Tensor CastTo(const Tensor& t, DType dtype) {
  static const OpDef& cast = OpRegistry::Global().Get("cast");
  Attrs a;
  a.Set("dtype", dtype);
  return CallOp1(cast, {t}, a);
}

// dst (a half tensor) = src (float32 of its shape): the write-back of an in-place kernel.
void StoreHalf(const Tensor& dst, const Tensor& src, const char* op) {
  ONEFLOW_CHECK(dst.is_contiguous() && src.is_contiguous() && dst.numel() == src.numel(), op,
                ": writing in place into a non-contiguous ", DTypeName(dst.dtype()),
                " tensor is not supported on cpu");
  const float* s = src.data<float>();
  DispatchWithHalf(dst.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      T* d = dst.data<T>();
      for (int64_t i = 0, n = dst.numel(); i < n; ++i) d[i] = T(s[i]);
    }
  });
  dst.storage()->bump_version();
}

}  // namespace

std::vector<Tensor> RunKernelInFloat32(const OpDef& op, KernelFn kernel,
                                       const std::vector<Tensor>& inputs, const Attrs& attrs,
                                       const std::vector<TensorMeta>& outputs) {
  std::vector<Tensor> wide(inputs);
  std::vector<uint64_t> versions(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!IsHalf(inputs[i].dtype())) continue;
    wide[i] = CastTo(inputs[i], DType::kFloat32);
    versions[i] = wide[i].storage()->version();
  }
  std::vector<TensorMeta> wide_out(outputs);
  for (TensorMeta& m : wide_out) {
    if (IsHalf(m.dtype)) m.dtype = DType::kFloat32;
  }
  std::vector<Tensor> result = kernel(wide, attrs, wide_out);
  // A kernel that writes an input (an optimizer update with its state, returning the
  // parameter) wrote the float32 copy: every widened input goes back into its half tensor.
  bool in_place = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (wide[i].impl() == inputs[i].impl()) continue;
    in_place |= wide[i].storage()->version() != versions[i];
    for (const Tensor& o : result) in_place |= o.storage() == wide[i].storage();
  }
  for (size_t i = 0; in_place && i < inputs.size(); ++i) {
    if (wide[i].impl() != inputs[i].impl()) StoreHalf(inputs[i], wide[i], op.name.c_str());
  }
  for (size_t k = 0; k < result.size(); ++k) {
    if (!IsHalf(outputs[k].dtype)) continue;
    size_t alias = inputs.size();
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (wide[i].impl() != inputs[i].impl() && result[k].impl() == wide[i].impl() &&
          result[k].shape() == inputs[i].shape()) {
        alias = i;  // the kernel returned its (written) input: return the half tensor itself
      }
    }
    result[k] = alias < inputs.size() ? inputs[alias] : CastTo(result[k], outputs[k].dtype);
  }
  return result;
}

namespace {

// Ops whose kernels do not take complex dtypes say so, rather than reading pairs as reals.
void RefuseComplex(const OpDef& op, const std::vector<TensorMeta>& metas, const char* what) {
  for (size_t i = 0; i < metas.size(); ++i) {
    if (!IsComplex(metas[i].dtype)) continue;
    throw Error(StrCat(op.name, ": does not support complex dtypes, got a ",
                       DTypeName(metas[i].dtype), " ", what, " (", what, " ", i, ")"));
  }
}

}  // namespace

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
  if (!op.complex) RefuseComplex(op, metas, "input");
  std::vector<TensorMeta> out = op.infer(metas, attrs);
  if (!op.complex) RefuseComplex(op, out, "output");
  for (const TensorMeta& m : out) CheckShape(m.shape, m.dtype, op.name.c_str());
  SizeCheckOpScope size_check_op(op.name.c_str());
  if (inputs.empty() && attrs.Has("device"))
    device = Device::Parse(attrs.Get<std::string>("device"));
  if (device.type == DeviceType::kMeta) {  // shapes and dtypes only: no kernel, no memory
    std::vector<Tensor> empty;
    for (const TensorMeta& m : out) empty.push_back(Tensor::Empty(m.shape, m.dtype, device));
    return empty;
  }
  // The stand-in CUDA device runs the CPU kernels on its host memory.
  const DeviceType kernel_type = OnHost(device) ? DeviceType::kCPU : device.type;
  KernelFn kernel = op.kernels[static_cast<int>(kernel_type)];
  if (!kernel) {
    throw Error(StrCat(op.name, ": no kernel for device ", device.ToString(), " in this build"));
  }
  AutocastSuspendGuard no_autocast;  // ops the kernel calls are its own business
  if (kernel_type == DeviceType::kCPU && !op.cpu_half) {
    bool half = false;
    for (const TensorMeta& m : metas) half |= IsHalf(m.dtype);
    for (const TensorMeta& m : out) half |= IsHalf(m.dtype);
    if (half) return RunKernelInFloat32(op, kernel, inputs, attrs, out);
  }
  return kernel(inputs, attrs, out);
}

namespace {

std::vector<Tensor> RunOpCall(const OpDef& op, const std::vector<Tensor>& given,
                              const Attrs& attrs) {
  CheckArity(op, given);
  if (op.complex_rule) {  // complex inputs: the op composed from real ops (core/ops/complex.h)
    for (const Tensor& t : given) {
      if (t.defined() && IsComplex(t.dtype())) return op.complex_rule(given, attrs);
    }
  }
  std::vector<Tensor> cast;
  const std::vector<Tensor>& inputs = AutocastInputs(op, given, &cast) ? cast : given;
  if (t_saved_scope != nullptr) {
    for (const Tensor& t : inputs) t_saved_scope->node->CheckSavedRead(t, *t_saved_scope);
  }
  bool any_global = false;
  bool any_requires_grad = false;
  for (const Tensor& t : inputs) {
    any_global |= t.is_global();
    any_requires_grad |= t.requires_grad();
  }
  bool record = any_requires_grad && op.differentiable && GradModeEnabled();
  std::vector<Tensor> outputs;
  Tracer* tracer = CurrentTracer();
  if (any_global && g_global_hooks.interpret) {
    NoGradGuard no_grad;
    AutocastSuspendGuard no_autocast;
    TraceSuspend inner;
    outputs = g_global_hooks.interpret(op, inputs, attrs);
  } else {
    NoGradGuard no_grad;  // kernels may call ops internally; those are not part of the graph
    TraceSuspend inner;
    outputs = RunLocalKernel(op, inputs, attrs);
  }
  if (tracer) tracer->OnOp(op, inputs, attrs, outputs);
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
  return outputs;
}

}  // namespace

// The profiled call wraps the unprofiled one, so profiling off leaves the op call's code as it
// was behind one relaxed load and branch.
std::vector<Tensor> CallOp(const OpDef& op, const std::vector<Tensor>& given, const Attrs& attrs) {
  if (!profiler::Enabled()) return RunOpCall(op, given, attrs);
  profiler::Range prof(profiler::Kind::kOp, op.name);
  if (prof.active()) DescribeOpCall(prof, given);
  return RunOpCall(op, given, attrs);
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
