// The caching allocator of a device type's memory (CUDA's, and the stand-in CUDA device's host
// memory), in the shape of PyTorch's CUDACachingAllocator: memory is taken from the device in
// segments, a segment is split into blocks, a freed block goes back to its pool's free list
// (merged with its free neighbours) and is handed to the next request that fits, without the
// device's malloc and free (both synchronise a GPU).
//
// Private pools: a captured CUDA graph keeps the addresses its kernels were recorded with, so
// the blocks it allocated during capture (the intermediates it freed included) must stay its
// own while it lives. BeginAllocateToPool routes this thread's allocations of a device into a
// private pool; blocks of a private pool go back to that pool when freed and are never handed to
// requests of the default pool (eager code) or of another pool; when the last graph using the
// pool lets it go (ReleasePool) its segments return to the device as soon as their blocks are
// free.
//
//   CachingAllocator a(&raw_memory, "cuda allocator");
//   PoolId pool = a.NewPool(/*index=*/0);               // flow.cuda.graph_pool_handle()
//   a.BeginAllocateToPool(0, pool);  void* p = a.Allocate(n, dev);  a.EndAllocateToPool(0, pool);
//   a.ReleasePool(0, pool);                                // the graph was deleted
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/storage.h"

namespace oneflow {

// Where segments come from: the device's own malloc and free.
class RawMemory {
 public:
  virtual ~RawMemory() = default;
  // nullptr when the device is out of memory; throws on any other failure.
  virtual void* Malloc(size_t nbytes, int index) = 0;
  virtual void Free(void* ptr, int index) = 0;
  // Waits until the device's queued work (the last users of cached blocks) has finished; called
  // before segments go back to the device.
  virtual void WaitDevice(int /*index*/) {}
  // "cuda:0" or "cuda:0 (the stand-in device, ONEFLOW_FAKE_CUDA=1)", for messages.
  virtual std::string Name(int index) = 0;
};

// 0 is the default pool (eager allocations); NewPool hands out the others.
using PoolId = uint64_t;

class CachingAllocator : public Allocator {
 public:
  // `what` names the allocator in messages ("cuda allocator").
  CachingAllocator(RawMemory* raw, std::string what) : raw_(raw), what_(std::move(what)) {}
  ~CachingAllocator() override;

  void* Allocate(size_t nbytes, const Device& device) override;
  void Deallocate(void* ptr, size_t nbytes, const Device& device) override;
  MemoryStats Stats(int index) override;
  void ResetPeakStats(int index) override;

  // Sizes as the allocator hands them out (512-byte granules) and the segment sizes it takes
  // for a request (2 MiB for requests up to 1 MiB, 20 MiB up to 10 MiB, else the request
  // rounded to 2 MiB), as PyTorch's allocator does.
  static size_t RoundSize(size_t nbytes);
  static size_t SegmentSize(size_t size);

  // A new private pool of device `index`, held once by the caller (ReleasePool lets it go).
  PoolId NewPool(int index);
  // One more holder of an existing private pool (a second graph sharing it). Throws naming the
  // pool when it does not exist (or was released by all its holders).
  void RetainPool(int index, PoolId pool);
  // One holder less; the last one's release returns the pool's free segments to the device now
  // and the others as their blocks are freed.
  void ReleasePool(int index, PoolId pool);
  // Until EndAllocateToPool, this thread's allocations on device `index` come from `pool`
  // (nested calls stack). REQUIRES: the pool is held.
  void BeginAllocateToPool(int index, PoolId pool);
  void EndAllocateToPool(int index, PoolId pool);
  // The pool this thread allocates device `index`'s memory from now (0: the default pool).
  static PoolId CurrentPool(const CachingAllocator* a, int index);

  // While it lives, this thread's allocations of device `index` come from the default pool, also
  // inside a capture into a private pool: for memory that outlives any one graph, such as a
  // library's workspace made lazily by its first call, which may be the one being captured.
  // Nothing when `allocator` is not a caching allocator (e.g. null).
  //   { CachingAllocator::DefaultPoolScope eager(GetAllocator(DeviceType::kCUDA), index);
  //     workspace = Tensor::Empty(...); }
  class DefaultPoolScope {
   public:
    DefaultPoolScope(Allocator* allocator, int index);
    ~DefaultPoolScope();
    DefaultPoolScope(const DefaultPoolScope&) = delete;
    DefaultPoolScope& operator=(const DefaultPoolScope&) = delete;

   private:
    CachingAllocator* a_;
    int index_;
  };
  // Which pool holds the live block at ptr (throws when ptr is no live block).
  PoolId PoolOf(void* ptr, int index);

  // Returns the free segments of the default pool and of released private pools of device
  // `index` (every device for -1) to the device.
  void EmptyCache(int index);

 private:
  struct Pool;
  struct Block {
    size_t size = 0;
    void* ptr = nullptr;
    bool allocated = false;
    bool small = false;                      // of a small segment (kept in Pool::small)
    Block *prev = nullptr, *next = nullptr;  // neighbours in the same segment
    Pool* pool = nullptr;
  };
  struct BySize {
    bool operator()(const Block* a, const Block* b) const {
      return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
    }
  };
  struct Pool {
    PoolId id = 0;
    int holders = 0;  // graphs (and handles) holding a private pool; 0: released
    std::set<Block*, BySize> small, large;  // free blocks
    MemoryStat reserved;                    // the pool's segments
  };
  struct PerDevice {
    Pool default_pool;
    std::map<PoolId, std::unique_ptr<Pool>> private_pools;
    std::unordered_map<void*, Block*> live;  // allocated blocks by address
    MemoryStats stats;
  };

  // REQUIRES: mu_ held.
  PerDevice& Dev(int index) { return dev_[index]; }
  Pool* FindPool(PerDevice& d, PoolId id);
  Block* TakeFree(Pool& pool, size_t size);
  void* Split(PerDevice& d, Block* block, size_t size);
  void FreeBlock(PerDevice& d, Block* block);
  // Segments that are one whole free block, taken out of pool (and their stats updated).
  std::vector<std::pair<void*, size_t>> TakeFreeSegments(PerDevice& d, Pool& pool);
  void DropPoolIfEmpty(PerDevice& d, Pool* pool);
  // Waits for the device and frees the segments; when the wait fails they stay cached, free, in
  // the default pool.
  void ReturnSegments(int index, const std::vector<std::pair<void*, size_t>>& segments);
  // REQUIRES: mu_ held. A new segment of `pool` as one free block (not yet in a free set).
  Block* AddSegment(PerDevice& d, Pool* pool, void* ptr, size_t size);
  // REQUIRES: mu_ not held.
  void ReleaseCachedForRetry(int index);

  RawMemory* raw_;
  std::string what_;
  std::mutex mu_;
  std::map<int, PerDevice> dev_;
  PoolId next_pool_ = 1;
};

}  // namespace oneflow
