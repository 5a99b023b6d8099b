#include "core/kernels/cuda/cuda_util.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/kernels/cuda/cuda_libs.h"
#include "core/storage.h"
#include "core/sync_check.h"

namespace oneflow {
namespace cuda {

void Check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  cudaGetLastError();  // clear a sticky-free error so the next call is not blamed for it
  int dev = -1;
  cudaGetDevice(&dev);
  throw Error(StrCat("cuda: ", what, " failed: ", cudaGetErrorName(err), ": ",
                     cudaGetErrorString(err), " (device ", dev, ")"));
}

namespace {

// "13.0" from cudaDriverGetVersion's / cudaRuntimeGetVersion's 13000.
std::string CudaVersion(int v) { return StrCat(v / 1000, ".", v % 1000 / 10); }

// The oldest Linux driver that runs a CUDA runtime of this major version (CUDA Toolkit release
// notes, "CUDA Toolkit and Corresponding Driver Versions").
const char* MinimumDriver(int runtime) {
  switch (runtime / 1000) {
    case 13:
      return "580.65.06";
    case 12:
      return "525.60.13";
    default:
      return nullptr;
  }
}

struct Probe {
  int count = 0;
  std::string why;
};

const Probe& GetProbe() {
  static const Probe probe = [] {
    Probe p;
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);  // 0 when no driver is installed
    cudaRuntimeGetVersion(&runtime);
    const std::string versions = StrCat("driver ", driver ? CudaVersion(driver) : std::string("0"),
                                        " / runtime ", CudaVersion(runtime));
    cudaError_t err = cudaGetDeviceCount(&p.count);
    if (err != cudaSuccess) {
      cudaGetLastError();
      p.count = 0;
      const std::string got = StrCat("cudaGetDeviceCount: ", cudaGetErrorName(err), ": ",
                                     cudaGetErrorString(err), "; ", versions);
      if (driver == 0) {
        p.why = StrCat("no NVIDIA driver is installed on this machine (", got, ")");
      } else if (err == cudaErrorInsufficientDriver || driver < runtime) {
        const char* minimum = MinimumDriver(runtime);
        p.why = StrCat(
            "the NVIDIA driver supports CUDA ", CudaVersion(driver),
            " but this build's runtime is CUDA ", CudaVersion(runtime), ": install driver >= ",
            minimum ? minimum : StrCat("one for CUDA ", CudaVersion(runtime)), " (", got, ")");
      } else {
        p.why = StrCat("cudaGetDeviceCount failed (", got, ")");
      }
    } else if (p.count == 0) {
      p.why = StrCat("no CUDA device on this machine (", versions, ")");
    } else {
      // A device is no use without the libraries its kernels call (NCCL waits for a
      // collective): when they are missing, say so here, naming where they were looked for.
      try {
        OpenLibrary("libcublas.so.13");
        OpenLibrary("libcudnn.so.9");
      } catch (const Error& e) {
        p.count = 0;
        p.why = StrCat(e.what(), " (", versions, ")");
      }
    }
    return p;
  }();
  return probe;
}

std::atomic<bool> g_allow_tf32{false};
std::atomic<bool> g_allow_cudnn_tf32{true};

}  // namespace

int DeviceCount() { return GetProbe().count; }
std::string Unavailable() { return GetProbe().why; }

void RequireDevice(int index, const char* op) {
  int n = DeviceCount();
  if (n == 0) throw Error(StrCat(op, ": CUDA is not available (", Unavailable(), ")"));
  if (index < 0 || index >= n) {
    throw Error(StrCat(
        op, ": invalid device ordinal ", index, ": this machine has ", n,
        n == 1 ? " CUDA device (cuda:0)" : StrCat(" CUDA devices (cuda:0 to cuda:", n - 1, ")")));
  }
}

