#include "core/storage.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "core/caching_allocator.h"
#include "core/error.h"
#include "core/profiler.h"

namespace oneflow {

namespace {

// 64-byte aligned so vectorised kernels and BLAS get aligned rows. Freed blocks are kept in
// exact-size free lists: a training loop allocates the same sizes every step, and reusing a
// block avoids the page faults a fresh large allocation costs (glibc maps each one anew), and,
// for small blocks (eager scalars), malloc's own cost: with the statistics below taken under
// the lock, a cached small block costs one lock per allocation and per free, and nothing else.
// Statistics as the CUDA allocator keeps them (oneflow.cpu.memory_stats): allocated_bytes
// counts the blocks tensors hold, reserved_bytes those and the cached free ones.
class CpuAllocator : public Allocator {
 public:
  void* Allocate(size_t nbytes, const Device&) override {
    if (nbytes == 0) return nullptr;
    size_t size = Round(nbytes);
    if (size <= kMaxCachedBlock) {
      std::lock_guard<std::mutex> lock(mu_);
      std::vector<void*>* blocks = FreeList(size, /*create=*/false);
      if (blocks && !blocks->empty()) {
        void* p = blocks->back();
        blocks->pop_back();
        cached_bytes_ -= size;
        CountHeld(size);
        return p;
      }
    }
    void* p = std::aligned_alloc(64, size);
    if (!p) {
      ReleaseCache();
      p = std::aligned_alloc(64, size);
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!p) {
      ++stats_.num_ooms;
      throw Error(StrCat("cpu allocator: out of memory allocating ", nbytes, " bytes"));
    }
    stats_.reserved_bytes.Add(static_cast<int64_t>(size));
    stats_.segment.Add(1);
    CountHeld(size);
    return p;
  }

  void Deallocate(void* ptr, size_t nbytes, const Device&) override {
    size_t size = Round(nbytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.allocated_bytes.Sub(static_cast<int64_t>(size));
      stats_.allocation.Sub(1);
      if (size <= kMaxCachedBlock && cached_bytes_ + size <= kMaxCachedTotal) {
        FreeList(size, /*create=*/true)->push_back(ptr);
        cached_bytes_ += size;
        return;
      }
      stats_.reserved_bytes.Sub(static_cast<int64_t>(size));
      stats_.segment.Sub(1);
    }
    std::free(ptr);
  }

  MemoryStats Stats(int) override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void ResetPeakStats(int) override {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.ResetPeak();
  }

 private:
  // Blocks below kSmall have a free list each in an array; larger ones, in a map. Very large
  // blocks are rare and would hog the cache.
  static constexpr size_t kSmall = 4096;
  static constexpr size_t kMaxCachedBlock = size_t{256} << 20;
  static constexpr size_t kMaxCachedTotal = size_t{2} << 30;

  static size_t Round(size_t n) { return (n + 63) / 64 * 64; }

  // REQUIRES: mu_ held; size a multiple of 64. Null when there is none and !create.
  std::vector<void*>* FreeList(size_t size, bool create) {
    if (size < kSmall) return &small_[size / 64];
    if (!create) {
      auto it = free_.find(size);
      return it == free_.end() ? nullptr : &it->second;
    }
    return &free_[size];
  }

  // REQUIRES: mu_ held.
  void CountHeld(size_t size) {
    stats_.allocated_bytes.Add(static_cast<int64_t>(size));
    stats_.allocation.Add(1);
  }

  void ReleaseCache() {
    std::lock_guard<std::mutex> lock(mu_);
    auto release = [&](size_t size, std::vector<void*>& blocks) {
      for (void* p : blocks) std::free(p);
      stats_.reserved_bytes.Sub(static_cast<int64_t>(size * blocks.size()));
      stats_.segment.Sub(static_cast<int64_t>(blocks.size()));
      blocks.clear();
    };
    for (size_t i = 0; i < kSmall / 64; ++i) release(i * 64, small_[i]);
    for (auto& [size, blocks] : free_) release(size, blocks);
    free_.clear();
    cached_bytes_ = 0;
  }

  std::mutex mu_;
  std::vector<void*> small_[kSmall / 64];
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t cached_bytes_ = 0;
  MemoryStats stats_;
};

// The stand-in CUDA device's memory: host segments (512-byte aligned, as the blocks cut from
// them are), cached and split by the same allocator as a GPU's.
class HostMemory : public RawMemory {
 public:
  void* Malloc(size_t nbytes, int) override { return std::aligned_alloc(512, nbytes); }
  void Free(void* ptr, int) override { std::free(ptr); }
  std::string Name(int index) override {
    return StrCat(Device::CUDA(index).ToString(), " (the stand-in device, ONEFLOW_FAKE_CUDA=1)");
  }
};

// Meta tensors' storage: a size and no memory.
class MetaAllocator : public Allocator {
 public:
  void* Allocate(size_t, const Device&) override { return nullptr; }
  void Deallocate(void*, size_t, const Device&) override {}
};

Allocator*& Slot(DeviceType type) {
  static CpuAllocator cpu;
  static MetaAllocator meta;
  static Allocator* slots[kNumDeviceTypes] = {&cpu, nullptr, &meta};
  return slots[static_cast<int>(type)];
}

}  // namespace

void SetAllocator(DeviceType type, Allocator* allocator) { Slot(type) = allocator; }

Allocator* GetAllocator(DeviceType type) {
  if (type == DeviceType::kCUDA && FakeCuda()) {
    static HostMemory host;
    static auto* fake = new CachingAllocator(&host, "cuda allocator");  // outlives tensors
    return fake;
  }
  Allocator* a = Slot(type);
  if (!a) {
    throw Error(StrCat("device ", DeviceTypeName(type),
                       ": this build has no support for it (built without CUDA?)"));
  }
  return a;
}

std::shared_ptr<Storage> Storage::Allocate(const Device& device, size_t nbytes) {
  Allocator* a = GetAllocator(device.type);
  profiler::CountMemory(device.type == DeviceType::kCPU ? 0 : 1, static_cast<int64_t>(nbytes));
  return std::make_shared<Storage>(a->Allocate(nbytes, device), nbytes, device, a);
}

std::shared_ptr<Storage> Storage::Borrow(void* data, size_t nbytes, const Device& device,
                                         std::shared_ptr<void> owner) {
  auto s = std::make_shared<Storage>(data, nbytes, device, nullptr);
  s->owner_ = std::move(owner);
  return s;
}

Storage::~Storage() {
  if (data_ && allocator_) allocator_->Deallocate(data_, nbytes_, device_);
  if (allocator_)
    profiler::CountMemory(device_.type == DeviceType::kCPU ? 0 : 1, -int64_t(nbytes_));
}

}  // namespace oneflow
