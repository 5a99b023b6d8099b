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

// linear(in), then relu when relu_op is given, as one oneDNN matmul primitive (bias and relu
// as its post-ops); the ops themselves where the tensors do not allow it.
std::vector<Tensor> LinearAct(const OpDef& linear, const Attrs& linear_attrs, const OpDef* relu_op,
                              const Attrs& relu_attrs, const std::vector<Tensor>& in) {
  if (!FusableLinear(in)) {
    std::vector<Tensor> y = RunLocalKernel(linear, in, linear_attrs);
    return relu_op ? RunLocalKernel(*relu_op, y, relu_attrs) : y;
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
                    b.defined() ? b.data<float>() : nullptr, /*relu=*/relu_op != nullptr,
                    y.data<float>(), n);
  return {y};
}

// A weight gradient's GEMM that writes straight into its SGD momentum buffer
// (buf = momentum * buf + (1 - dampening) * a @ b, GEMM's beta and alpha) and the update that
// then reads buf as its gradient: p -= lr * buf, the momentum update's last line. The two
// steps share this: whether this replay's GEMM went into buf, or the gradient when it could not.
struct MomentumLink {
  bool fused = false;
  bool updated = false;  // the GEMM's step also did the update (early: p has no later reader)
  Tensor grad;
};

// sgd_update with momentum takes (p, g, buf, lr, weight_decay, momentum, dampening)
// (core/optim.h); the hyper-parameters are 0-dim float64 tensors.
constexpr size_t kSgdMomentumInputs = 7;
double Value(const Tensor& h) { return h.data<double>()[0]; }

// The momentum update allows the fused form: its attrs (no nesterov, not maximize) and its
// hyper-parameters' current values (read at each replay, since they change between replays):
// no weight decay (it reads p), a momentum. hyper: (lr, weight_decay, momentum, dampening).
bool FusableMomentum(const Attrs& a, const std::vector<Tensor>& hyper) {
  for (const Tensor& h : hyper) {
    if (!h.defined() || h.is_global() || !h.is_cpu() || h.dtype() != DType::kFloat64) return false;
  }
  return a.Get<bool>("momentum") && !a.Get<bool>("nesterov") && !a.Get<bool>("maximize") &&
         Value(hyper[1]) == 0 && Value(hyper[2]) != 0;
}

// The attrs of plain SGD (no momentum buffer) with the update's other flags.
Attrs Plain(const Attrs& a) {
  Attrs plain = a;
  plain.Set("momentum", false);
  return plain;
}

bool LocalFloat(const Tensor& t) {
  return t.defined() && !t.is_global() && t.is_cpu() && t.dtype() == DType::kFloat32;
}

// A gradient's producer whose result one GEMM can accumulate into a buffer: a @ b (matmul of
// 2-D a (m, k) and b (k, n), k > 0; buf contiguous (m, n)), or x summed over dim 0 (the bias
// gradient of a linear layer: ones(1, m) @ x for 2-D x (m, n), m > 0; buf contiguous (n)).
enum class Producer { kMatmul, kRowSum };

bool FusableInto(Producer kind, const std::vector<Tensor>& in, const Tensor& buf) {
  for (const Tensor& t : in) {
    if (!LocalFloat(t) || t.ndim() != 2) return false;
  }
  if (!LocalFloat(buf) || !buf.is_contiguous()) return false;
  if (kind == Producer::kRowSum) {
    return in.size() == 1 && in[0].shape()[0] > 0 && buf.shape() == Shape({in[0].shape()[1]});
  }
  return in.size() == 2 && in[0].shape()[1] == in[1].shape()[0] && in[0].shape()[1] > 0 &&
         buf.shape() == Shape({in[0].shape()[0], in[1].shape()[1]});
}

// buf = beta * buf + alpha * product. REQUIRES: FusableInto(kind, in, buf).
void AccumulateInto(Producer kind, const std::vector<Tensor>& in, float alpha, float beta,
                    const Tensor& buf) {
  Tensor y = kind == Producer::kMatmul ? in[1] : in[0];
  if (!ViewOf(y).ld) y = Contig(y);
  const MatView vy = ViewOf(y);
  const int64_t n = y.shape()[1];
  if (kind == Producer::kRowSum) {
    const int64_t m = y.shape()[0];
    thread_local std::vector<float> ones;
    if (static_cast<int64_t>(ones.size()) < m) ones.assign(m, 1.f);
    cpu::Gemm(false, vy.trans, 1, n, m, alpha, ones.data(), m, y.data<float>(), vy.ld, beta,
              buf.data<float>(), n);
  } else {
    Tensor x = in[0];
    if (!ViewOf(x).ld) x = Contig(x);
    const MatView vx = ViewOf(x);
    const int64_t m = x.shape()[0], k = x.shape()[1];
    cpu::Gemm(vx.trans, vy.trans, m, n, k, alpha, x.data<float>(), vx.ld, y.data<float>(), vy.ld,
              beta, buf.data<float>(), n);
  }
  buf.storage()->bump_version();
}

}  // namespace

