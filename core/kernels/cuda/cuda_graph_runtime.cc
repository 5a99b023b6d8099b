// The CUDA runtime calls behind core/cuda_graph.h on a GPU, thin: stream capture of the device's
// compute stream (thread-local mode: another thread's unsafe call does not spoil it), the
// graph instantiated when the capture ends, launched on the same stream.
#include <cuda_runtime.h>

#include "core/cuda_graph.h"
#include "core/kernels/cuda/cuda_util.h"

namespace oneflow {
namespace cuda {
namespace {

void Begin(int index) {
  cudaStream_t s = StreamFor(Device::CUDA(index));
  ONEFLOW_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
}

void* End(int index) {
  cudaStream_t s = StreamFor(Device::CUDA(index));
  cudaGraph_t graph = nullptr;
  ONEFLOW_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec = nullptr;
  cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);  // the executable graph keeps what it needs
  Check(err, "cudaGraphInstantiate");
  return exec;
}

void Abort(int index) {
  cudaStream_t s = StreamFor(Device::CUDA(index));
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(s, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
    cudaGraph_t graph = nullptr;
    cudaStreamEndCapture(s, &graph);  // fails for an invalidated capture; it ends either way
    if (graph) cudaGraphDestroy(graph);
  }
  cudaGetLastError();  // the failure that ended the capture is reported already
}

void LaunchGraph(void* exec, int index) {
  ONEFLOW_CUDA_CHECK(
      cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), StreamFor(Device::CUDA(index))));
}

void Destroy(void* exec) { cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec)); }

const CudaGraphRuntime kRuntime = {Begin, End, Abort, LaunchGraph, Destroy};

[[maybe_unused]] const bool g_installed = [] {
  SetCudaGraphRuntime(&kRuntime);
  return true;
}();

}  // namespace
}  // namespace cuda
}  // namespace oneflow
