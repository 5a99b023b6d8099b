// The profiler's device timer on CUDA (core/profiler.h, DeviceTimer): an op's range records a
// timing event on its device's compute stream when it opens and when it closes; Stop() reads
// them all at once. A session's first mark on a device records a reference event and waits
// for it (one sync per device and session) to place the device's clock on the host's steady
// clock; every other mark is an asynchronous cudaEventRecord.
//
// A mark never throws: the timer runs inside ~Range (an op's range closes while its error
// unwinds the stack, and a CUDA error is sticky), so a mark that cannot be made is null and
// its time reads -1 (no device time). Nor does it mark a stream being captured into a CUDA
// graph: a capture admits no synchronisation, and an event recorded there belongs to the graph.
#include <cuda_runtime.h>

#include <cmath>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "core/kernels/cuda/cuda_util.h"
#include "core/profiler.h"

namespace oneflow {
namespace cuda {
namespace {

struct Mark {
  cudaEvent_t event = nullptr;
  int device = -1;
};
struct Reference {
  cudaEvent_t event = nullptr;
  int64_t host_ns = 0;  // steady clock when the event had completed
};

std::mutex g_mu;
std::vector<Reference> g_refs;  // per device, for the current session

void* MarkOn(int device) {
  try {
    cudaStream_t stream = StreamFor(Device::CUDA(device));
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capturing) != cudaSuccess ||
        capturing != cudaStreamCaptureStatusNone) {
      return nullptr;
    }
    {
      std::lock_guard<std::mutex> lock(g_mu);
      if (g_refs.size() <= static_cast<size_t>(device)) g_refs.resize(device + 1);
      Reference& ref = g_refs[device];
      if (!ref.event) {
        ONEFLOW_CUDA_CHECK(cudaEventCreate(&ref.event));
        ONEFLOW_CUDA_CHECK(cudaEventRecord(ref.event, stream));
        ONEFLOW_CUDA_CHECK(cudaEventSynchronize(ref.event));
        ref.host_ns = profiler::NowNs();
      }
    }
    auto m = std::make_unique<Mark>();
    m->device = device;
    ONEFLOW_CUDA_CHECK(cudaEventCreate(&m->event));
    if (cudaEventRecord(m->event, stream) != cudaSuccess) {
      cudaEventDestroy(m->event);
      return nullptr;
    }
    return m.release();
  } catch (const std::exception&) {
    return nullptr;  // no device time for this range (see the header comment)
  }
}

// Milliseconds from a to b (both completed), or NaN.
double ElapsedMs(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  return cudaEventElapsedTime(&ms, a, b) == cudaSuccess ? ms : std::nan("");
}

// marks come in (start, end) pairs, as profiler::Stop passes them. A start is placed through
// the device's reference event; its end through the start: cudaEventElapsedTime's float
// milliseconds lose precision as they grow (about 8 us per step two minutes into a session), so
// the short span of the range itself is measured directly.
void Resolve(void* const* marks, int64_t* out_ns, size_t n) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (size_t i = 0; i < n; ++i) {
    const Mark* m = static_cast<const Mark*>(marks[i]);
    out_ns[i] = -1;
    if (!m || static_cast<size_t>(m->device) >= g_refs.size()) continue;
    const Reference& ref = g_refs[m->device];
    if (!ref.event) continue;
    SetDevice(m->device);
    ONEFLOW_CUDA_CHECK(cudaEventSynchronize(m->event));
    const Mark* start = i % 2 == 1 ? static_cast<const Mark*>(marks[i - 1]) : nullptr;
    double ms = std::nan("");
    if (start && start->device == m->device && out_ns[i - 1] >= 0) {
      ms = ElapsedMs(start->event, m->event);
      if (!std::isnan(ms)) {
        out_ns[i] = out_ns[i - 1] + static_cast<int64_t>(ms * 1e6);
        continue;
      }
    }
    ms = ElapsedMs(ref.event, m->event);
    if (!std::isnan(ms)) out_ns[i] = ref.host_ns + static_cast<int64_t>(ms * 1e6);
  }
}

void Release(void* mark) {
  auto* m = static_cast<Mark*>(mark);
  if (!m) return;
  if (m->event) cudaEventDestroy(m->event);
  delete m;
}

void Reset() {
  std::lock_guard<std::mutex> lock(g_mu);
  for (Reference& r : g_refs) {
    if (r.event) cudaEventDestroy(r.event);
  }
  g_refs.clear();
}

[[maybe_unused]] const bool g_installed = [] {
  profiler::DeviceTimer timer;
  timer.mark = MarkOn;
  timer.resolve = Resolve;
  timer.release = Release;
  timer.reset = Reset;
  profiler::SetDeviceTimer(timer);
  return true;
}();

}  // namespace
}  // namespace cuda
}  // namespace oneflow
