// Device: where a tensor's storage lives ("cpu", "cuda:0").
//
//   Device d = Device::Parse("cuda:1");  // {kCUDA, 1}
//   d.ToString();                       // "cuda:1"
#pragma once

#include <string>

namespace oneflow {

enum class DeviceType : int8_t { kCPU = 0, kCUDA = 1 };
constexpr int kNumDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;  // always 0 for the CPU: a process has one CPU memory, whatever "cpu:N" says

  static Device CPU() { return Device{}; }
  static Device CUDA(int index) { return Device{DeviceType::kCUDA, index}; }
  // Accepts "cpu", "cpu:N" (the same), "cuda", "cuda:N", "gpu" (OneFlow's old name).
  static Device Parse(const std::string& s);

  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string ToString() const;
};

const char* DeviceTypeName(DeviceType t);

// The CUDA device "cuda" without an index means (PyTorch's current device): 0 unless set. The
// runtime sets it to the local rank's GPU at start-up; oneflow.cuda.set_device changes it.
int CurrentCudaIndex();
void SetCurrentCudaIndex(int index);

}  // namespace oneflow