int CurrentDevice() {
  int d = 0;
  ONEFLOW_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

void SetDevice(int index) {
  thread_local int current = -1;
  if (current == index) return;
  ONEFLOW_CUDA_CHECK(cudaSetDevice(index));
  current = index;
}

cudaStream_t StreamFor(const Device& device) {
  static std::mutex mu;
  static std::vector<cudaStream_t> streams;
  RequireDevice(device.index, "cuda stream");  // before cudaSetDevice, for its clearer message
  SetDevice(device.index);
  std::lock_guard<std::mutex> lock(mu);
  if (streams.empty()) streams.assign(DeviceCount(), nullptr);
  cudaStream_t& s = streams[device.index];
  if (!s) ONEFLOW_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

void Synchronize(int index) { WaitStream(index, StreamFor(Device::CUDA(index))); }

bool AllowTf32() { return g_allow_tf32.load(std::memory_order_relaxed); }
void SetAllowTf32(bool allow) { g_allow_tf32.store(allow); }
bool AllowCudnnTf32() { return g_allow_cudnn_tf32.load(std::memory_order_relaxed); }
void SetAllowCudnnTf32(bool allow) { g_allow_cudnn_tf32.store(allow); }

Event::Event() { ONEFLOW_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }
Event::~Event() {
  if (event_) cudaEventDestroy(event_);
}
void Event::RecordOn(cudaStream_t stream) { ONEFLOW_CUDA_CHECK(cudaEventRecord(event_, stream)); }
void Event::WaitOn(cudaStream_t stream) const {
  ONEFLOW_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
}
void Event::Synchronize() const {
  HostSync("an event synchronize");
  ONEFLOW_CUDA_CHECK(cudaEventSynchronize(event_));
}
bool Event::Query() const {
  cudaError_t err = cudaEventQuery(event_);
  if (err == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  Check(err, "cudaEventQuery");
  return true;
}

// ---------------------------------------------------------------- host waits

namespace {

std::mutex g_watch_mu;  // held while polling, so that RemoveWatch waits for a poll to end
std::vector<Watch*>* g_watches = new std::vector<Watch*>();  // outlives groups freed at exit
std::atomic<int> g_watch_count{0};

// Polls every watch (throwing the first failure); whether any has work in flight.
bool PollWatches() {
  std::lock_guard<std::mutex> lock(g_watch_mu);
  bool busy = false;
  for (Watch* w : *g_watches) busy |= w->Poll();
  return busy;
}

void Pause() { std::this_thread::sleep_for(std::chrono::microseconds(20)); }

}  // namespace

void AddWatch(Watch* watch) {
  std::lock_guard<std::mutex> lock(g_watch_mu);
  g_watches->push_back(watch);
  ++g_watch_count;
}

void RemoveWatch(Watch* watch) {
  std::lock_guard<std::mutex> lock(g_watch_mu);
  auto it = std::find(g_watches->begin(), g_watches->end(), watch);
  if (it == g_watches->end()) return;
  g_watches->erase(it);
  --g_watch_count;
}

void WaitStream(int index, cudaStream_t stream) {
  if (g_watch_count.load() == 0) {
    ONEFLOW_CUDA_CHECK(cudaStreamSynchronize(stream));
  } else {
    SetDevice(index);  // the event must live on the stream's device
    Event reached;
    reached.RecordOn(stream);
    while (!reached.Query()) {
      PollWatches();
      Pause();
    }
  }
  ReportBadIndices(index);
}

void WaitDevice(int index) {
  WaitStream(index, StreamFor(Device::CUDA(index)));
  // Collectives no compute-stream work waits for yet (an asynchronous call not yet waited).
  while (g_watch_count.load() > 0 && PollWatches()) Pause();
  SetDevice(index);
  ONEFLOW_CUDA_CHECK(cudaDeviceSynchronize());
}

// ---------------------------------------------------------------- lazy index checks

namespace {

constexpr int kBadSlots = 4096;

struct PendingCheck {
  int slot;
  std::function<void(int64_t)> raise;
};

struct BadSlots {
  std::mutex mu;
  unsigned long long* words = nullptr;  // kBadSlots x {position, value} on the device
  cudaStream_t stream = nullptr;        // the stream the checks run on
  int next = 0;
  std::vector<bool> busy = std::vector<bool>(kBadSlots);
  std::vector<PendingCheck> pending;  // in submission order
};

BadSlots& SlotsOf(int index) { return PerDevice<BadSlots>(index); }

// Reads the pending slots of d (their work has finished: the caller waited) and returns the
// first bad one's raise with its value; clears them all. Holds d.mu.
std::function<void()> TakeFirstBad(BadSlots& d, int index) {
  if (d.pending.empty()) return nullptr;
  std::vector<unsigned long long> host(2 * kBadSlots);
  SetDevice(index);
  // The stream is idle (the caller waited): this copy waits for itself only.
  ONEFLOW_CUDA_CHECK(cudaMemcpyAsync(host.data(), d.words, host.size() * sizeof(host[0]),
                                     cudaMemcpyDeviceToHost, d.stream));
  ONEFLOW_CUDA_CHECK(cudaStreamSynchronize(d.stream));
  std::function<void()> first;
  for (const PendingCheck& p : d.pending) {
    d.busy[p.slot] = false;
    if (!first && host[2 * p.slot] != ~0ull) {
      const int64_t value = static_cast<int64_t>(host[2 * p.slot + 1]);
      first = [raise = p.raise, value] { raise(value); };
    }
  }
  d.pending.clear();
  return first;
}

}  // namespace

unsigned long long* AcquireBadSlot(int index, cudaStream_t stream) {
  BadSlots& d = SlotsOf(index);
  std::function<void()> raise;
  unsigned long long* slot = nullptr;
  {
    std::unique_lock<std::mutex> lock(d.mu);
    if (!d.words) {
      SetDevice(index);
      ONEFLOW_CUDA_CHECK(cudaMalloc(&d.words, 2 * kBadSlots * sizeof(unsigned long long)));
      d.stream = stream;
    }
    if (d.busy[d.next]) {
      // Every slot waits for a synchronisation point: make one.
      lock.unlock();
      HostSync("index checks: every slot awaits a report; synchronise between steps");
      ONEFLOW_CUDA_CHECK(cudaStreamSynchronize(d.stream));
      lock.lock();
      raise = TakeFirstBad(d, index);
    }
    slot = d.words + 2 * d.next;
    d.next = (d.next + 1) % kBadSlots;
  }
  if (raise) raise();
  // All ones: the largest position, above every real one.
  ONEFLOW_CUDA_CHECK(cudaMemsetAsync(slot, 0xff, 2 * sizeof(unsigned long long), stream));
  return slot;
}

void SubmitBadSlot(int index, unsigned long long* slot, std::function<void(int64_t)> raise) {
  BadSlots& d = SlotsOf(index);
  std::lock_guard<std::mutex> lock(d.mu);
  const int k = static_cast<int>((slot - d.words) / 2);
  d.busy[k] = true;
  d.pending.push_back({k, std::move(raise)});
}

void ReportBadIndices(int index) {
  BadSlots& d = SlotsOf(index);
  std::function<void()> raise;
  {
    std::lock_guard<std::mutex> lock(d.mu);
    raise = TakeFirstBad(d, index);
  }
  if (raise) raise();
}

// ---------------------------------------------------------------- helpers

Geometry BroadcastGeometry(const Tensor& t, const Shape& shape, const char* op) {
  ONEFLOW_CHECK(shape.ndim() <= kMaxDims, op, ": CUDA kernels take at most ", kMaxDims,
                " dims, got ", shape.ndim());
  Geometry g;
  g.ndim = static_cast<int>(shape.ndim());
  const int64_t lead = shape.ndim() - t.ndim();
  for (int64_t i = 0; i < shape.ndim(); ++i) {
    g.sizes[i] = shape[i];
    int64_t j = i - lead;
    g.strides[i] = (j < 0 || t.shape()[j] == 1) ? 0 : t.strides()[j];
  }
  return g;
}

void CopyBytes(const Tensor& dst, const Tensor& src) {
  ONEFLOW_CHECK(dst.is_contiguous() && src.is_contiguous() && dst.numel() == src.numel() &&
                    dst.dtype() == src.dtype(),
                "cuda copy: expected contiguous tensors of one size and dtype, got ",
                src.ToString(), " and ", dst.ToString());
  const size_t n = dst.numel() * SizeOf(dst.dtype());
  if (n == 0) return;
  const bool dst_cuda = !dst.is_cpu(), src_cuda = !src.is_cpu();
  cudaStream_t s = StreamFor(dst_cuda ? dst.device() : src.device());
  if (dst_cuda && src_cuda && dst.device() != src.device()) {
    // Peer copy: order it after the source device's pending work.
    HostSync(
        StrCat("a copy from ", src.device().ToString(), " to ", dst.device().ToString()).c_str());
    Synchronize(src.device().index);
    ONEFLOW_CUDA_CHECK(cudaMemcpyPeerAsync(dst.raw_data(), dst.device().index, src.raw_data(),
                                           src.device().index, n, s));
    // The source's block may be freed and reused by the source device's stream as soon as we
    // return: that stream waits for the copy (the event lives on dst's device, as s does).
    SetDevice(dst.device().index);
    Event copied;
    copied.RecordOn(s);
    copied.WaitOn(StreamFor(src.device()));
    return;
  }
  cudaMemcpyKind kind = dst_cuda && src_cuda ? cudaMemcpyDeviceToDevice
                        : dst_cuda           ? cudaMemcpyHostToDevice
                                             : cudaMemcpyDeviceToHost;
  if (kind != cudaMemcpyDeviceToDevice) {
    HostSync(
        StrCat("a copy from ", src.device().ToString(), " to ", dst.device().ToString()).c_str());
  }
  ONEFLOW_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), n, kind, s));
  // The host side of the copy must not change (or be freed) before the copy read it, and a
  // host destination is read right after: both directions wait.
  if (kind != cudaMemcpyDeviceToDevice) WaitStream((dst_cuda ? dst : src).device().index, s);
}

}  // namespace cuda
}  // namespace oneflow
