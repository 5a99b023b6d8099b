#include "core/cuda_graph.h"

#include "core/autocast.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "core/functional.h"
#include "core/ops/random_state.h"

namespace oneflow {

namespace {

const CudaGraphRuntime* g_runtime = nullptr;
thread_local CudaGraph* t_capture = nullptr;

// Checks, and on the stand-in device records, what an eager capture runs (every op call and
// step reported by core/trace.h).
class CaptureTracer : public Tracer {
 public:
  CaptureTracer(CudaGraph* graph, int index)
      : graph_(graph), device_(Device::CUDA(index)), record_(CudaGraph::CaptureRuns()) {}

  void OnOp(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
            const std::vector<Tensor>& outputs) override {
    const std::string what = StrCat("op '", op.name, "'");
    if (HostOnly(inputs, outputs)) return;  // host work (a host tensor made): not captured
    Check(what, inputs, outputs);
    if (!record_) return;
    const OpDef* def = &op;
    Attrs a = attrs;
    graph_->Record({op.name,
                    [def, a](const std::vector<Tensor>& in) { return RunLocalKernel(*def, in, a); },
                    FixedHandles(inputs), FixedHandles(outputs)});
  }

  void OnStep(const char* name, const std::vector<Tensor>& inputs,
              const std::vector<Tensor>& outputs, StepFn replay) override {
    if (HostOnly(inputs, outputs)) return;  // a Python number made a host tensor: not captured
    Check(StrCat("step '", name, "'"), inputs, outputs);
    if (record_) {
      graph_->Record({name, std::move(replay), FixedHandles(inputs), FixedHandles(outputs)});
    }
  }

  void OnHostAccess(const Tensor& t) override {
    if (t.device().type != DeviceType::kCUDA) return;
    throw Error(StrCat("cuda graph capture: host code reads or writes the memory of a ",
                       t.device().ToString(), " tensor of shape ", t.shape(),
                       " (.item(), .numpy(), printing, a tensor made from Python data); a ",
                       "captured graph cannot contain a host copy or a wait for the device"));
  }

 private:
  static bool HostOnly(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
    bool host = true;
    for (const auto* list : {&inputs, &outputs}) {
      for (const Tensor& t : *list) host &= !t.defined() || (!t.is_global() && t.is_cpu());
    }
    return host;
  }
  void Check(const std::string& what, const std::vector<Tensor>& inputs,
             const std::vector<Tensor>& outputs) const {
    for (const auto* list : {&inputs, &outputs}) {
      for (const Tensor& t : *list) {
        if (!t.defined()) continue;
        if (t.is_global()) {
          throw Error(StrCat("cuda graph capture: ", what, " takes a global tensor; capturing ",
                             "global tensors (their collectives) is not supported yet"));
        }
        if (t.device() == device_) continue;
        if (t.is_cpu() && list == &inputs) {
          throw Error(StrCat("cuda graph capture: ", what, " copies a cpu tensor to ",
                             device_.ToString(), " (a Python number or a host tensor made an ",
                             "operand); a captured graph cannot contain a host copy: make it a ",
                             "device tensor before the capture"));
        }
        if (t.is_cpu()) {
          throw Error(StrCat("cuda graph capture: ", what, " copies ", device_.ToString(),
                             " to the host; a captured graph cannot contain a host copy or a ",
                             "wait for the device"));
        }
        throw Error(StrCat("cuda graph capture: ", what, " uses a ", t.device().ToString(),
                           " tensor while capturing ", device_.ToString(),
                           "; a captured graph holds the work of one device"));
      }
    }
  }

