#include "core/storage.h"

#include <cstdlib>
#include <new>

#include "core/error.h"

namespace oneflow {

namespace {

// 64-byte aligned so vectorised kernels and BLAS get aligned rows.
class CpuAllocator : public Allocator {
 public:
  void* Allocate(size_t nbytes, const Device&) override {
    if (nbytes == 0) return nullptr;
    void* p = std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
    if (!p) throw Error(StrCat("cpu allocator: out of memory allocating ", nbytes, " bytes"));
    return p;
  }
  void Deallocate(void* ptr, size_t, const Device&) override { std::free(ptr); }
};

Allocator*& Slot(DeviceType type) {
  static CpuAllocator cpu;
  static Allocator* slots[kNumDeviceTypes] = {&cpu, nullptr};
  return slots[static_cast<int>(type)];
}

}  // namespace

void SetAllocator(DeviceType type, Allocator* allocator) { Slot(type) = allocator; }

Allocator* GetAllocator(DeviceType type) {
  Allocator* a = Slot(type);
  if (!a) {
    throw Error(StrCat("device ", DeviceTypeName(type),
                       ": this build has no support for it (built without CUDA?)"));
  }
  return a;
}

std::shared_ptr<Storage> Storage::Allocate(const Device& device, size_t nbytes) {
  Allocator* a = GetAllocator(device.type);
  return std::make_shared<Storage>(a->Allocate(nbytes, device), nbytes, device, a);
}

Storage::~Storage() {
  if (data_) allocator_->Deallocate(data_, nbytes_, device_);
}

}  // namespace oneflow
