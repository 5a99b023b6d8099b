#include "oneflow/graph/cuda_graph_replay.h"

#include <sstream>

#include "core/autocast.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "core/functional.h"
#include "core/profiler.h"

namespace oneflow {
namespace graph {

namespace {

// This thread's allocations on one device go to a pool while it lives (or until End).
class Routing {
 public:
  Routing(CachingAllocator& a, int index, PoolId pool) : a_(a), index_(index), pool_(pool) {
    a_.BeginAllocateToPool(index_, pool_);
  }
  ~Routing() { End(); }
  void End() {
    if (pool_) a_.EndAllocateToPool(index_, pool_);
    pool_ = 0;
  }

 private:
  CachingAllocator& a_;
  int index_;
  PoolId pool_;
};

}  // namespace

CudaGraphReplay::CudaGraphReplay(GraphPlan& plan)
    : plan_(plan), index_(plan.CudaIndex()), hoisted_(plan.steps_.size(), false) {
  // Constants: a host tensor the plan holds (captured) and fills itself before any other use,
  // and what host steps (a copy to the device) make from constants only.
  const auto& steps = plan.steps_;
  std::vector<bool> host_captured(plan.num_slots_, false), constant(plan.num_slots_, false);
  for (const auto& c : plan.captured_) {
    host_captured[c.first] = !c.second.is_global() && c.second.is_cpu();
  }
  for (size_t k = 0; k < steps.size(); ++k) {
    const GraphPlan::Step& st = steps[k];
    const bool fill = st.name == "fill_" && st.fn && st.in.size() == 1 && st.out.empty() &&
                      st.in[0] >= 0 && host_captured[st.in[0]];
    const bool host = !st.no_capture.empty() && st.draws < 0 && st.layout.empty();
    if (!fill && !host) continue;
    bool ok = true;
    for (int s : st.in) ok &= s < 0 || constant[s] || (fill && s == st.in[0]);
    if (!ok) continue;
    hoisted_[k] = true;
    if (fill) constant[st.in[0]] = true;
    for (int s : st.out) {
      if (s >= 0) constant[s] = true;
    }
  }
  // A constant written again by a step that is not hoisted is no constant: hoist nothing then.
  for (size_t k = 0; k < steps.size(); ++k) {
    if (hoisted_[k]) continue;
    for (int s : steps[k].out) {
      if (s >= 0 && constant[s]) hoisted_.assign(steps.size(), false);
    }
  }
  for (bool h : hoisted_) num_hoisted_ += h;
}

CudaGraphReplay::~CudaGraphReplay() {
  try {
    Drop();
  } catch (...) {
    // A device in an error state: its memory is lost with it.
  }
}

void CudaGraphReplay::Drop() {
  items_.clear();  // the graphs first: they hold the pool too
  rng_.reset();
  static_inputs_.clear();
  constants_.clear();
  static_outputs_.clear();
  captured_ = false;
  if (pool_) {
    const PoolId pool = pool_;
    pool_ = 0;
    CudaAllocator().ReleasePool(index_, pool);
  }
}

std::string CudaGraphReplay::Refusal(const GraphPlan& plan) {
  if (plan.CudaIndex() < 0) {
    return "the graph does not compute on one CUDA device (its inputs and state are elsewhere, "
           "or global)";
  }
  bool any = false;
  for (size_t i = 0; i < plan.steps_.size(); ++i) {
    const GraphPlan::Step& s = plan.steps_[i];
    if (!s.layout.empty()) {  // set for steps on global tensors
      return StrCat("step ", i, " '", s.name, "' works on global tensors (their collectives are ",
                    "not captured yet)");
    }
    any |= s.no_capture.empty();
  }
  if (!any) return "no step of the plan can be captured";
  return std::string();
}

std::vector<Tensor> CudaGraphReplay::Capture(const std::vector<Tensor>& inputs) {
  GraphPlan& p = plan_;
  const bool runs = CudaGraph::CaptureRuns();
  profiler::Range prof_replay(profiler::Kind::kGraphStep, p.graph_name_);
  NoGradGuard no_grad;
  AutocastSuspendGuard no_autocast;
  TraceSuspend no_trace;
  Drop();
  CachingAllocator& a = CudaAllocator();
  pool_ = a.NewPool(index_);
  Routing routing(a, index_, pool_);
  bool capturing = true;  // false once this replay goes on plainly
  std::string failure;    // why a capture on the GPU failed
  auto stop = [&](bool for_good) {
    capturing = false;
    routing.End();
    items_.clear();
    if (for_good) p.cuda_graph_fallback_ = failure;
  };

  // The plan's fixed input buffers.
  std::vector<Tensor> v(p.num_slots_);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    Tensor fixed = Tensor::Empty(x.shape(), x.dtype(), x.device());
    fn::copy_(fixed, x);
    static_inputs_.push_back(fixed);
    v[p.input_slots_[i]] = fixed;
  }
  for (const auto& c : p.captured_) v[c.first] = c.second;
  offsets_.assign(p.steps_.size(), 0);
  for (size_t k = 0; k < p.steps_.size(); ++k) {  // the constants, before any capture
    if (!hoisted_[k]) continue;
    std::vector<Tensor> in;
    for (int s : p.steps_[k].in) in.push_back(s >= 0 ? v[s] : Tensor());
    std::vector<Tensor> out = p.RunStep(k, in, offsets_);
    for (size_t j = 0; j < out.size(); ++j) {
      if (p.steps_[k].out[j] < 0) continue;
      v[p.steps_[k].out[j]] = out[j];
      constants_.push_back(out[j]);
    }
  }

