// A compiled nn.Graph: the op calls and steps that one traced call of the graph's build made
// (forward, backward and the optimizer's updates), with which graph inputs, captured tensors
// (parameters, buffers, optimizer state) and earlier outputs feed each one. Replay runs the list
// on new inputs without Python and without autograd, drops each intermediate after its last use,
// draws fresh random numbers, and sends global calls through the global interpreter.
//
//   GraphPlan plan("MyGraph");
//   plan.BeginTrace({x});            // installs itself as this thread's Tracer
//   Tensor y = fn::relu(fn::matmul(x, w));
//   plan.EndTrace({y});
//   std::vector<Tensor> out = plan.Replay({x2});   // x2: x's shape, dtype, device and layout
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/trace.h"

namespace oneflow {
namespace graph {

class CudaGraphReplay;

class GraphPlan : public Tracer {
 public:
  explicit GraphPlan(std::string graph_name);
  ~GraphPlan() override;

  // REQUIRES: no trace running on this thread.
  void BeginTrace(const std::vector<Tensor>& inputs);
  // outputs: what build returned; each must be a graph input, a captured tensor or the output
  // of a traced step.
  void EndTrace(const std::vector<Tensor>& outputs);
  // Stops tracing after an error in build; the plan stays unusable.
  void AbortTrace();

  // Stops reporting to this plan until ResumeTrace (host reads and bookkeeping between traced
  // steps that the replay must not redo).
  void PauseTrace();
  void ResumeTrace();

  // Whether EndTrace's passes may fold the optimizer's updates into the gradients' kernels
  // (nn.Graph's config.allow_fuse_model_update_ops; off by default, as in OneFlow).
  void SetFuseModelUpdates(bool on) { fuse_model_updates_ = on; }

  // Replays on a CUDA device through CUDA graphs (nn.Graph's config.enable_cuda_graph): the
  // first replay runs plainly (it warms the libraries up), the next captures the steps into
  // CUDA graphs (oneflow/graph/cuda_graph_replay.h), later ones launch them. Outputs are then
  // the same tensors on every replay, valid until the next one.
  void EnableCudaGraph(bool on);
  // One line on what the CUDA graph does for this plan: off, waiting, captured (which steps,
  // how many launches per replay, which steps run outside it and why), or the reason it fell
  // back to the plain replay.
  std::string CudaGraphStatus() const;

  // The module whose code runs now (names the steps in messages and in Describe).
  void SetScope(std::string scope) { scope_ = std::move(scope); }

  // True when inputs have the traced inputs' shapes, dtypes, devices and layouts.
  bool Matches(const std::vector<Tensor>& inputs) const;
  std::vector<Tensor> Replay(const std::vector<Tensor>& inputs);

  // A traced tensor: a graph input or a step's output (nullptr-free while tracing only).
  bool Traced(const Tensor& t) const;
  // What made t in the trace ("op 'matmul' in module 'model.0'", "graph input 0").
  std::string ProducerOf(const Tensor& t) const;

  size_t num_steps() const { return steps_.size(); }
  std::string StepName(size_t i) const;
  // Replaces attr `name` of step i (an optimizer's lr, step count) for later replays, keeping
  // the attr's type. Throws naming the step when it has no such attr.
  void SetAttr(size_t i, const std::string& name, double value);
  // Attr `name` of step i as a number (bools 0 or 1). Throws naming the step when it has none.
  double GetAttr(size_t i, const std::string& name) const;
  // One line per input and step: "%5 = matmul(%0, %3) [model.0]  (S(0), B) -> S(0)".
  std::string Describe() const;
  // The most intermediates the replay held at once (after the frees).
  size_t peak_live() const { return peak_live_; }
  // The most bytes of intermediates' memory the replay held at once (each buffer counted once,
  // however many views of it are live; the graph's inputs, outputs and captured state apart).
  size_t peak_bytes() const { return peak_bytes_; }

  // While tracing: the replay runs steps [begin, end) only when `flag` (a traced tensor with
  // one element, made before step begin) is zero, as GradScaler skips an update after inf or
  // NaN gradients. No tensor those steps make may be read after them or be an output.
  void GuardSteps(size_t begin, size_t end, const Tensor& flag);
  // After a replay: whether the guarded steps of guard i ran (true before any replay).
  bool GuardRan(size_t i) const;

