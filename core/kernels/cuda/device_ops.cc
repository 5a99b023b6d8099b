// What the CUDA backend plugs into core: copies between devices and strided copies on a
// device (fn::to_device, Tensor.copy_, fill_), installed when the library loads.
#include "core/dispatch.h"
#include "core/kernels/cuda/cuda_util.h"

namespace oneflow {
namespace cuda {
namespace {

Tensor CopyTo(const Tensor& src, const Device& device) {
  for (const Device& d : {src.device(), device}) {
    if (d.type == DeviceType::kCUDA) RequireDevice(d.index, "to");
  }
  Tensor dst = Tensor::Empty(src.shape(), src.dtype(), device);
  CopyBytes(dst, src);
  return dst;
}

void CopyOnDevice(const Tensor& dst, const Tensor& src) {
  RequireDevice(dst.device().index, "copy_");
  CopyStrided(dst, src);
}

[[maybe_unused]] const bool g_installed = [] {
  DeviceHooks hooks;
  hooks.copy_to = CopyTo;
  hooks.copy_strided = CopyOnDevice;
  SetDeviceHooks(hooks);
  return true;
}();

}  // namespace
}  // namespace cuda
}  // namespace oneflow
