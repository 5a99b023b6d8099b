// The CUDA backend's runtime: devices, the compute stream of each device, the caching
// allocator, and helpers every CUDA kernel file uses. Only compiled when the build has CUDA
// (ONEFLOW_WITH_CUDA); nothing here needs a GPU until a CUDA tensor is created.
//
//   cudaStream_t s = cuda::StreamFor(x.device());  // makes x's device current
//   MyKernel<<<cuda::Blocks(n), cuda::kThreads, 0, s>>>(...);
//   ONEFLOW_CUDA_CHECK(cudaGetLastError());
//
// Ordering: every kernel and copy of a device runs on its one compute stream, so the caching
// allocator may hand a freed block to the next op without synchronising. Work on other streams
// (NCCL's) orders itself against the compute stream with events (RecordOn / WaitOn).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace oneflow {
namespace cuda {

// Throws oneflow::Error("cuda: <what> failed: <error name>: <error string> (device N)").
void Check(cudaError_t err, const char* what);
#define ONEFLOW_CUDA_CHECK(expr) ::oneflow::cuda::Check((expr), #expr)

// Number of usable devices; 0 without a driver or a device (never throws).
int DeviceCount();
// Why DeviceCount() is 0, empty when it is not. One line that always ends with the driver's and
// the runtime's CUDA versions, "(driver 12.4 / runtime 13.0)"; a driver older than the runtime
// (the static CUDA 13 runtime needs driver >= 580) is named as the cause with its fix.
// With a device, cuBLAS and cuDNN must load too, else they are the reason, naming where they
// were looked for (cuda_libs.h).
std::string Unavailable();
// Throws "<op>: CUDA is not available (<why>)" without a device, and "<op>: invalid device
// ordinal N: this machine has M CUDA devices" unless device N exists.
void RequireDevice(int index, const char* op);

int CurrentDevice();
void SetDevice(int index);  // cheap when already current
// The compute stream of a CUDA device; also makes the device current. Created on first use.
cudaStream_t StreamFor(const Device& device);
// Waits for all work queued on the device's compute stream (WaitStream).
void Synchronize(int index);

// TF32 for float32 matmul and convolution (oneflow.backends.cuda.matmul.allow_tf32); off by
// default, as in PyTorch's matmul.
bool AllowTf32();
void SetAllowTf32(bool allow);
// TF32 for float32 convolutions (oneflow.backends.cudnn.allow_tf32); on by default, as in
// PyTorch.
bool AllowCudnnTf32();
void SetAllowCudnnTf32(bool allow);

// An event recorded on `stream`; WaitOn makes `stream` wait for it (no host blocking).
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void RecordOn(cudaStream_t stream);
  void WaitOn(cudaStream_t stream) const;
  void Synchronize() const;
  // True when the work before the record has finished (never blocks).
  bool Query() const;

 private:
  cudaEvent_t event_ = nullptr;
};

// One T per device (a library handle and its settings), created on first use and kept for the
// process's life: destroying handles at exit could run after the driver has shut down.
template <typename T>
T& PerDevice(int index) {
  static std::mutex mu;
  static auto* items = new std::vector<std::unique_ptr<T>>();
  std::lock_guard<std::mutex> lock(mu);
  if (static_cast<int>(items->size()) <= index) items->resize(index + 1);
  std::unique_ptr<T>& item = (*items)[index];
  if (!item) item = std::make_unique<T>();
  return *item;
}

// Host waits and work the CUDA runtime cannot see fail: NCCL's collectives run on their own
// streams and the compute stream waits for them; a dead peer stalls them for good. Each group
// registers a Watch; while any is registered, host waits poll the watches, so such a failure
// ends the wait with the group's error (rank, op, group; the collective aborted) after its
// timeout instead of hanging. Without watches the waits are cudaStreamSynchronize and
// cudaDeviceSynchronize.
class Watch {
 public:
  virtual ~Watch() = default;
  // Whether some of the watched work is still in flight; throws, having aborted it, when it
  // failed or stalled past its timeout. Called from any thread.
  virtual bool Poll() = 0;
};
void AddWatch(Watch* watch);
void RemoveWatch(Watch* watch);  // returns once no other thread is polling it
// Waits on the host for the work queued so far on `stream` of device `index`, then reports the
// index checks that found a bad index (ReportBadIndices).
void WaitStream(int index, cudaStream_t stream);
// Waits on the host for all work of device `index`: its compute stream and the watched work.
void WaitDevice(int index);

