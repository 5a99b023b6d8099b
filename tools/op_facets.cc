// Where each facet of an op lives: shape/dtype inference, gradient, CPU and CUDA kernels, SBP
// rule (and whether it lowers or rewrites the op), samples, how its CPU kernel takes
// float16/bfloat16 and its autocast policy, as file:line from the
// registrations themselves (ONEFLOW_REGISTER_OP / _KERNEL / _SBP_RULE and the samples' add
// record __FILE__ and __LINE__).
//
//   tools/op_facets relu          one op, a line per facet
//   tools/op_facets               every op, one line each
#include <cstdio>
#include <string>

#include "core/autocast.h"
#include "core/op_registry.h"
#include "sbp/rules.h"
#include "tests/op_samples.h"

namespace {

using oneflow::DeviceType;
using oneflow::OpDef;

std::string Or(const std::string& at, const char* none) { return at.empty() ? none : at; }

std::string Kernel(const OpDef& op, DeviceType t) {
  return Or(op.kernel_at[static_cast<int>(t)], "(none)");
}

std::string Rule(const std::string& name) {
  const auto* rule = oneflow::sbp::FindSbpRule(name);
  if (!rule) return "(none)";
  std::string s = Or(rule->at, "(registered)");
  if (rule->lower) s += " (lowered per rank)";
  if (rule->rewrite) s += " (rewritten into other global ops)";
  return s;
}

// Where the op's samples are made, each place once.
std::string Samples(const std::string& name) {
  std::string s;
  for (const auto& sample : oneflow::testing::Samples()) {
    if (sample.op != name || s.find(sample.at) != std::string::npos) continue;
    s += (s.empty() ? "" : " ") + sample.at;
  }
  return s.empty() ? "(none)" : s;
}

const char* Policy(const OpDef& op) {
  switch (oneflow::AutocastPolicyOf(op)) {
    case oneflow::AutocastPolicy::kLower:
      return "the autocast dtype";
    case oneflow::AutocastPolicy::kFloat32:
      return "float32";
    case oneflow::AutocastPolicy::kPromote:
      return "the widest input dtype";
    default:
      return "as given";
  }
}

std::string Grad(const OpDef& op) {
  return op.differentiable ? Or(op.grad_at, "(none)") : "(not differentiable)";
}

}  // namespace

int main(int argc, char** argv) {
  const auto& ops = oneflow::OpRegistry::Global().ops();
  if (argc == 2) {
    auto it = ops.find(argv[1]);
    if (it == ops.end()) {
      std::fprintf(stderr, "op_facets: no op named '%s' (run without arguments to list all)\n",
                   argv[1]);
      return 1;
    }
    const OpDef& op = it->second;
    std::printf(
        "%s\n  definition  %s\n  gradient    %s\n  cpu kernel  %s\n  cuda kernel %s\n"
        "  sbp rule    %s\n  samples     %s\n  cpu half    %s\n  autocast    %s\n",
        op.name.c_str(), Or(op.infer_at, "(none)").c_str(), Grad(op).c_str(),
        Kernel(op, DeviceType::kCPU).c_str(), Kernel(op, DeviceType::kCUDA).c_str(),
        Rule(op.name).c_str(), Samples(op.name).c_str(),
        op.cpu_half ? "its own (OpDef::cpu_half)" : "computed in float32 (RunKernelInFloat32)",
        Policy(op));
    return 0;
  }
  if (argc > 2) {
    std::fprintf(stderr, "usage: tools/op_facets [op]\n");
    return 2;
  }
  for (const auto& [name, op] : ops) {
    std::printf("%-24s def %s | grad %s | cpu %s | cuda %s | sbp %s\n", name.c_str(),
                Or(op.infer_at, "-").c_str(), Grad(op).c_str(),
                Kernel(op, DeviceType::kCPU).c_str(), Kernel(op, DeviceType::kCUDA).c_str(),
                Rule(name).c_str());
  }
  return 0;
}