  // Random ops read their seed and base from rng's device tensor from here on (the draws equal
  // eager's); its memory is the default pool's (it outlives a failed capture's pool).
  std::unique_ptr<RngCapture> rng;
  {
    CachingAllocator::DefaultPoolScope eager(&a, index_);
    rng = std::make_unique<RngCapture>(Device::CUDA(index_));
  }
  rng->Begin();
  struct EndRng {  // on an error
    RngCapture* r;
    ~EndRng() {
      if (r) r->End();
    }
  } end_rng{rng.get()};

  std::unique_ptr<CudaGraph> open;
  size_t open_first = 0, open_guard = 0, next_guard = 0;
  std::vector<Tensor> snapshot;  // the slots when the open graph began (a failed capture redoes)
  std::vector<size_t> pending;   // guard items waiting for the end of their steps
  // A capture on the GPU failed (nothing of it ran): the plan keeps the plain replay from now
  // on, and this replay redoes the open graph's steps plainly, from the slots they began with.
  // Returns where the replay goes on. On the stand-in device the steps ran: rethrows.
  auto fail = [&](const std::string& what, const Error& e) -> size_t {
    open->CaptureAbort();
    open.reset();
    if (runs) throw e;  // a plain replay fails the same way
    failure = StrCat(what, " failed: ", e.what());
    stop(/*for_good=*/true);
    v = std::move(snapshot);
    next_guard = open_guard;
    return open_first;
  };
  const size_t kGoOn = static_cast<size_t>(-1);
  auto close = [&](size_t end) -> size_t {  // kGoOn, or where a failed capture redoes from
    if (!open) return kGoOn;
    try {
      open->CaptureEnd();
      if (!runs) open->Replay();  // a GPU's capture ran nothing: the steps after need its values
    } catch (const Error& e) {
      return fail(StrCat("capturing steps ", open_first, "-", end - 1), e);
    }
    Item item;
    item.graph = std::move(open);
    item.first = open_first;
    item.last = end;
    items_.push_back(std::move(item));
    snapshot.clear();
    return kGoOn;
  };
  auto end_guards = [&](size_t i) -> size_t {
    for (size_t k = 0; k < pending.size();) {
      if (p.guards_[items_[pending[k]].guard].end != i) {
        ++k;
        continue;
      }
      if (const size_t redo = close(i); redo != kGoOn) return redo;
      items_[pending[k]].skip_to = items_.size();
      pending.erase(pending.begin() + k);
    }
    return kGoOn;
  };

