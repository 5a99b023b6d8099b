#include "oneflow/graph/plan.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <unordered_set>

#include "core/autocast.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "core/functional.h"
#include "core/profiler.h"
#include "oneflow/global/global_tensor.h"
#include "oneflow/global/interpret.h"
#include "oneflow/graph/cuda_graph_replay.h"
#include "oneflow/graph/passes.h"

namespace oneflow {
namespace graph {

namespace {

std::string Layout(const Tensor& t) {
  if (!t.is_global()) return t.device().ToString();
  const global::GlobalMeta& m = global::Meta(t);
  return StrCat(m.placement.ToString(), " ", sbp::ToString(m.nd_sbp));
}

// The shard's storage for a global tensor (its own TensorImpl holds no data).
const Storage* StorageOf(const Tensor& t) {
  if (t.is_global()) return global::Meta(t).local.storage().get();
  return t.storage().get();
}

// "S(0)" for a 1-D nd_sbp, "(S(0), B)" for more dimensions; "local" for a local tensor.
std::string SbpText(const Tensor& t) {
  if (!t.defined() || !t.is_global()) return "local";
  const sbp::NdSbp& nd = global::Meta(t).nd_sbp;
  return nd.size() == 1 ? nd[0].ToString() : sbp::ToString(nd);
}

bool SameLayout(const Tensor& a, const Tensor& b) {
  if (a.is_global() != b.is_global()) return false;
  if (!a.is_global()) return a.device() == b.device();
  const global::GlobalMeta& ma = global::Meta(a);
  const global::GlobalMeta& mb = global::Meta(b);
  return ma.placement == mb.placement && ma.nd_sbp == mb.nd_sbp;
}

bool SameView(const Tensor& a, const Tensor& b) {
  if (a.is_global() != b.is_global() || a.shape() != b.shape() || a.dtype() != b.dtype()) {
    return false;
  }
  if (a.is_global()) {
    const global::GlobalMeta& ma = global::Meta(a);
    const global::GlobalMeta& mb = global::Meta(b);
    return ma.placement == mb.placement && ma.nd_sbp == mb.nd_sbp &&
           ma.local.strides() == mb.local.strides() && ma.local.offset() == mb.local.offset();
  }
  return a.strides() == b.strides() && a.offset() == b.offset();
}

std::vector<Tensor> RunOp(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  for (const Tensor& t : inputs) {
    if (t.is_global() && GetGlobalHooks().interpret) {
      return GetGlobalHooks().interpret(op, inputs, attrs);
    }
  }
  return RunLocalKernel(op, inputs, attrs);
}

}  // namespace

// A guard's flag: true when its (one) element is zero. A host read (a device sync on CUDA).
bool GraphPlan::FlagIsZero(const Tensor& flag) {
  const Tensor& t = flag.is_global() ? global::Meta(flag).local : flag;
  Tensor h = fn::to_dtype(fn::to_device(fn::contiguous(t), Device::CPU()), DType::kFloat64);
  return *h.data<double>() == 0.0;
}

GraphPlan::GraphPlan(std::string graph_name) : graph_name_(std::move(graph_name)) {}

GraphPlan::~GraphPlan() {
  if (tracing_ && CurrentTracer() == this) SetTracer(nullptr);
}

void GraphPlan::EnableCudaGraph(bool on) {
  cuda_graph_ = on;
  if (!on) cuda_graph_replay_.reset();
}

int GraphPlan::CudaIndex() const {
  int index = -1;
  auto see = [&](bool global, const Device& d) {
    if (global || d.type != DeviceType::kCUDA || (index >= 0 && index != d.index)) return false;
    index = d.index;
    return true;
  };
  for (const Signature& s : signature_) {
    if (!see(s.global, s.meta.device)) return -1;
  }
  for (const auto& c : captured_) {
    // Host tensors the plan holds (Python numbers made tensors) are read by host steps only.
    if (!c.second.is_global() && c.second.is_cpu()) continue;
    if (!see(c.second.is_global(), c.second.is_global() ? Device::CPU() : c.second.device())) {
      return -1;
    }
  }
  return index;
}

std::string GraphPlan::CudaGraphStatus() const {
  if (!cuda_graph_) return "cuda graph: off (config.enable_cuda_graph(True) turns it on)";
  if (!cuda_graph_fallback_.empty()) return "cuda graph: plain replay: " + cuda_graph_fallback_;
  if (cuda_graph_replay_) return cuda_graph_replay_->Describe();
  return "cuda graph: on; the replay after the first captures";
}

void GraphPlan::CheckTracing(const char* what) const {
  ONEFLOW_CHECK(tracing_, "nn.Graph ", graph_name_, ": ", what, " outside a trace");
}

void GraphPlan::BeginTrace(const std::vector<Tensor>& inputs) {
  ONEFLOW_CHECK(!tracing_ && !compiled_, "nn.Graph ", graph_name_,
                ": a plan is traced once; make a new one");
  ONEFLOW_CHECK(CurrentTracer() == nullptr, "nn.Graph ", graph_name_,
                ": cannot compile inside another graph's build");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    signature_.push_back({t.meta(), t.is_global(), t.is_global() ? Layout(t) : std::string()});
    if (slot_of_.count(t.impl())) {  // the same tensor passed twice
      input_slots_.push_back(slot_of_[t.impl()]);
      continue;
    }
    int s = NewSlot(t);
    slot_origin_[s] = StrCat("graph input ", i);
    input_slots_.push_back(s);
  }
  tracing_ = true;
  SetTracer(this);
}

void GraphPlan::AbortTrace() {
  if (CurrentTracer() == this) SetTracer(nullptr);
  tracing_ = false;
  keep_.clear();
  slot_tensor_.clear();
  slot_of_.clear();
  storage_slot_.clear();
  slot_storage_.clear();
  slot_bytes_.clear();
  draws_at_.clear();
  guards_.clear();
}

void GraphPlan::PauseTrace() {
  CheckTracing("PauseTrace");
  ONEFLOW_CHECK(CurrentTracer() == this, "nn.Graph ", graph_name_, ": the trace is paused already");
  SetTracer(nullptr);
}

void GraphPlan::ResumeTrace() {
  CheckTracing("ResumeTrace");
  ONEFLOW_CHECK(CurrentTracer() == nullptr, "nn.Graph ", graph_name_,
                ": ResumeTrace while another trace runs");
  SetTracer(this);
}

int GraphPlan::StorageSlot(const Storage* storage) const {
  if (!storage) return -1;
  auto it = storage_slot_.find(storage);
  // The slot's tensor may have moved to other memory since (an in-place write that replaced
  // it): then the address may belong to another storage now.
  if (it == storage_slot_.end() || StorageOf(slot_tensor_[it->second]) != storage) return -1;
  return it->second;
}

int GraphPlan::NewSlot(const Tensor& t) {
  int s = num_slots_++;
  slot_tensor_.push_back(t);
  slot_of_[t.impl()] = s;
  const Storage* storage = StorageOf(t);
  if (storage && StorageSlot(storage) < 0) storage_slot_[storage] = s;
  slot_origin_.emplace_back();
  slot_storage_.push_back(storage);
  slot_bytes_.push_back(storage ? storage->nbytes() : 0);
  return s;
}

int GraphPlan::SlotOf(const Tensor& t, const std::string& reader) {
  auto it = slot_of_.find(t.impl());
  if (it != slot_of_.end()) return it->second;
  // Not made by a traced step: a handle made without an op call (detach) on a traced tensor's
  // memory, or state from outside (a parameter, a buffer, an optimizer's state, a constant).
  const Storage* storage = StorageOf(t);
  if (const int base = StorageSlot(storage); base >= 0) {
    const Tensor& b = slot_tensor_[base];
    if (SameView(b, t)) {
      keep_.push_back(t);
      slot_of_[t.impl()] = base;
      return base;
    }
    if (!t.is_global() && !b.is_global()) {
      Step view;
      view.name = "view";
      view.scope = scope_;
      Shape shape = t.shape();
      std::vector<int64_t> strides = t.strides();
      int64_t offset = t.offset();
      view.fn = [shape, strides, offset](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{Tensor::MakeView(in[0], shape, strides, offset)};
      };
      Record(std::move(view), {b}, {t});
      return slot_of_.at(t.impl());
    }
    throw Error(StrCat("nn.Graph ", graph_name_, ": ", reader, " reads a tensor that shares ",
                       "memory with ", slot_origin_[base], " but was made without an op call; ",
                       "a compiled graph cannot replay it"));
  }
  int s = NewSlot(t);
  captured_.emplace_back(s, t);
  slot_origin_[s] = "captured";
  return s;
}

void GraphPlan::Record(Step step, const std::vector<Tensor>& inputs,
                       const std::vector<Tensor>& outputs) {
  const std::string reader = StrCat(step.op ? "op '" : "step '", step.name, "' in module '",
                                    step.scope.empty() ? "<graph>" : step.scope, "'");
  for (const Tensor& t : inputs) step.in.push_back(t.defined() ? SlotOf(t, reader) : -1);
  bool global = false, host = false;
  for (const auto* list : {&inputs, &outputs}) {
    for (const Tensor& t : *list) {
      if (!t.defined()) continue;
      global |= t.is_global();
      host |= !t.is_global() && t.device().type != DeviceType::kCUDA;
    }
  }
  if (global) {
    step.no_capture = "works on global tensors (their collectives are not captured yet)";
  } else if (host) {
    step.no_capture = "uses a tensor on the host (a copy between host and device)";
  }
  if (global) {
    std::ostringstream os;
    os << "(";
    for (size_t i = 0; i < inputs.size(); ++i) os << (i ? ", " : "") << SbpText(inputs[i]);
    os << ") -> ";
    if (outputs.size() != 1) os << "(";
    for (size_t i = 0; i < outputs.size(); ++i) os << (i ? ", " : "") << SbpText(outputs[i]);
    if (outputs.size() != 1) os << ")";
    step.layout = step.layout.empty() ? os.str() : os.str() + "  " + step.layout;
  }
  const size_t index = steps_.size();
  for (const Tensor& t : outputs) {
    if (!t.defined()) {
      step.out.push_back(-1);
      continue;
    }
    auto it = slot_of_.find(t.impl());
    // An in-place op returns its input: the same slot holds the written tensor.
    int s = it != slot_of_.end() ? it->second : NewSlot(t);
    if (it == slot_of_.end()) {
      slot_origin_[s] = StrCat(step.op ? "op '" : "step '", step.name, "' (step ", index, ")",
                               step.scope.empty() ? "" : StrCat(" in module '", step.scope, "'"));
    }
    step.out.push_back(s);
  }
  steps_.push_back(std::move(step));
}

void GraphPlan::OnOp(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                     const std::vector<Tensor>& outputs) {
  Step step;
  step.op = &op;
  step.name = op.name;
  step.scope = scope_;
  step.attrs = attrs;
  // A random op's counters were reserved just before the call: the replay reserves as many
  // again, so every replay draws new numbers, in eager's order.
  if (attrs.Has("seed") && attrs.Has("offset")) {
    // generator_advance(n) reserves 2n counters (normal draws take two per element).
    const uint64_t now = fn::generator_state().second;
    step.draws =
        static_cast<int64_t>((now - static_cast<uint64_t>(attrs.Get<int64_t>("offset"))) / 2);
    const std::pair<int64_t, int64_t> key(attrs.Get<int64_t>("seed"), attrs.Get<int64_t>("offset"));
    auto same = std::find_if(draws_at_.begin(), draws_at_.end(),
                             [&](const auto& d) { return d.first == key; });
    // Only a draw of the same size at the same counters is a redraw (an op over no elements
    // leaves the counters where the next op starts).
    if (same != draws_at_.end() && step.draws > 0 && steps_[same->second].draws == step.draws) {
      step.same_draws_as = same->second;
    } else if (same == draws_at_.end() && step.draws > 0) {
      draws_at_.emplace_back(key, static_cast<int>(steps_.size()));
    }
  }
  if (global::LastDecision() && step.layout.empty()) {
    for (const Tensor& t : inputs) {
      if (!t.defined() || !t.is_global()) continue;
      // The signature deduction chose, and the boxing of each input it needs.
      const global::Decision& d = *global::LastDecision();
      step.layout = "deduced " + d.deduction.ToString();
      for (size_t i = 0; i < d.plans.size(); ++i) {
        if (!d.plans[i] || d.plans[i]->steps.empty()) continue;
        std::string text = d.plans[i]->ToString();
        std::replace(text.begin(), text.end(), '\n', ';');
        step.layout += StrCat(", boxing input ", i, ": ", text);
      }
      break;
    }
  }
  if (op.name == "copy" && inputs.size() == 1 && outputs.size() == 1) {
    const Tensor& x = inputs[0].is_global() ? global::Meta(inputs[0]).local : inputs[0];
    step.copy_of_contiguous =
        x.is_contiguous() && x.offset() == 0 && inputs[0].dtype() == outputs[0].dtype() &&
        inputs[0].shape() == outputs[0].shape() && SameLayout(inputs[0], outputs[0]);
  }
  Record(std::move(step), inputs, outputs);
}

void GraphPlan::OnStep(const char* name, const std::vector<Tensor>& inputs,
                       const std::vector<Tensor>& outputs, StepFn replay) {
  Step step;
  step.name = name;
  step.scope = scope_;
  step.fn = std::move(replay);
  Record(std::move(step), inputs, outputs);
}

void GraphPlan::OnHostAccess(const Tensor& t) {
  auto it = slot_of_.find(t.impl());
  int slot = it != slot_of_.end() ? it->second : -1;
  if (slot < 0) {  // a view or a global tensor's shard: its memory tells
    slot = StorageSlot(t.storage().get());
  }
  if (slot < 0 || slot_origin_[slot] == "captured") return;
  throw Error(StrCat("nn.Graph ", graph_name_, ": module '", scope_.empty() ? "<graph>" : scope_,
                     "' reads the data of ", slot_origin_[slot],
                     " on the host (a data-dependent shape or value: nonzero, boolean indexing, ",
                     "a Python number from a tensor); a compiled graph replays without Python ",
                     "and cannot depend on tensor values"));
}

void GraphPlan::GuardSteps(size_t begin, size_t end, const Tensor& flag) {
  CheckTracing("GuardSteps");
  ONEFLOW_CHECK(begin <= end && end <= steps_.size(), "nn.Graph ", graph_name_,
                ": GuardSteps got steps [", begin, ", ", end, ") of ", steps_.size());
  ONEFLOW_CHECK(guards_.empty() || guards_.back().end <= begin, "nn.Graph ", graph_name_,
                ": guarded steps [", begin, ", ", end, ") overlap the guard of steps [",
                guards_.empty() ? 0 : guards_.back().begin, ", ",
                guards_.empty() ? 0 : guards_.back().end, ")");
  ONEFLOW_CHECK(flag.numel() == 1, "nn.Graph ", graph_name_,
                ": a guard's flag must have one element, got shape ", flag.shape());
  auto it = slot_of_.find(flag.impl());
  ONEFLOW_CHECK(it != slot_of_.end() && slot_origin_[it->second] != "captured", "nn.Graph ",
                graph_name_, ": a guard's flag must be made in build");
  for (size_t i = begin; i < end; ++i) {
    for (int s : steps_[i].out) {
      ONEFLOW_CHECK(s != it->second, "nn.Graph ", graph_name_,
                    ": a guard's flag is written by the steps it guards (step ", i, ")");
    }
  }
  guards_.push_back({begin, end, it->second});
}

bool GraphPlan::GuardRan(size_t i) const {
  ONEFLOW_CHECK(i < guards_.size(), "nn.Graph ", graph_name_, ": no guard ", i);
  return guards_[i].ran;
}

bool GraphPlan::Traced(const Tensor& t) const {
  auto it = slot_of_.find(t.impl());
  if (it == slot_of_.end()) return false;
  return slot_origin_[it->second] != "captured";
}

std::string GraphPlan::ProducerOf(const Tensor& t) const {
  auto it = slot_of_.find(t.impl());
  return it == slot_of_.end() ? std::string("a tensor from outside") : slot_origin_[it->second];
}

void GraphPlan::EndTrace(const std::vector<Tensor>& outputs) {
  CheckTracing("EndTrace");
  SetTracer(nullptr);
  for (const Tensor& t : outputs) output_slots_.push_back(SlotOf(t, "the graph's output"));
  PlanPasses::Run(*this);
  // Each slot is dropped after its last reader; outputs and captured state stay.
  std::vector<int> last(num_slots_, -1), defined(num_slots_, -1);
  std::vector<bool> keep(num_slots_, false);
  for (int s : output_slots_) keep[s] = true;
  for (const auto& c : captured_) keep[c.first] = true;
  for (size_t i = 0; i < steps_.size(); ++i) {
    for (int s : steps_[i].in) {
      if (s >= 0) last[s] = static_cast<int>(i);
    }
    for (int s : steps_[i].out) {
      if (s >= 0 && defined[s] < 0) defined[s] = static_cast<int>(i);
    }
  }
  for (const Guard& g : guards_) {  // the replay reads each flag just before its guarded steps
    if (g.begin < steps_.size()) {
      last[g.flag] = std::max(last[g.flag], static_cast<int>(g.begin));
    } else {
      keep[g.flag] = true;
    }
  }
  std::unordered_map<const Storage*, int> sharing;  // slots per storage
  for (const Storage* st : slot_storage_) {
    if (st) ++sharing[st];
  }
  std::vector<bool> is_input(num_slots_, false);
  for (int s : input_slots_) is_input[s] = true;
  for (size_t i = 0; i < steps_.size(); ++i) {
    Step& step = steps_[i];
    if (!step.copy_of_contiguous) continue;
    const int in = step.in[0], out = step.out[0];
    // Passing the input on is a copy only when no other slot can see its memory.
    const bool alone = slot_storage_[in] && sharing[slot_storage_[in]] == 1;
    if (alone && last[in] == static_cast<int>(i) && !keep[in] && !is_input[in] &&
        defined[out] == static_cast<int>(i)) {
      step.alias = true;
    }
  }
  for (int s = 0; s < num_slots_; ++s) {
    if (keep[s]) continue;
    int at = std::max(last[s], defined[s]);
    if (at >= 0) steps_[at].free_after.push_back(s);
  }
  std::vector<bool> outside(num_slots_, false);  // not made by a step: inputs, captured state
  for (int s : input_slots_) outside[s] = true;
  for (const auto& c : captured_) outside[c.first] = true;
  for (const Guard& g : guards_) {
    for (int s = 0; s < num_slots_; ++s) {
      if (outside[s]) continue;  // written in place by guarded steps: the write is skipped
      const int d = defined[s];
      if (d < static_cast<int>(g.begin) || d >= static_cast<int>(g.end)) continue;
      ONEFLOW_CHECK(!keep[s] && last[s] < static_cast<int>(g.end), "nn.Graph ", graph_name_, ": ",
                    slot_origin_[s], " is made by guarded steps (which a replay may skip) ",
                    "but read after them");
    }
  }
  // Live intermediates and the bytes of their buffers (a buffer counts while any slot on it
  // lives: a view and its base share one).
  size_t live = 0, bytes = 0;
  std::unordered_map<const Storage*, int> holders;
  std::unordered_set<const Storage*> state;  // memory of inputs, outputs and captured state
  for (int s = 0; s < num_slots_; ++s) {
    if ((keep[s] || outside[s]) && slot_storage_[s]) state.insert(slot_storage_[s]);
  }
  auto hold = [&](int s, int delta) {
    const Storage* st = slot_storage_[s];
    if (!st || state.count(st)) return;  // a view of a parameter (w.T) holds no new memory
    int& n = holders[st];
    if (n == 0 && delta > 0) bytes += slot_bytes_[s];
    n += delta;
    if (n == 0 && delta < 0) bytes -= slot_bytes_[s];
  };
  std::vector<bool> counted(num_slots_, false);
  for (const Step& step : steps_) {
    for (int s : step.out) {
      if (s < 0 || defined[s] < 0 || keep[s] || counted[s]) continue;
      counted[s] = true;
      ++live;
      hold(s, +1);
    }
    peak_live_ = std::max(peak_live_, live);
    peak_bytes_ = std::max(peak_bytes_, bytes);
    for (int s : step.free_after) {
      if (!counted[s]) continue;
      --live;
      hold(s, -1);
    }
  }
  tracing_ = false;
  compiled_ = true;
  keep_.clear();
  slot_tensor_.clear();
  slot_of_.clear();
  storage_slot_.clear();
  slot_storage_.clear();
  slot_bytes_.clear();
  draws_at_.clear();
}

bool GraphPlan::Matches(const std::vector<Tensor>& inputs) const {
  if (inputs.size() != signature_.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const Signature& s = signature_[i];
    if (t.shape() != s.meta.shape || t.dtype() != s.meta.dtype || t.is_global() != s.global) {
      return false;
    }
    if (s.global ? Layout(t) != s.layout : t.device() != s.meta.device) return false;
  }
  return true;
}

std::vector<Tensor> GraphPlan::Replay(const std::vector<Tensor>& inputs) {
  ONEFLOW_CHECK(compiled_, "nn.Graph ", graph_name_, ": replay before the graph was compiled");
  ONEFLOW_CHECK(inputs.size() == input_slots_.size(), "nn.Graph ", graph_name_, ": expected ",
                input_slots_.size(), " tensor inputs, got ", inputs.size());
  if (cuda_graph_ && cuda_graph_fallback_.empty()) {
    if (cuda_graph_replay_ && cuda_graph_replay_->captured()) {
      return cuda_graph_replay_->Run(inputs);
    }
    if (plain_replays_ >= 1) {  // warm: the libraries' handles and workspaces exist
      if (!cuda_graph_replay_) {
        const std::string why = CudaGraphReplay::Refusal(*this);
        if (!why.empty()) {
          cuda_graph_fallback_ = why;
          return PlainReplay(inputs);
        }
        cuda_graph_replay_ = std::make_unique<CudaGraphReplay>(*this);
      }
      return cuda_graph_replay_->Capture(inputs);
    }
  }
  return PlainReplay(inputs);
}

std::vector<Tensor> GraphPlan::RunStep(size_t i, const std::vector<Tensor>& in,
                                       std::vector<int64_t>& offsets, bool redraw) const {
  const Step& step = steps_[i];
  profiler::Range prof(profiler::Kind::kGraphStep, step.name);
  std::vector<Tensor> out;
  if (step.alias) {
    out.assign(1, in[0]);
  } else if (step.fn) {  // a step replayed by fn, or an op a pass replaced (passes.h)
    out = step.fn(in);
  } else if (step.draws >= 0) {
    Attrs a = step.attrs;
    a.Set("seed", static_cast<int64_t>(fn::initial_seed()));
    if (step.same_draws_as >= 0) {
      offsets[i] = offsets[step.same_draws_as];
    } else if (redraw) {
      offsets[i] = static_cast<int64_t>(fn::generator_advance(step.draws));
    }
    a.Set("offset", offsets[i]);
    out = RunOp(*step.op, in, a);
  } else {
    out = RunOp(*step.op, in, step.attrs);
  }
  ONEFLOW_CHECK(out.size() == step.out.size(), "nn.Graph ", graph_name_, ": replaying '", step.name,
                "' gave ", out.size(), " outputs, the trace had ", step.out.size());
  return out;
}

std::vector<Tensor> GraphPlan::PlainReplay(const std::vector<Tensor>& inputs) {
  ++plain_replays_;
  profiler::Range prof_replay(profiler::Kind::kGraphStep, graph_name_);
  NoGradGuard no_grad;
  AutocastSuspendGuard no_autocast;
  TraceSuspend no_trace;
  std::vector<Tensor> v(num_slots_);
  for (size_t i = 0; i < inputs.size(); ++i) v[input_slots_[i]] = inputs[i];
  for (const auto& c : captured_) v[c.first] = c.second;
  std::vector<Tensor> in, out;
  std::vector<int64_t> offsets(steps_.size(), 0);  // each random step's offset this replay
  size_t next_guard = 0;
  for (size_t i = 0; i < steps_.size(); ++i) {
    bool skip = false;
    while (!skip && next_guard < guards_.size() && guards_[next_guard].begin == i) {
      Guard& g = guards_[next_guard++];
      g.ran = FlagIsZero(v[g.flag]);
      if (!g.ran && g.end > g.begin) {
        for (size_t k = g.begin; k < g.end; ++k) {
          for (int s : steps_[k].free_after) v[s] = Tensor();
        }
        i = g.end - 1;  // the loop's ++i goes on after the guarded steps
        skip = true;
      }
    }
    if (skip) continue;
    const Step& step = steps_[i];
    in.clear();
    for (int s : step.in) in.push_back(s >= 0 ? v[s] : Tensor());
    out = RunStep(i, in, offsets);
    for (size_t k = 0; k < out.size(); ++k) {
      if (step.out[k] >= 0) v[step.out[k]] = std::move(out[k]);
    }
    for (int s : step.free_after) v[s] = Tensor();
  }
  std::vector<Tensor> result;
  result.reserve(output_slots_.size());
  for (int s : output_slots_) result.push_back(v[s]);
  return result;
}

std::string GraphPlan::StepName(size_t i) const {
  ONEFLOW_CHECK(i < steps_.size(), "nn.Graph ", graph_name_, ": no step ", i);
  return steps_[i].name;
}

const std::pair<const char*, AttrValue>& GraphPlan::NumericAttr(size_t i,
                                                                const std::string& name) const {
  ONEFLOW_CHECK(i < steps_.size() && steps_[i].op, "nn.Graph ", graph_name_, ": step ", i,
                " is not an op call");
  for (const auto& kv : steps_[i].attrs.items()) {
    if (name != kv.first) continue;
    const AttrValue& v = kv.second;
    if (!std::holds_alternative<double>(v) && !std::holds_alternative<int64_t>(v) &&
        !std::holds_alternative<bool>(v)) {
      throw Error(StrCat("nn.Graph ", graph_name_, ": attr '", name, "' of '", steps_[i].name,
                         "' is not a number"));
    }
    return kv;
  }
  throw Error(
      StrCat("nn.Graph ", graph_name_, ": op '", steps_[i].name, "' has no attr '", name, "'"));
}

void GraphPlan::SetAttr(size_t i, const std::string& name, double value) {
  const auto& [key, old] = NumericAttr(i, name);  // key: the registered literal (kept by pointer)
  Attrs& attrs = steps_[i].attrs;
  if (std::holds_alternative<double>(old)) {
    attrs.Set(key, value);
  } else if (std::holds_alternative<int64_t>(old)) {
    attrs.Set(key, static_cast<int64_t>(value));
  } else {
    attrs.Set(key, value != 0);
  }
}

double GraphPlan::GetAttr(size_t i, const std::string& name) const {
  const AttrValue& v = NumericAttr(i, name).second;
  if (const double* d = std::get_if<double>(&v)) return *d;
  if (const int64_t* n = std::get_if<int64_t>(&v)) return static_cast<double>(*n);
  return std::get<bool>(v) ? 1.0 : 0.0;
}

std::string GraphPlan::Describe() const {
  std::ostringstream os;
  for (size_t i = 0; i < input_slots_.size(); ++i) {
    const Signature& s = signature_[i];
    os << "%" << input_slots_[i] << " = input " << i << ": " << s.meta.shape.ToString() << " "
       << DTypeName(s.meta.dtype) << " " << (s.global ? s.layout : s.meta.device.ToString())
       << "\n";
  }
  for (const auto& c : captured_) {
    os << "%" << c.first << " = " << slot_origin_[c.first] << ": " << c.second.shape().ToString()
       << " " << DTypeName(c.second.dtype()) << " " << Layout(c.second) << "\n";
  }
  size_t next_guard = 0;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& step = steps_[i];
    for (; next_guard < guards_.size() && guards_[next_guard].begin == i; ++next_guard) {
      const Guard& g = guards_[next_guard];
      os << "if %" << g.flag << " == 0, the next " << g.end - g.begin << " steps, else none:\n";
    }
    std::ostringstream outs, ins;
    for (size_t k = 0; k < step.out.size(); ++k) outs << (k ? ", " : "") << "%" << step.out[k];
    for (size_t k = 0; k < step.in.size(); ++k) ins << (k ? ", " : "") << "%" << step.in[k];
    os << (step.out.empty() ? std::string() : outs.str() + " = ") << step.name << "(" << ins.str()
       << ")";
    if (step.alias) os << "  (elided: its input is not read again)";
    if (step.same_draws_as >= 0) os << "  (redraws step " << step.same_draws_as << ")";
    if (!step.scope.empty()) os << "  [" << step.scope << "]";
    if (!step.layout.empty()) os << "  " << step.layout;
    os << "\n";
  }
  os << "outputs:";
  for (int s : output_slots_) os << " %" << s;
  return os.str();
}

}  // namespace graph
}  // namespace oneflow
