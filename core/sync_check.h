// Host waits on a device's work, made visible: oneflow.cuda.set_sync_debug_mode, with
// PyTorch's names and meaning. Every place where the host waits for a CUDA stream or reads
// device memory (a copy between a CUDA device and the host, a peer copy) calls HostSync first;
// under "warn" that warns and under "error" it throws, naming the op this thread is running
// (CurrentSizeCheckOp, set by op dispatch) or the Python call (Tensor.item, Tensor.numpy).
// The stand-in CUDA device (ONEFLOW_FAKE_CUDA=1) reports its copies to and from the host the
// same way, so a training step that runs clean there has no such wait above the kernels.
//
// Not reported, as in PyTorch: oneflow.cuda.synchronize() (the user asked for the wait) and
// waits in the allocator's EmptyCache.
//
//   SetSyncDebugMode(SyncDebugMode::kError);
//   HostSync("a copy from cuda:0 to cpu");  // throws "item: called a synchronizing CUDA ..."
#pragma once

#include <atomic>
#include <string>

namespace oneflow {

enum class SyncDebugMode : int { kDefault = 0, kWarn = 1, kError = 2 };

void SetSyncDebugMode(SyncDebugMode mode);
SyncDebugMode GetSyncDebugMode();

// Where "warn" goes (the Python module installs warnings.warn; by default stderr). The handler
// may throw (Python's warnings filter set to "error").
using SyncWarnHandler = void (*)(const std::string& message);
void SetSyncWarnHandler(SyncWarnHandler handler);

namespace sync_check_internal {
extern std::atomic<int> g_mode;
void Report(const char* what);
}  // namespace sync_check_internal

// Called right before a host wait on device work; `what` says which ("a copy from cuda:0 to
// cpu"). Free when the mode is "default".
inline void HostSync(const char* what) {
  if (sync_check_internal::g_mode.load(std::memory_order_relaxed) != 0) {
    sync_check_internal::Report(what);
  }
}

// The message HostSync throws or warns with, for the op this thread is running.
std::string HostSyncMessage(const char* what);

}  // namespace oneflow
