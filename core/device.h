// Device: where a tensor's storage lives ("cpu", "cuda:0"), or "meta": shapes and dtypes only,
// no memory (ops on meta tensors infer their outputs and run no kernel).
//
//   Device d = Device::Parse("cuda:1");  // {kCUDA, 1}
//   d.ToString();                       // "cuda:1"
#pragma once

#include <string>

namespace oneflow {

enum class DeviceType : int8_t { kCPU = 0, kCUDA = 1, kMeta = 2 };
constexpr int kNumDeviceTypes = 3;

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;  // always 0 for the CPU: a process has one CPU memory, whatever "cpu:N" says

  static Device CPU() { return Device{}; }
  static Device CUDA(int index) { return Device{DeviceType::kCUDA, index}; }
  static Device Meta() { return Device{DeviceType::kMeta, 0}; }
  // Accepts "cpu", "cpu:N" (the same), "cuda", "cuda:N", "gpu" (OneFlow's old name), "meta".
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

// The stand-in CUDA device, for machines without a GPU (ONEFLOW_FAKE_CUDA=1 in the environment,
// read once, at the first query: set it before the process starts or imports oneflow). "cuda"
// tensors then live in host memory and run the CPU kernels, but are cuda tensors in every other
// respect (device cuda:N, cuda placements, device checks, .to("cuda"), the CUDA collectives'
// host fallback), so tests without a GPU check where tensors go. Never on unless asked.
// (DESIGN.md, The stand-in CUDA device.)
bool FakeCuda();
// Its number of devices: ONEFLOW_FAKE_CUDA_DEVICES, else 8 (one node of eight GPUs).
int FakeCudaDeviceCount();
// Whether a device's memory is this process's host memory (the CPU, or the stand-in CUDA
// device): host code and the CPU kernels may read it.
inline bool OnHost(const Device& d) { return d.type == DeviceType::kCPU || FakeCuda(); }

}  // namespace oneflow
