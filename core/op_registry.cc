#include "core/op_registry.h"

namespace oneflow {

OpRegistry& OpRegistry::Global() {
  static OpRegistry* registry = new OpRegistry;
  return *registry;
}

OpDef& OpRegistry::GetOrCreate(const std::string& name) {
  OpDef& def = ops_[name];
  def.name = name;
  return def;
}

const OpDef& OpRegistry::Get(const std::string& name) const {
  auto it = ops_.find(name);
  if (it == ops_.end()) throw Error(StrCat("op registry: no op named '", name, "'"));
  return it->second;
}

std::vector<Tensor> NoDoubleBackward(const GradCtx&) {
  throw Error(
      "backward: this op belongs to another op's gradient; second derivatives through it are "
      "not supported");
}

std::vector<TensorMeta> SameAsInput0(const std::vector<TensorMeta>& in, const Attrs&) {
  return {in[0]};
}

}  // namespace oneflow
