// A CUDA graph: device work captured once and replayed with one launch (oneflow.cuda.CUDAGraph,
// and nn.Graph's enable_cuda_graph). Memory the captured work allocates comes from a private
// pool of the caching allocator (core/caching_allocator.h), so the addresses the graph was
// recorded with stay its own while it lives.
//
// On a GPU the capture is CUDA's stream capture of the device's compute stream, and the capture
// itself runs nothing: the work runs at each Replay. On the stand-in device (ONEFLOW_FAKE_CUDA=1)
// the kernels run on the host as they are captured, and the graph records each unit of work as
// a Launch: what to run on which fixed memory. Replay runs the launches again on that memory
// with every scalar argument as captured, so what a real graph would freeze (a learning rate
// passed as a number, a random op's offset) freezes here too, and tests see it.
//
//   CudaGraph g;
//   g.CaptureBegin(/*index=*/0, /*pool=*/0, /*eager=*/true);
//   Tensor y = fn::relu(x);          // x: a cuda tensor made before the capture
//   g.CaptureEnd();
//   g.Replay();                       // y holds relu(x) for x's current values
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/caching_allocator.h"
#include "core/trace.h"

namespace oneflow {

// The CUDA runtime calls a capture on a GPU needs, installed by the CUDA backend
// (core/kernels/cuda/cuda_graph_runtime.cc); none without CUDA or on the stand-in device.
struct CudaGraphRuntime {
  void (*begin)(int index);               // cudaStreamBeginCapture on the compute stream
  void* (*end)(int index);                // cudaStreamEndCapture + cudaGraphInstantiate
  void (*abort)(int index);               // ends a failed capture, never throws
  void (*launch)(void* exec, int index);  // cudaGraphLaunch on the compute stream
  void (*destroy)(void* exec);
};
void SetCudaGraphRuntime(const CudaGraphRuntime* runtime);

// The CUDA device type's caching allocator. Throws when it is not one.
CachingAllocator& CudaAllocator();

// A handle on t's memory that owns nothing (same shape, strides, offset and dtype): what a
// recorded launch reads and writes. REQUIRES: a local tensor.
Tensor FixedHandle(const Tensor& t);
// FixedHandle of each defined tensor (undefined ones stay undefined).
std::vector<Tensor> FixedHandles(const std::vector<Tensor>& ts);
// Whether a and b are the same view of the same memory.
bool SameMemory(const Tensor& a, const Tensor& b);

// One unit of recorded work: `run` redone on `inputs`; each result that is not already in the
// matching output's memory is copied there.
class RngCapture;  // core/ops/random_state.h

struct Launch {
  std::string name;
  StepFn run;
  std::vector<Tensor> inputs, outputs;  // fixed handles
  void Run() const;
};

class CudaGraph {
 public:
  CudaGraph();
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Begins capturing this thread's work on CUDA device `index`; its allocations come from
  // `pool` (0: a new private pool; else one from CudaAllocator().NewPool, shared). With
  // `eager`, every op call and step of this thread is checked (and recorded on the stand-in
  // device): a host read or write of device memory, a copy between devices and a global tensor
  // fail with one line naming it; random ops read the generator's state from the device, so each
  // replay draws the numbers eager code would draw in its place. REQUIRES: not captured yet.
  void CaptureBegin(int index, PoolId pool, bool eager);
  void CaptureEnd();
  // Ends a capture that failed: nothing is kept but the pool. Never throws.
  void CaptureAbort();
  // Stand-in device, while capturing: appends a launch (nn.Graph's plan records its steps).
  void Record(Launch launch);
  // Runs the captured work again. REQUIRES: captured.
  void Replay();
  // Drops the captured work and lets the pool go.
  void Reset();

  bool capturing() const { return capturing_; }
  bool captured() const { return captured_; }
  PoolId pool() const { return pool_; }
  int device_index() const { return index_; }
  // Launches recorded on the stand-in device.
  size_t num_launches() const { return launches_.size(); }
  // Whether a capture runs the work as it records it (the stand-in device) or only records it
  // (a GPU: the first Replay runs it).
  static bool CaptureRuns();

 private:
  int index_ = -1;
  PoolId pool_ = 0;
  bool capturing_ = false, captured_ = false;
  void* exec_ = nullptr;  // the instantiated graph on a GPU
  std::vector<Launch> launches_;
  std::unique_ptr<Tracer> tracer_;
  std::unique_ptr<RngCapture> rng_;  // an eager capture that drew random numbers
};

// The graph capturing on this thread (null when none).
CudaGraph* CurrentCapture();

}  // namespace oneflow
