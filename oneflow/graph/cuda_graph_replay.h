// nn.Graph's replay through CUDA graphs (config.enable_cuda_graph): one replay of the plan is
// captured, and later replays copy their inputs into the plan's fixed input buffers and launch
// what was captured. Random ops are captured too: while the replay captures, and during each later
// replay, an RngCapture (core/ops/random_state.h) is active, so their kernels read the
// generator's seed and base offset from a device tensor that each replay moves on (a device add,
// no host wait): every replay draws fresh numbers, the ones eager code would have drawn in its
// place. Steps a graph cannot hold (a copy between host and device) and the host reads of guards
// (the GradScaler's skip) split the capture: the runs of steps between them are graphs, and each
// such step runs on its own between them, on the same memory. Steps that only make constants (a
// Python number made a tensor on the host and copied to the device) run once, at the capture, and
// their buffers are kept. Everything the capture allocates comes from one private pool of the
// caching allocator, which the replay keeps until it is destroyed.
//
// Outputs are the same tensors on every replay and hold the latest replay's values (as with
// PyTorch's CUDA graphs): copy what must outlive the next replay.
//
//   // inside GraphPlan::Replay, after one plain replay:
//   CudaGraphReplay r(plan);
//   outputs = r.Capture(inputs);   // runs this replay, capturing it
//   outputs = r.Run(inputs2);      // later replays: copies and launches
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/cuda_graph.h"
#include "core/ops/random_state.h"
#include "oneflow/graph/plan.h"

namespace oneflow {
namespace graph {

class CudaGraphReplay {
 public:
  explicit CudaGraphReplay(GraphPlan& plan);
  ~CudaGraphReplay();
  CudaGraphReplay(const CudaGraphReplay&) = delete;
  CudaGraphReplay& operator=(const CudaGraphReplay&) = delete;

  // Why the plan cannot replay through CUDA graphs at all (empty when it can).
  static std::string Refusal(const GraphPlan& plan);

  // Runs one replay while capturing it. When the capture cannot be kept (a GradScaler skipped
  // the update during it: retried on the next replay; a capture that failed on the GPU: the
  // plan falls back to the plain replay for good, with the reason) the rest of this replay runs
  // plainly, with the same results.
  std::vector<Tensor> Capture(const std::vector<Tensor>& inputs);
  // A replay through what was captured. REQUIRES: captured().
  std::vector<Tensor> Run(const std::vector<Tensor>& inputs);
  bool captured() const { return captured_; }
  // "cuda graph: captured on cuda:0: 1 graph (steps 0-41), 1 launch per replay".
  std::string Describe() const;

 private:
  struct Item {
    std::unique_ptr<CudaGraph> graph;  // a captured run of steps [first, last) ...
    Launch launch;                     // ... or one step replayed on its own ...
    int guard = -1;                    // ... or a guard's host read of its flag
    Tensor flag;
    size_t skip_to = 0;  // a guard whose flag is not zero goes on at this item
    size_t first = 0, last = 0;
  };
  void Drop();

  GraphPlan& plan_;
  int index_;
  // Steps that make the same constant on every replay (a fill_ of a host tensor the plan holds,
  // its copy to the device): run once at the capture, their outputs kept in constants_.
  std::vector<bool> hoisted_;
  size_t num_hoisted_ = 0;
  std::vector<Tensor> constants_;
  PoolId pool_ = 0;
  std::vector<Item> items_;
  std::vector<Tensor> static_inputs_, static_outputs_;
  std::vector<int64_t> offsets_;  // each random step's offset in the captured replay
  // The random ops' device-side seed and base (set when the capture drew random numbers).
  std::unique_ptr<RngCapture> rng_;
  bool captured_ = false;
  int skipped_captures_ = 0;
};

}  // namespace graph
}  // namespace oneflow