PlanPassesOff::PlanPassesOff() : outer_(t_passes_off) { t_passes_off = true; }
PlanPassesOff::~PlanPassesOff() { t_passes_off = outer_; }

void PlanPasses::Run(GraphPlan& plan) {
  // ONEFLOW_GRAPH_PASSES=0: plans replay as traced (to rule the passes out when debugging).
  const char* env = std::getenv("ONEFLOW_GRAPH_PASSES");
  if (t_passes_off || (env && std::strcmp(env, "0") == 0)) return;
  FuseLinearRelu(plan);
  if (plan.fuse_model_updates_) FuseMatmulMomentum(plan);
}

struct PlanPasses::SlotUses {
  // Per slot: the steps that read it and that write it; whether something outside the steps
  // sees it (an input, an output, captured state), whether it is captured state.
  std::vector<std::vector<int>> readers, writers;
  std::vector<bool> outside, captured;
  std::vector<const Storage*> storage;
  std::unordered_map<const Storage*, int> sharing;  // slots per buffer (views share one)

  // s has memory of its own: no other slot (a view) shares its buffer.
  bool Unshared(int s) const {
    const Storage* st = storage[s];
    return st && sharing.at(st) == 1;
  }
};

PlanPasses::SlotUses PlanPasses::Uses(const GraphPlan& plan) {
  const int num_slots = plan.num_slots_;
  SlotUses u;
  u.readers.resize(num_slots);
  u.writers.resize(num_slots);
  for (size_t i = 0; i < plan.steps_.size(); ++i) {
    for (int s : plan.steps_[i].in) {
      if (s >= 0) u.readers[s].push_back(static_cast<int>(i));
    }
    for (int s : plan.steps_[i].out) {
      if (s >= 0) u.writers[s].push_back(static_cast<int>(i));
    }
  }
  u.outside.assign(num_slots, false);
  u.captured.assign(num_slots, false);
  for (int s : plan.input_slots_) u.outside[s] = true;
  for (int s : plan.output_slots_) u.outside[s] = true;
  for (const auto& c : plan.captured_) u.outside[c.first] = u.captured[c.first] = true;
  u.storage = plan.slot_storage_;
  for (const Storage* st : u.storage) {
    if (st) ++u.sharing[st];
  }
  return u;
}