  std::vector<Tensor> in, out;
  for (size_t i = 0; i <= p.steps_.size(); ++i) {
    size_t redo = capturing ? end_guards(i) : kGoOn;
    if (redo == kGoOn && capturing && i == p.steps_.size()) redo = close(i);
    if (redo != kGoOn) {
      i = redo - 1;  // the loop's ++i goes on at redo
      continue;
    }
    if (i == p.steps_.size()) break;
    bool skip = false;
    while (!skip && next_guard < p.guards_.size() && p.guards_[next_guard].begin == i) {
      const size_t gi = next_guard;
      GraphPlan::Guard& g = p.guards_[gi];
      if (capturing) {
        if ((redo = close(i)) != kGoOn) break;
        Item item;
        item.guard = static_cast<int>(gi);
        item.flag = v[g.flag];
        items_.push_back(std::move(item));
        pending.push_back(items_.size() - 1);
        if (g.end == g.begin && (redo = end_guards(i)) != kGoOn) break;
      }
      ++next_guard;
      g.ran = GraphPlan::FlagIsZero(v[g.flag]);
      if (!g.ran && g.end > g.begin) {
        // The update is skipped on the replay that captures: its steps cannot be captured now
        // (the next replay tries again).
        if (capturing) {
          stop(/*for_good=*/false);
          if (++skipped_captures_ >= 3) {
            p.cuda_graph_fallback_ =
                "the GradScaler skipped the update on 3 replays that were to capture it";
          }
        }
        for (size_t k = g.begin; k < g.end; ++k) {
          for (int s : p.steps_[k].free_after) v[s] = Tensor();
        }
        i = g.end - 1;
        skip = true;
      }
    }
    if (redo != kGoOn) {
      i = redo - 1;
      continue;
    }
    if (skip) continue;
    if (capturing && hoisted_[i]) continue;  // ran before the capture
    const GraphPlan::Step& step = p.steps_[i];
    in.clear();
    for (int s : step.in) in.push_back(s >= 0 ? v[s] : Tensor());
    if (capturing && step.no_capture.empty()) {
      if (!open) {
        open = std::make_unique<CudaGraph>();
        open_first = i;
        open_guard = next_guard;
        if (!runs) snapshot = v;
        open->CaptureBegin(index_, pool_, /*eager=*/false);
      }
      try {
        out = p.RunStep(i, in, offsets_);
      } catch (const Error& e) {
        i = fail(StrCat("capturing step ", i, " '", step.name, "'"), e) - 1;
        continue;
      }
      if (runs) {
        GraphPlan* plan = &p;
        std::vector<int64_t>* offsets = &offsets_;
        open->Record({step.name,
                      [plan, i, offsets](const std::vector<Tensor>& x) {
                        return plan->RunStep(i, x, *offsets, /*redraw=*/false);
                      },
                      FixedHandles(in), FixedHandles(out)});
      }
    } else {
      if (capturing && (redo = close(i)) != kGoOn) {
        i = redo - 1;
        continue;
      }
      out = p.RunStep(i, in, offsets_);
      if (capturing) {
        GraphPlan* plan = &p;
        std::vector<int64_t>* offsets = &offsets_;
        Item item;
        // The tensors themselves (not fixed handles): their memory must stay theirs, and a host
        // tensor is in no pool.
        item.launch = {step.name,
                       [plan, i, offsets](const std::vector<Tensor>& x) {
                         return plan->RunStep(i, x, *offsets, /*redraw=*/false);
                       },
                       in, out};
        item.first = i;
        item.last = i + 1;
        items_.push_back(std::move(item));
      }
    }
    for (size_t k = 0; k < out.size(); ++k) {
      if (step.out[k] >= 0) v[step.out[k]] = std::move(out[k]);
    }
    for (int s : step.free_after) v[s] = Tensor();
  }
  std::vector<Tensor> result;
  for (int s : p.output_slots_) result.push_back(v[s]);
  end_rng.r = nullptr;
  rng->End();
  if (capturing) {
    static_outputs_ = result;
    captured_ = true;
    skipped_captures_ = 0;
    if (rng->draws() > 0) rng_ = std::move(rng);
  } else {
    static_inputs_.clear();
    if (pool_) {
      const PoolId pool = pool_;
      pool_ = 0;
      a.ReleasePool(index_, pool);  // its blocks return as this replay's tensors die
    }
  }
  return result;
}

std::vector<Tensor> CudaGraphReplay::Run(const std::vector<Tensor>& inputs) {
  GraphPlan& p = plan_;
  profiler::Range prof_replay(profiler::Kind::kGraphStep, p.graph_name_);
  NoGradGuard no_grad;
  AutocastSuspendGuard no_autocast;
  TraceSuspend no_trace;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!SameMemory(inputs[i], static_inputs_[i])) fn::copy_(static_inputs_[i], inputs[i]);
  }
  // The captured random ops draw what eager code would draw now: the base moves to the
  // generator's offset, which moves past them; the steps run outside the graphs (and on the
  // stand-in device, the graphs' own) read the same state.
  struct ReplayRng {
    RngCapture* r;
    explicit ReplayRng(RngCapture* rng) : r(rng) {
      if (!r) return;
      r->PrepareReplay();
      r->BeginReplay();
    }
    ~ReplayRng() {
      if (r) r->End();
    }
  } replay_rng(rng_.get());
  for (size_t k = 0; k < items_.size();) {
    Item& item = items_[k];
    if (item.graph) {
      item.graph->Replay();
    } else if (item.guard >= 0) {
      bool& ran = p.guards_[item.guard].ran;
      ran = GraphPlan::FlagIsZero(item.flag);
      if (!ran) {
        k = item.skip_to;
        continue;
      }
    } else {
      item.launch.Run();
    }
    ++k;
  }
  return static_outputs_;
}