  CudaGraph* graph_;
  Device device_;
  bool record_;
};

}  // namespace

void SetCudaGraphRuntime(const CudaGraphRuntime* runtime) { g_runtime = runtime; }

CachingAllocator& CudaAllocator() {
  auto* a = dynamic_cast<CachingAllocator*>(GetAllocator(DeviceType::kCUDA));
  ONEFLOW_CHECK(a, "cuda graph: the CUDA allocator is not the caching allocator");
  return *a;
}

Tensor FixedHandle(const Tensor& t) {
  ONEFLOW_CHECK(!t.is_global(), "cuda graph: a global tensor has no fixed memory of its own");
  auto impl = std::make_shared<TensorImpl>();
  const Storage& s = *t.storage();
  impl->storage = Storage::Borrow(s.data(), s.nbytes(), s.device(), nullptr);
  impl->shape = t.shape();
  impl->strides = t.strides();
  impl->offset = t.offset();
  impl->dtype = t.dtype();
  return Tensor(std::move(impl));
}

std::vector<Tensor> FixedHandles(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(t.defined() ? FixedHandle(t) : Tensor());
  return out;
}

bool SameMemory(const Tensor& a, const Tensor& b) {
  return a.storage()->data() == b.storage()->data() && a.offset() == b.offset() &&
         a.strides() == b.strides() && a.shape() == b.shape() && a.dtype() == b.dtype();
}

void Launch::Run() const {
  NoGradGuard no_grad;
  AutocastSuspendGuard no_autocast;
  TraceSuspend no_trace;
  std::vector<Tensor> results = run(inputs);
  for (size_t k = 0; k < results.size() && k < outputs.size(); ++k) {
    const Tensor &r = results[k], &o = outputs[k];
    if (!r.defined() || !o.defined() || SameMemory(r, o)) continue;
    fn::copy_(o, r);
  }
}

CudaGraph* CurrentCapture() { return t_capture; }

bool CudaGraph::CaptureRuns() { return FakeCuda(); }

CudaGraph::CudaGraph() = default;

CudaGraph::~CudaGraph() {
  try {
    Reset();
  } catch (...) {
    // A device in an error state: the graph's memory is lost with it.
  }
}

void CudaGraph::CaptureBegin(int index, PoolId pool, bool eager) {
  ONEFLOW_CHECK(!capturing_ && !captured_, "cuda graph: capture_begin on a graph that holds a ",
                capturing_ ? "running capture" : "capture already", "; call reset() first");
  ONEFLOW_CHECK(t_capture == nullptr,
                "cuda graph: capture_begin while another graph captures on this thread");
  ONEFLOW_CHECK(!eager || CurrentTracer() == nullptr,
                "cuda graph: cannot capture inside nn.Graph's build (a trace is running)");
  ONEFLOW_CHECK(CaptureRuns() || g_runtime, "cuda graph: this build has no CUDA support");
  CachingAllocator& a = CudaAllocator();
  if (pool == 0) {
    pool = a.NewPool(index);
  } else {
    a.RetainPool(index, pool);
  }
  if (eager) {
    // Random ops read the generator's seed and base from the device (kept by the graph when the
    // capture drew numbers): each replay then draws eager's next numbers. Made before the
    // capture: writing the state is a host copy, and its memory outlives the graph's pool.
    try {
      rng_ = std::make_unique<RngCapture>(Device::CUDA(index));
      rng_->Begin();
    } catch (...) {
      rng_.reset();
      a.ReleasePool(index, pool);
      throw;
    }
  }
  pool_ = pool;
  index_ = index;
  a.BeginAllocateToPool(index, pool_);
  if (!CaptureRuns()) {
    try {
      g_runtime->begin(index);
    } catch (...) {
      a.EndAllocateToPool(index, pool_);
      a.ReleasePool(index, pool_);
      pool_ = 0;
      if (rng_) rng_->End();
      rng_.reset();
      throw;
    }
  }
  if (eager) {
    tracer_ = std::make_unique<CaptureTracer>(this, index);
    SetTracer(tracer_.get());
  }
  t_capture = this;
  capturing_ = true;
}

void CudaGraph::CaptureEnd() {
  ONEFLOW_CHECK(capturing_, "cuda graph: capture_end without capture_begin");
  if (tracer_) {
    SetTracer(nullptr);
    tracer_.reset();
  }
  if (rng_) {
    rng_->End();
    if (rng_->draws() == 0) rng_.reset();
  }
  t_capture = nullptr;
  capturing_ = false;
  CudaAllocator().EndAllocateToPool(index_, pool_);
  if (!CaptureRuns()) {
    try {
      exec_ = g_runtime->end(index_);
    } catch (...) {
      Reset();
      throw;
    }
  }
  captured_ = true;
}

void CudaGraph::CaptureAbort() {
  if (!capturing_) return;
  if (tracer_) {
    SetTracer(nullptr);
    tracer_.reset();
  }
  if (rng_) {
    rng_->End();
    rng_.reset();
  }
  t_capture = nullptr;
  capturing_ = false;
  CudaAllocator().EndAllocateToPool(index_, pool_);
  if (!CaptureRuns() && g_runtime) g_runtime->abort(index_);
  launches_.clear();
  try {
    Reset();
  } catch (...) {
  }
}

void CudaGraph::Record(Launch launch) {
  ONEFLOW_CHECK(capturing_ && CaptureRuns(),
                "cuda graph: Record outside a capture on the stand-in device");
  launches_.push_back(std::move(launch));
}

void CudaGraph::Replay() {
  ONEFLOW_CHECK(captured_, "cuda graph: replay() before a capture ended");
  ONEFLOW_CHECK(t_capture == nullptr,
                "cuda graph: replay() inside another capture is not supported");
  if (rng_) rng_->PrepareReplay();  // the captured random ops draw eager's next numbers
  if (CaptureRuns()) {
    // The recorded ops read the moved base as the captured kernels do.
    if (rng_) rng_->BeginReplay();
    try {
      for (const Launch& l : launches_) l.Run();
    } catch (...) {
      if (rng_) rng_->End();
      throw;
    }
    if (rng_) rng_->End();
    return;
  }
  g_runtime->launch(exec_, index_);
}

void CudaGraph::Reset() {
  if (capturing_) {
    CaptureAbort();
    return;
  }
  launches_.clear();
  rng_.reset();
  captured_ = false;
  if (exec_) {
    void* exec = exec_;
    exec_ = nullptr;
    g_runtime->destroy(exec);
  }
  if (pool_) {
    const PoolId pool = pool_;
    pool_ = 0;
    CudaAllocator().ReleasePool(index_, pool);
  }
}

}  // namespace oneflow
