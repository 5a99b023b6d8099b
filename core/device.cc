#include "core/device.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace oneflow {

const char* DeviceTypeName(DeviceType t) {
  return t == DeviceType::kCPU ? "cpu" : t == DeviceType::kCUDA ? "cuda" : "meta";
}

namespace {
int g_current_cuda_index = 0;
}  // namespace

bool FakeCuda() {
  static const bool fake = [] {
    const char* v = std::getenv("ONEFLOW_FAKE_CUDA");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return fake;
}

int FakeCudaDeviceCount() {
  static const int count = [] {
    const char* v = std::getenv("ONEFLOW_FAKE_CUDA_DEVICES");
    if (v == nullptr || *v == '\0') return 8;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end != '\0' || n < 1 || n > 1024) {
      throw Error(StrCat("ONEFLOW_FAKE_CUDA_DEVICES: expected a device count from 1 to 1024, got '",
                         v, "'"));
    }
    return static_cast<int>(n);
  }();
  return FakeCuda() ? count : 0;
}

int CurrentCudaIndex() { return g_current_cuda_index; }
void SetCurrentCudaIndex(int index) { g_current_cuda_index = index; }

Device Device::Parse(const std::string& s) {
  std::string type = s.substr(0, s.find(':'));
  Device d;
  if (type == "cpu") {
    d.type = DeviceType::kCPU;
  } else if (type == "cuda" || type == "gpu") {
    d.type = DeviceType::kCUDA;
    d.index = CurrentCudaIndex();
  } else if (s == "meta") {
    return Device::Meta();
  } else {
    throw Error(StrCat("device: expected 'cpu', 'cuda[:index]' or 'meta', got '", s, "'"));
  }
  if (s.find(':') != std::string::npos) {
    int index = 0;
    try {
      index = std::stoi(s.substr(s.find(':') + 1));
    } catch (const std::exception&) {
      throw Error(StrCat("device: bad device index in '", s, "'"));
    }
    if (index < 0) throw Error(StrCat("device: the index in '", s, "' must be >= 0"));
    // A process has one CPU memory: "cpu:N" (OneFlow's name for rank N's CPU) is that memory.
    if (d.type == DeviceType::kCUDA) d.index = index;
  }
  return d;
}

std::string Device::ToString() const {
  if (type == DeviceType::kCPU) return "cpu";
  if (type == DeviceType::kMeta) return "meta";
  return "cuda:" + std::to_string(index);
}

}  // namespace oneflow
