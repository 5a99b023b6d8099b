#include "core/sync_check.h"

#include <cstdio>

#include "core/error.h"
#include "core/size_check.h"

namespace oneflow {

namespace sync_check_internal {
std::atomic<int> g_mode{0};
}  // namespace sync_check_internal

namespace {

void WarnToStderr(const std::string& message) {
  std::fprintf(stderr, "UserWarning: %s\n", message.c_str());
}

std::atomic<SyncWarnHandler> g_warn{WarnToStderr};

}  // namespace

void SetSyncDebugMode(SyncDebugMode mode) {
  sync_check_internal::g_mode.store(static_cast<int>(mode));
}

SyncDebugMode GetSyncDebugMode() {
  return static_cast<SyncDebugMode>(sync_check_internal::g_mode.load());
}

void SetSyncWarnHandler(SyncWarnHandler handler) { g_warn.store(handler ? handler : WarnToStderr); }

std::string HostSyncMessage(const char* what) {
  const char* op = CurrentSizeCheckOp();
  return StrCat(op ? op : "oneflow", ": called a synchronizing CUDA operation (", what,
                "), reported by oneflow.cuda.set_sync_debug_mode");
}

namespace sync_check_internal {

void Report(const char* what) {
  const int mode = g_mode.load();
  if (mode == static_cast<int>(SyncDebugMode::kError)) {
    throw Error(HostSyncMessage(what) + "(\"error\")");
  }
  if (mode == static_cast<int>(SyncDebugMode::kWarn))
    g_warn.load()(HostSyncMessage(what) + "(\"warn\")");
}

}  // namespace sync_check_internal
}  // namespace oneflow
