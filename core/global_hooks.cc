#include "core/global_hooks.h"

#include <cstring>

#include "core/sync_check.h"

namespace oneflow {

namespace {
GlobalHooks g_global_hooks;
DeviceHooks g_device_hooks;

// The stand-in CUDA device's copies: its memory is host memory (copy_ and fill_ write it as
// they write the CPU's), so moving a tensor between it and the CPU is a byte copy.
Tensor FakeCudaCopyTo(const Tensor& src, const Device& device) {
  if (device.type == DeviceType::kCUDA && device.index >= FakeCudaDeviceCount()) {
    throw Error(StrCat("to: ", device.ToString(), " does not exist: the stand-in CUDA device ",
                       "(ONEFLOW_FAKE_CUDA=1) has ", FakeCudaDeviceCount(), " devices"));
  }
  // The real device's copy waits for the stream (cuda::CopyBytes): reported the same way.
  HostSync(StrCat("a copy from ", src.device().ToString(), " to ", device.ToString()).c_str());
  Tensor dst = Tensor::Empty(src.shape(), src.dtype(), device);
  if (src.numel() > 0) {
    std::memcpy(dst.raw_data(), src.raw_data(),
                static_cast<size_t>(src.numel()) * SizeOf(src.dtype()));
  }
  return dst;
}
}  // namespace

void SetGlobalHooks(const GlobalHooks& hooks) { g_global_hooks = hooks; }
const GlobalHooks& GetGlobalHooks() { return g_global_hooks; }

void SetDeviceHooks(const DeviceHooks& hooks) { g_device_hooks = hooks; }
const DeviceHooks& GetDeviceHooks() {
  if (FakeCuda()) {
    static const DeviceHooks fake = [] {
      DeviceHooks h;
      h.copy_to = FakeCudaCopyTo;  // copy_strided stays null: copy_ and fill_ write host memory
      return h;
    }();
    return fake;
  }
  return g_device_hooks;
}

}  // namespace oneflow
