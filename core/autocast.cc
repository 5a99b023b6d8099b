#include "core/autocast.h"

#include <string>
#include <unordered_map>

#include "core/op_registry.h"

namespace oneflow {

namespace {

struct State {
  bool enabled[kNumDeviceTypes] = {false, false};
  DType dtype[kNumDeviceTypes] = {DType::kBFloat16, DType::kFloat16};
  bool suspended = false;
};
thread_local State t_state;

// PyTorch's autocast lists (aten/src/ATen/autocast_mode.cpp, the CUDA table, which the CPU one
// approaches), by the names of the ops here: the composite functions (bmm, addmm, conv1d,
// conv_transpose2d, cross_entropy, mean, ...) reach these.
const std::unordered_map<std::string, AutocastPolicy>& Table() {
  static const auto* table = new std::unordered_map<std::string, AutocastPolicy>{
      {"matmul", AutocastPolicy::kLower},
      {"linear", AutocastPolicy::kLower},
      {"conv2d", AutocastPolicy::kLower},
      {"conv2d_grad_input", AutocastPolicy::kLower},  // conv_transpose2d's forward
      {"scaled_dot_product_attention", AutocastPolicy::kLower},
      {"softmax", AutocastPolicy::kFloat32},
      {"log_softmax", AutocastPolicy::kFloat32},
      {"layer_norm", AutocastPolicy::kFloat32},
      {"rms_norm", AutocastPolicy::kFloat32},
      {"nll_loss", AutocastPolicy::kFloat32},
      {"cross_entropy", AutocastPolicy::kFloat32},
      {"sum", AutocastPolicy::kFloat32},
      {"prod", AutocastPolicy::kFloat32},
      {"cumsum", AutocastPolicy::kFloat32},
      {"cumprod", AutocastPolicy::kFloat32},
      {"exp", AutocastPolicy::kFloat32},
      {"log", AutocastPolicy::kFloat32},
      {"log1p", AutocastPolicy::kFloat32},
      {"log2", AutocastPolicy::kFloat32},
      {"log10", AutocastPolicy::kFloat32},
      {"expm1", AutocastPolicy::kFloat32},
      {"pow", AutocastPolicy::kFloat32},
      {"rsqrt", AutocastPolicy::kFloat32},
      {"reciprocal", AutocastPolicy::kFloat32},
      {"tan", AutocastPolicy::kFloat32},
      {"asin", AutocastPolicy::kFloat32},
      {"acos", AutocastPolicy::kFloat32},
      {"sinh", AutocastPolicy::kFloat32},
      {"cosh", AutocastPolicy::kFloat32},
      {"erfinv", AutocastPolicy::kFloat32},
      {"softplus", AutocastPolicy::kFloat32},
      {"cat", AutocastPolicy::kPromote},
      {"where", AutocastPolicy::kPromote},
      {"scatter", AutocastPolicy::kPromote},
      {"scatter_add", AutocastPolicy::kPromote},
  };
  return *table;
}

}  // namespace

AutocastPolicy AutocastPolicyOf(const OpDef& op) {
  auto it = Table().find(op.name);
  return it == Table().end() ? AutocastPolicy::kNone : it->second;
}

bool AutocastEnabled(DeviceType type) { return t_state.enabled[static_cast<int>(type)]; }
DType AutocastDType(DeviceType type) { return t_state.dtype[static_cast<int>(type)]; }
void SetAutocastEnabled(DeviceType type, bool enabled) {
  t_state.enabled[static_cast<int>(type)] = enabled;
}
void SetAutocastDType(DeviceType type, DType dtype) {
  ONEFLOW_CHECK(IsHalf(dtype), "autocast: expected dtype float16 or bfloat16, got ",
                DTypeName(dtype));
  t_state.dtype[static_cast<int>(type)] = dtype;
}
bool AutocastSuspended() { return t_state.suspended; }

AutocastGuard::AutocastGuard(DeviceType type, bool enabled, DType dtype)
    : type_(type), prev_enabled_(AutocastEnabled(type)), prev_dtype_(AutocastDType(type)) {
  SetAutocastDType(type, dtype);
  SetAutocastEnabled(type, enabled);
}
AutocastGuard::~AutocastGuard() {
  t_state.enabled[static_cast<int>(type_)] = prev_enabled_;
  t_state.dtype[static_cast<int>(type_)] = prev_dtype_;
}

AutocastSuspendGuard::AutocastSuspendGuard() : prev_(t_state.suspended) {
  t_state.suspended = true;
}
AutocastSuspendGuard::~AutocastSuspendGuard() { t_state.suspended = prev_; }

bool AutocastTargets(const OpDef& op, const std::vector<Tensor>& inputs,
                     std::vector<DType>* targets) {
  if (t_state.suspended || inputs.empty()) return false;
  if (!t_state.enabled[0] && !t_state.enabled[1]) return false;
  const DeviceType type = inputs[0].device().type;
  if (!AutocastEnabled(type)) return false;
  const AutocastPolicy policy = AutocastPolicyOf(op);
  if (policy == AutocastPolicy::kNone) return false;
  DType target = AutocastDType(type);
  if (policy == AutocastPolicy::kFloat32) target = DType::kFloat32;
  if (policy == AutocastPolicy::kPromote) {
    bool first = true;
    for (const Tensor& t : inputs) {
      if (!IsFloating(t.dtype())) continue;
      target = first ? t.dtype() : PromoteTypes(target, t.dtype());
      first = false;
    }
    if (first) return false;
  }
  std::vector<DType> to;
  to.reserve(inputs.size());
  bool any = false;
  for (const Tensor& t : inputs) {
    const DType d = t.dtype();
    const bool keep = !IsFloating(d) || d == target || d == DType::kFloat64 ||
                      (policy == AutocastPolicy::kFloat32 && !IsHalf(d));
    to.push_back(keep ? d : target);
    any |= !keep;
  }
  if (any) *targets = std::move(to);
  return any;
}

}  // namespace oneflow
