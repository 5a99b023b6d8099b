// Storage: one allocation on one device, shared by a tensor and its views.
// Each device type has one Allocator; the CUDA backend installs its caching one.
//
//   auto s = Storage::Allocate(Device::CPU(), 64);
//   float* p = static_cast<float*>(s->data());
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/device.h"

namespace oneflow {

// One device's memory statistics, kept as PyTorch's CUDA allocator keeps them
// (torch.cuda.memory_stats): each counter's current value, its peak since the last ResetPeak,
// and the totals added and taken away.
struct MemoryStat {
  int64_t current = 0, peak = 0, allocated = 0, freed = 0;
  void Add(int64_t n) {
    current += n;
    allocated += n;
    if (current > peak) peak = current;
  }
  void Sub(int64_t n) {
    current -= n;
    freed += n;
  }
};
struct MemoryStats {
  MemoryStat allocated_bytes;     // held by tensors
  MemoryStat reserved_bytes;      // taken from the device: tensors' blocks and the cache
  MemoryStat allocation;          // blocks held by tensors
  MemoryStat segment;             // blocks taken from the device
  int64_t num_alloc_retries = 0;  // device allocations retried after emptying the cache
  int64_t num_ooms = 0;           // allocations that failed for want of memory
  // The private pools of captured CUDA graphs (core/caching_allocator.h), counted in the above
  // too: their blocks held by tensors, their segments, and how many pools are held.
  MemoryStat graph_pool_allocated_bytes, graph_pool_reserved_bytes;
  int64_t graph_pools = 0;
  void ResetPeak() {
    for (MemoryStat* s : {&allocated_bytes, &reserved_bytes, &allocation, &segment,
                          &graph_pool_allocated_bytes, &graph_pool_reserved_bytes}) {
      s->peak = s->current;
    }
  }
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* Allocate(size_t nbytes, const Device& device) = 0;
  virtual void Deallocate(void* ptr, size_t nbytes, const Device& device) = 0;
  // Statistics of device `index` (zeros where the allocator keeps none).
  virtual MemoryStats Stats(int /*index*/) { return {}; }
  virtual void ResetPeakStats(int /*index*/) {}
};

// REQUIRES: called before any tensor is created on that device type.
void SetAllocator(DeviceType type, Allocator* allocator);
// Throws when the device type has none. Under the stand-in CUDA device (FakeCuda()) CUDA's is
// a host allocator that keeps CUDA's statistics.
Allocator* GetAllocator(DeviceType type);

class Storage {
 public:
  static std::shared_ptr<Storage> Allocate(const Device& device, size_t nbytes);
  // Memory the storage does not own (a shared-memory mapping): `owner` keeps it alive as long
  // as the storage lives.
  static std::shared_ptr<Storage> Borrow(void* data, size_t nbytes, const Device& device,
                                         std::shared_ptr<void> owner);
  Storage(void* data, size_t nbytes, Device device, Allocator* allocator)
      : data_(data), nbytes_(nbytes), device_(device), allocator_(allocator) {}
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  // Bumped by every in-place write, so autograd can tell when a tensor it saved was modified.
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }
  size_t nbytes() const { return nbytes_; }
  const Device& device() const { return device_; }

 private:
  void* data_;
  size_t nbytes_;
  Device device_;
  Allocator* allocator_;  // null for borrowed memory
  std::shared_ptr<void> owner_;
  uint64_t version_ = 0;
};

}  // namespace oneflow
