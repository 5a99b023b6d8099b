// The op registry: every op declares its shape/dtype inference, its gradient (written as
// other op calls) and one kernel per device type. Ops are registered from .cc files:
//
//   ONEFLOW_REGISTER_OP(relu).Inputs(1).Infer(SameAsInput0).Grad(ReluGrad);
//   ONEFLOW_REGISTER_KERNEL(relu, kCPU, ReluCpu);
//
// How an op's facets fit together: DESIGN.md, "How an op is declared today".
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/attrs.h"
#include "core/tensor.h"

namespace oneflow {

struct GradCtx {
  const std::vector<Tensor>& inputs;   // saved, detached
  const std::vector<Tensor>& outputs;  // saved, detached
  const Attrs& attrs;
  const std::vector<Tensor>& grad_outputs;  // zeros where no gradient flowed
  const std::vector<bool>& needs_input_grad;
  // Per input, a tensor its gradient may be computed into and returned as (a leaf's gradient
  // buffer, see AutogradMeta::grad_buffer); formulas that cannot are free to ignore it.
  const std::vector<Tensor>* grad_buffers = nullptr;
  Tensor grad_buffer(size_t i) const {
    return grad_buffers && i < grad_buffers->size() ? (*grad_buffers)[i] : Tensor();
  }
};

using InferFn = std::vector<TensorMeta> (*)(const std::vector<TensorMeta>& inputs,
                                            const Attrs& attrs);
using KernelFn = std::vector<Tensor> (*)(const std::vector<Tensor>& inputs, const Attrs& attrs,
                                         const std::vector<TensorMeta>& outputs);
// Returns one gradient per input (undefined for inputs that need none).
using GradFn = std::vector<Tensor> (*)(const GradCtx& ctx);
// An op on complex inputs written as real ops on their (..., 2) views (core/ops/complex.h).
using ComplexRuleFn = std::vector<Tensor> (*)(const std::vector<Tensor>& inputs,
                                              const Attrs& attrs);
// Gradient formula for ops used only inside other ops' gradients: asking for a second
// derivative through them is an error naming the op (the autograd node throws it), not a
// silent zero.
std::vector<Tensor> NoDoubleBackward(const GradCtx& ctx);

struct OpDef {
  std::string name;
  int num_inputs = 1;  // -1: any number (cat)
  InferFn infer = nullptr;
  GradFn grad = nullptr;
  bool differentiable = true;  // false: the op has no gradient by nature (argmax, compare, rand)
  // Inputs that never take a gradient (class indices, masks); others follow the tensor.
  std::vector<int> nondiff_inputs;
  KernelFn kernels[kNumDeviceTypes] = {nullptr, nullptr};
  // The CPU kernel takes float16 and bfloat16 itself (views, copies). Other CPU kernels see
  // those inputs widened to float32 and their outputs are rounded back (RunLocalKernel).
  bool cpu_half = false;
  // The kernels take complex64 and complex128 themselves (views, copies). A call of another op
  // with a complex input runs complex_rule in its place when there is one, and is otherwise
  // refused in one line naming the op and the dtype.
  bool complex = false;
  ComplexRuleFn complex_rule = nullptr;
  // Where each facet was registered ("core/ops/elementwise.cc:412"; empty when absent), so
  // "where is X's gradient / CUDA kernel" is one query (tools/op_facets).
  std::string infer_at, grad_at, kernel_at[kNumDeviceTypes];
};

class OpRegistry {
 public:
  static OpRegistry& Global();
  OpDef& GetOrCreate(const std::string& name);
  // Throws "op registry: no op named X" when absent.
  const OpDef& Get(const std::string& name) const;
  const std::map<std::string, OpDef>& ops() const { return ops_; }

 private:
  std::map<std::string, OpDef> ops_;  // std::map: references stay valid
};

class OpBuilder {
 public:
  // at: where the registration stands (the macros pass __FILE__ ":" __LINE__).
  explicit OpBuilder(const char* name, const char* at = "")
      : def_(&OpRegistry::Global().GetOrCreate(name)), at_(at) {
    def_->name = name;
  }
  OpBuilder& Inputs(int n) {
    def_->num_inputs = n;
    return *this;
  }
  OpBuilder& Infer(InferFn f) {
    def_->infer = f;
    def_->infer_at = at_;
    return *this;
  }
  OpBuilder& Grad(GradFn f) {
    def_->grad = f;
    def_->grad_at = at_;
    return *this;
  }
  OpBuilder& NonDifferentiable() {
    def_->differentiable = false;
    return *this;
  }
  OpBuilder& NonDiffInputs(std::vector<int> idx) {
    def_->nondiff_inputs = std::move(idx);
    return *this;
  }
  OpBuilder& CpuHalf() {
    def_->cpu_half = true;
    return *this;
  }
  OpBuilder& Complex() {
    def_->complex = true;
    return *this;
  }
  OpBuilder& ComplexRule(ComplexRuleFn f) {
    def_->complex_rule = f;
    return *this;
  }
  OpBuilder& Kernel(DeviceType t, KernelFn f) {
    def_->kernels[static_cast<int>(t)] = f;
    def_->kernel_at[static_cast<int>(t)] = at_;
    return *this;
  }

 private:
  OpDef* def_;
  const char* at_;
};

#define ONEFLOW_CONCAT_INNER(a, b) a##b
#define ONEFLOW_CONCAT(a, b) ONEFLOW_CONCAT_INNER(a, b)
#define ONEFLOW_STRINGIFY_INNER(x) #x
#define ONEFLOW_STRINGIFY(x) ONEFLOW_STRINGIFY_INNER(x)
#define ONEFLOW_HERE __FILE__ ":" ONEFLOW_STRINGIFY(__LINE__)
#define ONEFLOW_REGISTER_OP(name)                                                     \
  [[maybe_unused]] static ::oneflow::OpBuilder ONEFLOW_CONCAT(op_reg_, __COUNTER__) = \
      ::oneflow::OpBuilder(#name, ONEFLOW_HERE)
#define ONEFLOW_REGISTER_KERNEL(name, device, fn)                                         \
  [[maybe_unused]] static ::oneflow::OpBuilder ONEFLOW_CONCAT(kernel_reg_, __COUNTER__) = \
      ::oneflow::OpBuilder(#name, ONEFLOW_HERE).Kernel(::oneflow::DeviceType::device, fn)

// Common inference helpers.
std::vector<TensorMeta> SameAsInput0(const std::vector<TensorMeta>& in, const Attrs& attrs);

}  // namespace oneflow