// ---------------------------------------------------------------- lazy index checks
// (index_check.cuh) Slots of device memory where kernels record a bad index: two words,
// {first bad position or all ones, the index value there}.
// A slot of device `index`, reset on stream (an asynchronous memset). When every slot still
// waits for its report, the reports are made first: a host wait, reported as such under
// oneflow.cuda.set_sync_debug_mode (4096 slots per device: a training step needs a few dozen).
unsigned long long* AcquireBadSlot(int index, cudaStream_t stream);
// The slot's check is complete on the stream: at the next synchronisation point, raise(value)
// is called (and throws) when the slot holds a bad position.
void SubmitBadSlot(int index, unsigned long long* slot, std::function<void(int64_t)> raise);
// Reads the device's submitted slots (its work before them has finished) and throws the first
// bad one's error. WaitStream calls it after each wait.
void ReportBadIndices(int index);

// The caching allocator's statistics (oneflow.cuda.memory_stats and the rest) are its
// Allocator::Stats: GetAllocator(DeviceType::kCUDA)->Stats(index).
// Returns the cached blocks of every device that has some to the driver.
void EmptyCache();

// ---------------------------------------------------------------- kernel helpers

constexpr int kThreads = 256;
// Zeros t's bytes on stream (asynchronously, as a kernel would).
inline void ZeroFill(const Tensor& t, cudaStream_t stream) {
  ONEFLOW_CUDA_CHECK(cudaMemsetAsync(t.raw_data(), 0, t.numel() * SizeOf(t.dtype()), stream));
}

inline unsigned Blocks(int64_t n, int threads = kThreads) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b > 65535 * 32 ? 65535 * 32
                                              : b);  // grid-stride loops cover the rest
}

// A grid-stride loop over [0, n) in int64, for kernels launched with Blocks(n) (which caps the
// grid; the loop covers the rest):
//   ONEFLOW_CUDA_GRID_LOOP(i, n) { y[i] = x[i]; }
#define ONEFLOW_CUDA_GRID_LOOP(i, n)                                                     \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// Up to kMaxDims dims: shape and per-operand strides, passed to kernels by value.
constexpr int kMaxDims = 8;
struct Geometry {
  int ndim = 0;
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims];
};
// t's geometry viewed as `shape` under broadcasting (stride 0 on broadcast dims), with the
// element offset folded into the base pointer by the caller (t.data<T>()).
// Throws when shape has more than kMaxDims dims.
Geometry BroadcastGeometry(const Tensor& t, const Shape& shape, const char* op);

// Element offset of linear index i (row-major over g.sizes) under g.strides.
__host__ __device__ inline int64_t OffsetOf(const Geometry& g, int64_t i) {
  int64_t off = 0;
  for (int d = g.ndim - 1; d >= 0; --d) {
    int64_t idx = i % g.sizes[d];
    i /= g.sizes[d];
    off += idx * g.strides[d];
  }
  return off;
}

// dst (any strides, on a CUDA device) = src (same device; broadcastable to dst's shape; any
// dtype, converted). The kernel behind the copy and cast ops and Tensor.copy_ on CUDA.
// Defined in elementwise.cu.
void CopyStrided(const Tensor& dst, const Tensor& src);

// Copies between devices (or within one): dst and src have one shape and dtype and are
// contiguous. Host <-> device copies are synchronous for the host.
void CopyBytes(const Tensor& dst, const Tensor& src);

}  // namespace cuda
}  // namespace oneflow