std::string CudaGraphReplay::Describe() const {
  if (!captured_) return "cuda graph: on; the next replay captures";
  std::ostringstream graphs, outside;
  size_t num_graphs = 0, num_outside = 0, guards = 0;
  for (const Item& item : items_) {
    if (item.graph) {
      graphs << (num_graphs++ ? ", " : "") << item.first << "-" << item.last - 1;
    } else if (item.guard >= 0) {
      ++guards;
    } else {
      const GraphPlan::Step& s = plan_.steps_[item.first];
      outside << "; step " << item.first << " '" << s.name << "' " << s.no_capture;
      ++num_outside;
    }
  }
  std::ostringstream os;
  os << "cuda graph: captured on cuda:" << index_ << ": " << num_graphs
     << (num_graphs == 1 ? " graph" : " graphs") << " (steps " << graphs.str() << "), "
     << num_graphs + num_outside << (num_graphs + num_outside == 1 ? " launch" : " launches")
     << " per replay";
  if (num_hoisted_) {
    os << "; " << num_hoisted_ << (num_hoisted_ == 1 ? " step" : " steps")
       << " making constants (Python numbers as tensors) ran once, at the capture";
  }
  if (guards) {
    os << "; " << guards << (guards == 1 ? " guard reads its flag" : " guards read their flags")
       << " on the host (GradScaler's skip), which splits the capture";
  }
  if (num_outside) {
    os << "; " << num_outside << (num_outside == 1 ? " step runs" : " steps run")
       << " outside the graphs" << outside.str();
  }
  return os.str();
}

}  // namespace graph
}  // namespace oneflow