  void OnOp(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
            const std::vector<Tensor>& outputs) override;
  void OnStep(const char* name, const std::vector<Tensor>& inputs,
              const std::vector<Tensor>& outputs, StepFn replay) override;
  // Throws when t is (a view of) a traced tensor: a data-dependent shape or value.
  void OnHostAccess(const Tensor& t) override;

 private:
  friend struct PlanPasses;  // oneflow/graph/passes.h rewrites the steps at EndTrace
  friend class CudaGraphReplay;

  struct Step {
    const OpDef* op = nullptr;  // null: a step replayed by fn (which a pass may give an op too)
    Attrs attrs;
    StepFn fn;
    std::string name, scope, layout;
    std::vector<int> in, out;
    std::vector<int> free_after;  // slots whose last use is this step
    int64_t draws = -1;           // random ops: counters drawn per call
    // A random op that redraws what an earlier one drew (activation checkpointing recomputes a
    // dropout with the random state of the forward): the replay gives it that step's offset.
    int same_draws_as = -1;
    // A contiguous copy of a tensor nothing reads afterwards (autograd's copy of a gradient
    // that the trace itself kept alive): the replay passes the input on instead.
    bool copy_of_contiguous = false, alias = false;
    // Why a CUDA graph cannot hold this step (empty when it can): it works on global tensors,
    // it moves data between devices.
    std::string no_capture;
  };
  struct Guard {
    size_t begin, end;
    int flag;
    bool ran = true;
  };
  struct Signature {
    TensorMeta meta;
    bool global = false;
    std::string layout;  // placement and nd_sbp of a global input
  };

  // Runs step i on its inputs. A random step reserves its counters from the generator and
  // notes their offset in offsets[i] (redraw), or reuses offsets[i] (a CUDA graph's replay of a
  // captured step: its RngCapture moved the base instead, random_state.h).
  std::vector<Tensor> RunStep(size_t i, const std::vector<Tensor>& in,
                              std::vector<int64_t>& offsets, bool redraw = true) const;
  std::vector<Tensor> PlainReplay(const std::vector<Tensor>& inputs);
  // A guard's flag (one element) is zero: a host read, a wait for the device on a GPU.
  static bool FlagIsZero(const Tensor& flag);
  // The CUDA device the plan computes on (-1: none, or several).
  int CudaIndex() const;

  // Step i's attr `name` (its registered key and value). Throws naming the step when step i is
  // no op call, has no such attr, or the attr is not a number.
  const std::pair<const char*, AttrValue>& NumericAttr(size_t i, const std::string& name) const;
  int NewSlot(const Tensor& t);
  int StorageSlot(const Storage* storage) const;  // the first live slot on it, or -1
  int SlotOf(const Tensor& t, const std::string& reader);
  void Record(Step step, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs);
  void CheckTracing(const char* what) const;

  std::string graph_name_, scope_;
  bool tracing_ = false, compiled_ = false, fuse_model_updates_ = false;
  int num_slots_ = 0;
  std::vector<Signature> signature_;
  std::vector<int> input_slots_, output_slots_;
  std::vector<std::pair<int, Tensor>> captured_;
  std::vector<Step> steps_;
  std::vector<std::string> slot_origin_;
  std::vector<const Storage*> slot_storage_;  // trace only: to see which slots share memory
  size_t peak_live_ = 0, peak_bytes_ = 0;
  std::vector<Guard> guards_;
  std::vector<size_t> slot_bytes_;  // each slot's buffer size (trace only)
  // Trace only: the step that drew each random offset (seed, offset) first.
  std::vector<std::pair<std::pair<int64_t, int64_t>, int>> draws_at_;
  // Trace only: each slot's tensor and other handles on them (kept alive so that no address
  // is reused), and the slot of each handle.
  std::vector<Tensor> slot_tensor_, keep_;
  std::unordered_map<const TensorImpl*, int> slot_of_;
  std::unordered_map<const Storage*, int> storage_slot_;
  // CUDA graphs: whether enabled, the plain replays so far, the captured replay.
  bool cuda_graph_ = false;
  size_t plain_replays_ = 0;
  std::unique_ptr<CudaGraphReplay> cuda_graph_replay_;
  std::string cuda_graph_fallback_;  // why the replay stays plain
};

}  // namespace graph
}  // namespace oneflow