void PlanPasses::FuseLinearRelu(GraphPlan& plan) {
  auto& steps = plan.steps_;
  SlotUses u = Uses(plan);
  auto& readers = u.readers;
  auto& writers = u.writers;
  auto alone = [&](int s) { return u.Unshared(s) && !u.outside[s]; };

  for (size_t i = 0; i < steps.size(); ++i) {
    GraphPlan::Step& lin = steps[i];
    if (!lin.op || lin.op->name != "linear" || lin.out.size() != 1 || lin.draws >= 0) continue;
    std::vector<Tensor> traced;
    bool defined = true;
    for (int s : lin.in) {
      defined &= s >= 0;
      if (s >= 0) traced.push_back(plan.slot_tensor_[s]);
    }
    const int mid = lin.out[0];
    if (!defined || mid < 0 || !FusableLinear(traced)) continue;
    const OpDef* linear_op = lin.op;
    const Attrs linear_attrs = lin.attrs;
    lin.op = nullptr;
    // The linear's output: made here, read once (by a relu) and by nothing else.
    int act_at = -1;
    if (alone(mid) && writers[mid].size() == 1 && readers[mid].size() == 1) {
      const GraphPlan::Step& act = steps[readers[mid][0]];
      // relu_ writes its input in place (out == mid); the fused step makes a new tensor.
      if (act.op && act.op->name == "relu" && act.in.size() == 1 && act.out.size() == 1 &&
          act.out[0] >= 0 && act.out[0] != mid && writers[act.out[0]].size() == 1) {
        act_at = readers[mid][0];
      }
    }
    if (act_at < 0) {
      // No relu to fuse: the primitive still adds the bias as it writes (no row copies first),
      // and reads the transposed weight faster; below cpu::Gemm's tiny-product bound its call
      // costs more than the op's (4x16x16: 0.4 against 0.15 us).
      const Tensor &x = traced[0], &w = traced[1];
      if (x.shape()[0] * x.shape()[1] * w.shape()[0] < 32 * 32 * 32) {
        lin.op = linear_op;
        continue;
      }
      lin.fn = [linear_op, linear_attrs](const std::vector<Tensor>& in) {
        return LinearAct(*linear_op, linear_attrs, nullptr, Attrs(), in);
      };
      lin.layout = "(oneDNN matmul, the bias as its post-op)";
      continue;
    }
    GraphPlan::Step& act = steps[act_at];
    const int out = act.out[0];
    const OpDef* relu_op = act.op;
    const Attrs relu_attrs = act.attrs;
    lin.fn = [linear_op, linear_attrs, relu_op, relu_attrs](const std::vector<Tensor>& in) {
      return LinearAct(*linear_op, linear_attrs, relu_op, relu_attrs, in);
    };
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

void PlanPasses::FuseMatmulMomentum(GraphPlan& plan) {
  auto& steps = plan.steps_;
  SlotUses u = Uses(plan);
  auto& readers = u.readers;
  auto& writers = u.writers;
  const auto& outside = u.outside;
  const auto& captured = u.captured;
  auto unshared = [&](int s) { return u.Unshared(s); };
  // An intermediate made by one step and read by one step only, in memory of its own.
  auto single_use = [&](int s, int reader) {
    return s >= 0 && unshared(s) && !outside[s] && writers[s].size() == 1 &&
           readers[s].size() == 1 && readers[s][0] == reader;
  };

  for (size_t j = 0; j < steps.size(); ++j) {
    GraphPlan::Step& upd = steps[j];
    if (!upd.op || upd.op->name != "sgd_update" || upd.in.size() != kSgdMomentumInputs || upd.fn) {
      continue;
    }
    // A guarded update (GradScaler's skip) must not have its buffer written outside the guard.
    bool guarded = false;
    for (const GraphPlan::Guard& gd : plan.guards_) guarded |= j >= gd.begin && j < gd.end;
    if (guarded) continue;
    const int p = upd.in[0], g = upd.in[1], buf = upd.in[2];
    const std::vector<int> hyper(upd.in.begin() + 3, upd.in.end());
    bool hyper_captured = true;
    for (int h : hyper)
      hyper_captured &= h >= 0 && (captured[h] || outside[h]) && writers[h].empty();
    if (!hyper_captured) continue;
    if (p < 0 || buf < 0 || p == buf || !single_use(g, static_cast<int>(j))) continue;
    // The buffer: optimizer state that only this update reads or writes, in memory of its own.
    if (!captured[buf] || !unshared(buf) || readers[buf].size() != 1 || !writers[buf].empty()) {
      continue;
    }
    // The gradient's producer: a matmul, maybe through autograd's copy of its result.
    int k = writers[g][0], copy = -1;
    int product = g;
    if (steps[k].op && steps[k].op->name == "copy" && steps[k].copy_of_contiguous &&
        steps[k].in.size() == 1 && single_use(steps[k].in[0], k)) {
      copy = k;
      product = steps[k].in[0];
      k = writers[product][0];
    }
    GraphPlan::Step& mm = steps[k];
    if (!mm.op || mm.out.size() != 1 || mm.out[0] != product || mm.draws >= 0) continue;
    Producer kind;
    if (mm.op->name == "matmul" && mm.in.size() == 2) {
      kind = Producer::kMatmul;
    } else if (mm.op->name == "sum" && mm.in.size() == 1 && !mm.attrs.Get<bool>("keepdim") &&
               mm.in[0] >= 0 && plan.slot_tensor_[mm.in[0]].ndim() == 2 &&
               (mm.attrs.Get<std::vector<int64_t>>("dims") == std::vector<int64_t>{0} ||
                mm.attrs.Get<std::vector<int64_t>>("dims") == std::vector<int64_t>{-2})) {
      kind = Producer::kRowSum;
    } else {
      continue;
    }
    std::vector<Tensor> traced;
    for (int s : mm.in) traced.push_back(s >= 0 ? plan.slot_tensor_[s] : Tensor());
    const Tensor& traced_buf = plan.slot_tensor_[buf];
    std::vector<Tensor> traced_hyper;
    for (int h : hyper) traced_hyper.push_back(plan.slot_tensor_[h]);
    if (!FusableInto(kind, traced, traced_buf) || !FusableMomentum(upd.attrs, traced_hyper) ||
        traced_buf.shape() != plan.slot_tensor_[p].shape()) {
      continue;
    }
    // Early: nothing after the GEMM reads or writes p before the update (it may then follow the
    // GEMM at once, while the new buffer is still in cache).
    bool early = unshared(p);
    for (int r : readers[p]) early &= r < k || r == static_cast<int>(j);
    for (int w : writers[p]) early &= w == static_cast<int>(j);
    auto link = std::make_shared<MomentumLink>();
    GraphPlan* owner = &plan;
    const OpDef* producer_op = mm.op;
    const OpDef* update_op = upd.op;
    const Attrs producer_attrs = mm.attrs;
    // A matmul's first operand made by a 2-D transpose (autograd's g.T for a weight gradient)
    // that nothing else reads: the GEMM reads its input transposed itself, a view made here
    // without the op's dispatch.
    int transpose_at = -1;
    if (kind == Producer::kMatmul && mm.in[0] >= 0 && writers[mm.in[0]].size() == 1 &&
        readers[mm.in[0]].size() == 1 && !outside[mm.in[0]]) {
      const GraphPlan::Step& t = steps[writers[mm.in[0]][0]];
      if (t.op && t.op->name == "permute" && t.in.size() == 1 && t.in[0] >= 0 &&
          t.out.size() == 1 && plan.slot_tensor_[t.in[0]].ndim() == 2 &&
          !plan.slot_tensor_[t.in[0]].is_global() &&
          t.attrs.Get<std::vector<int64_t>>("dims") == std::vector<int64_t>{1, 0}) {
        transpose_at = writers[mm.in[0]][0];
      }
    }
    const bool transpose_first = transpose_at >= 0;
    const size_t update = j, num_in = mm.in.size();
    mm.fn = [link, owner, update, kind, producer_op, update_op, producer_attrs, num_in, early,
             transpose_first](const std::vector<Tensor>& all) {
      const Attrs& a = owner->steps_[update].attrs;  // this replay's (SetAttr may change them)
      std::vector<Tensor> in(all.begin(), all.begin() + num_in);
      if (transpose_first) {  // permute(dims=(1, 0)), as its kernel makes it
        const Tensor& t = in[0];
        in[0] = Tensor::MakeView(t, Shape({t.shape()[1], t.shape()[0]}),
                                 {t.strides()[1], t.strides()[0]}, t.offset());
      }
      const Tensor& b = all[num_in];
      const size_t h0 = num_in + (early ? 2 : 1);  // lr, weight_decay, momentum, dampening
      const std::vector<Tensor> hy(all.begin() + h0, all.begin() + h0 + 4);
      link->fused = FusableMomentum(a, hy) && FusableInto(kind, in, b);
      link->updated = false;
      if (!link->fused) {
        link->grad = RunLocalKernel(*producer_op, in, producer_attrs)[0];
        return std::vector<Tensor>();
      }
      AccumulateInto(kind, in, static_cast<float>(1 - Value(hy[3])),
                     static_cast<float>(Value(hy[2])), b);
      if (early) {
        // The buffer holds the new momentum: p -= lr * buf is SGD without momentum on it.
        RunLocalKernel(*update_op, {all[num_in + 1], b, hy[0], hy[1]}, Plain(a));
        link->updated = true;
      }
      return std::vector<Tensor>();
    };
    if (transpose_first) {
      GraphPlan::Step& t = steps[transpose_at];
      mm.in[0] = t.in[0];
      readers[t.in[0]].push_back(k);
      t.op = nullptr;
      t.fn = [](const std::vector<Tensor>&) { return std::vector<Tensor>(); };
      t.in.clear();
      t.out.clear();
      t.layout = StrCat("(fused into step ", k, ")");
    }
    mm.op = nullptr;
    mm.name = kind == Producer::kMatmul ? "matmul+momentum" : "sum+momentum";
    mm.in.push_back(buf);
    if (early) mm.in.push_back(p);
    for (int h : hyper) mm.in.push_back(h);
    mm.out.clear();
    if (copy >= 0) {
      GraphPlan::Step& c = steps[copy];
      c.op = nullptr;
      c.fn = [](const std::vector<Tensor>&) { return std::vector<Tensor>(); };
      c.in.clear();
      c.out.clear();
      c.copy_of_contiguous = false;
      c.layout = StrCat("(fused into step ", k, ")");
    }
    // The update keeps its op and attrs (SetAttr addresses it) and replays through fn.
    upd.fn = [link, owner, update, update_op](const std::vector<Tensor>& in) {
      const Attrs& a = owner->steps_[update].attrs;
      if (link->updated) return std::vector<Tensor>{in[0]};
      if (link->fused) {
        // The buffer holds the new momentum: p -= lr * buf is SGD without momentum on it.
        return RunLocalKernel(*update_op, {in[0], in[1], in[2], in[3]}, Plain(a));
      }
      Tensor grad = std::move(link->grad);
      link->grad = Tensor();
      return RunLocalKernel(*update_op, {in[0], grad, in[1], in[2], in[3], in[4], in[5]}, a);
    };
    upd.in = {p, buf};
    for (int h : hyper) upd.in.push_back(h);
    upd.layout = StrCat(early ? "(runs in step " : "(its momentum from step ", k, ")");
    readers[buf].push_back(k);
    if (early) readers[p].push_back(k);
    for (int h : hyper) readers[h].push_back(k);
  }
}

}  // namespace graph
}  // namespace oneflow
