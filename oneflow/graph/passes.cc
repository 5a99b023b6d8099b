#include "oneflow/graph/passes.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "core/dispatch.h"
#include "core/error.h"
#include "core/kernels/cpu/blas.h"
#include "core/kernels/cpu/cpu_util.h"
#include "oneflow/graph/plan.h"

namespace oneflow {
namespace graph {

namespace {

thread_local bool t_passes_off = false;

// How a GEMM reads a 2-D tensor: row-major with leading dimension ld, or its transpose; ld 0
// when neither stride is 1 (then a contiguous copy is read).
struct MatView {
  bool trans = false;
  int64_t ld = 0;
};
MatView ViewOf(const Tensor& t) {
  const int64_t rows = t.shape()[0], cols = t.shape()[1];
  const int64_t rs = t.strides()[0], cs = t.strides()[1];
  if ((cs == 1 || cols == 1) && rs >= std::max<int64_t>(cols, 1)) return {false, rs};
  if ((rs == 1 || rows == 1) && cs >= std::max<int64_t>(rows, 1)) return {true, cs};
  return {};
}

// linear(x, w[, b]) on which the fused kernel runs: local float32 CPU tensors, x (m, k) and w
// (n, k) non-empty, b of n elements. Checked on the traced tensors and again on each replay's
// (a captured parameter may since hold other memory); what fails runs the two ops.
bool FusableLinear(const std::vector<Tensor>& in) {
  if (in.size() != 2 && in.size() != 3) return false;
  for (const Tensor& t : in) {
    if (!t.defined() || t.is_global() || !t.is_cpu() || t.dtype() != DType::kFloat32) {
      return false;
    }
  }
  const Tensor &x = in[0], &w = in[1];
  if (x.ndim() != 2 || w.ndim() != 2 || x.shape()[1] != w.shape()[1]) return false;
  if (x.numel() == 0 || w.numel() == 0) return false;
  return in.size() == 2 || (in[2].ndim() == 1 && in[2].shape()[0] == w.shape()[0]);
}

std::vector<Tensor> LinearRelu(const OpDef& linear, const Attrs& linear_attrs, const OpDef& relu,
                               const Attrs& relu_attrs, const std::vector<Tensor>& in) {
  if (!FusableLinear(in)) {
    return RunLocalKernel(relu, RunLocalKernel(linear, in, linear_attrs), relu_attrs);
  }
  Tensor x = in[0], w = in[1];
  if (!ViewOf(x).ld) x = Contig(x);
  if (!ViewOf(w).ld) w = Contig(w);
  Tensor b = in.size() == 3 ? Contig(in[2]) : Tensor();
  const MatView vx = ViewOf(x), vw = ViewOf(w);
  const int64_t m = x.shape()[0], n = w.shape()[0], k = x.shape()[1];
  Tensor y = Tensor::Empty(Shape({m, n}), DType::kFloat32, x.device());
  // w is (n, k): read transposed it is the (k, n) operand.
  cpu::GemmBiasRelu(vx.trans, !vw.trans, m, n, k, x.data<float>(), vx.ld, w.data<float>(), vw.ld,
                    b.defined() ? b.data<float>() : nullptr, /*relu=*/true, y.data<float>(), n);
  return {y};
}

}  // namespace

PlanPassesOff::PlanPassesOff() : outer_(t_passes_off) { t_passes_off = true; }
PlanPassesOff::~PlanPassesOff() { t_passes_off = outer_; }

void PlanPasses::Run(GraphPlan& plan) {
  // ONEFLOW_GRAPH_PASSES=0: plans replay as traced (to rule the passes out when debugging).
  const char* env = std::getenv("ONEFLOW_GRAPH_PASSES");
  if (t_passes_off || (env && std::strcmp(env, "0") == 0)) return;
  FuseLinearRelu(plan);
}

void PlanPasses::FuseLinearRelu(GraphPlan& plan) {
  auto& steps = plan.steps_;
  const int num_slots = plan.num_slots_;
  // Per slot: the steps that read it and that write it; whether something outside the steps
  // sees it (an input, an output, captured state) or other slots share its memory (views).
  std::vector<std::vector<int>> readers(num_slots), writers(num_slots);
  for (size_t i = 0; i < steps.size(); ++i) {
    for (int s : steps[i].in) {
      if (s >= 0) readers[s].push_back(static_cast<int>(i));
    }
    for (int s : steps[i].out) {
      if (s >= 0) writers[s].push_back(static_cast<int>(i));
    }
  }
  std::vector<bool> outside(num_slots, false);
  for (int s : plan.input_slots_) outside[s] = true;
  for (int s : plan.output_slots_) outside[s] = true;
  for (const auto& c : plan.captured_) outside[c.first] = true;
  std::unordered_map<const Storage*, int> sharing;
  for (const Storage* st : plan.slot_storage_) {
    if (st) ++sharing[st];
  }
  auto alone = [&](int s) {
    const Storage* st = plan.slot_storage_[s];
    return st && sharing[st] == 1 && !outside[s];
  };

  for (size_t i = 0; i < steps.size(); ++i) {
    GraphPlan::Step& lin = steps[i];
    if (!lin.op || lin.op->name != "linear" || lin.out.size() != 1 || lin.draws >= 0) continue;
    const int mid = lin.out[0];
    // The linear's output: made here, read once (by the relu) and by nothing else.
    if (mid < 0 || !alone(mid) || writers[mid].size() != 1 || readers[mid].size() != 1) continue;
    GraphPlan::Step& act = steps[readers[mid][0]];
    if (!act.op || act.op->name != "relu" || act.in.size() != 1 || act.out.size() != 1) continue;
    const int out = act.out[0];
    // relu_ writes its input in place (out == mid); the fused step makes a new tensor.
    if (out < 0 || out == mid || writers[out].size() != 1) continue;
    std::vector<Tensor> traced;
    bool defined = true;
    for (int s : lin.in) {
      defined &= s >= 0;
      if (s >= 0) traced.push_back(plan.slot_tensor_[s]);
    }
    if (!defined || !FusableLinear(traced)) continue;
    const OpDef* linear_op = lin.op;
    const OpDef* relu_op = act.op;
    const Attrs linear_attrs = lin.attrs, relu_attrs = act.attrs;
    lin.fn = [linear_op, linear_attrs, relu_op, relu_attrs](const std::vector<Tensor>& in) {
      return LinearRelu(*linear_op, linear_attrs, *relu_op, relu_attrs, in);
    };
    lin.op = nullptr;
    lin.name = "linear+relu";
    lin.out[0] = out;
    act.op = nullptr;
    act.fn = [](const std::vector<Tensor>&) { return std::vector<Tensor>(); };
    act.in.clear();
    act.out.clear();
    // Describe prints this text after the step (the field's other use is a global step's
    // layout, which neither fused step has).
    act.layout = StrCat("(fused into step ", i, ")");
    writers[out] = {static_cast<int>(i)};
  }
}

}  // namespace graph
}  // namespace oneflow
