// The caching allocator (core/caching_allocator.h) over counted host memory: block splitting and
// merging, the segment sizes, the out-of-memory retry, and the private pools of captured CUDA
// graphs (isolation from eager requests, release when the last graph lets go).
#include "core/caching_allocator.h"

#include <set>
#include <thread>

#include "core/error.h"
#include "tests/test_util.h"

namespace oneflow {
namespace {

// Host memory with a capacity, counting what the allocator takes and gives back.
class CountedMemory : public RawMemory {
 public:
  explicit CountedMemory(size_t capacity = size_t{1} << 40) : capacity_(capacity) {}
  void* Malloc(size_t nbytes, int) override {
    if (in_use_ + nbytes > capacity_) return nullptr;
    in_use_ += nbytes;
    ++mallocs;
    void* p = std::aligned_alloc(512, nbytes);
    sizes_[p] = nbytes;
    return p;
  }
  void Free(void* ptr, int) override {
    in_use_ -= sizes_.at(ptr);
    sizes_.erase(ptr);
    ++frees;
    std::free(ptr);
  }
  std::string Name(int index) override { return StrCat("test:", index); }
  size_t in_use() const { return in_use_; }
  int mallocs = 0, frees = 0;

 private:
  size_t capacity_, in_use_ = 0;
  std::map<void*, size_t> sizes_;
};

const Device kDev = Device::CUDA(0);
constexpr size_t kMiB = size_t{1} << 20;

char* At(void* p) { return static_cast<char*>(p); }

TEST_CASE("small requests are cut from one 2 MiB segment and merge back when freed") {
  CountedMemory raw;
  CachingAllocator a(&raw, "test allocator");
  void* p = a.Allocate(1000, kDev);  // 1024 bytes
  void* q = a.Allocate(100, kDev);   // 512 bytes
  void* r = a.Allocate(4096, kDev);
  CHECK(raw.mallocs == 1);
  CHECK(At(q) == At(p) + 1024);
  CHECK(At(r) == At(q) + 512);
  MemoryStats s = a.Stats(0);
  CHECK(s.reserved_bytes.current == static_cast<int64_t>(2 * kMiB));
  CHECK(s.allocated_bytes.current == 1024 + 512 + 4096);
  CHECK(s.allocation.current == 3);
  CHECK(s.segment.current == 1);
  a.Deallocate(q, 100, kDev);
  void* q2 = a.Allocate(300, kDev);  // the freed 512 bytes fit exactly
  CHECK(q2 == q);
  a.Deallocate(p, 1000, kDev);
  a.Deallocate(q2, 300, kDev);
  a.Deallocate(r, 4096, kDev);
  CHECK(a.Stats(0).allocated_bytes.current == 0);
  // All merged into one free block of the whole segment: a 2 MiB request takes it whole.
  void* whole = a.Allocate(kMiB, kDev);
  CHECK(whole == p);
  CHECK(raw.mallocs == 1);
  a.Deallocate(whole, kMiB, kDev);
  a.EmptyCache(-1);
  CHECK(raw.frees == 1);
  CHECK(raw.in_use() == 0);
  CHECK(a.Stats(0).reserved_bytes.current == 0);
}

TEST_CASE("segment sizes follow PyTorch's allocator") {
  CHECK(CachingAllocator::RoundSize(1) == 512);
  CHECK(CachingAllocator::RoundSize(513) == 1024);
  CHECK(CachingAllocator::SegmentSize(512) == 2 * kMiB);
  CHECK(CachingAllocator::SegmentSize(kMiB) == 2 * kMiB);
  CHECK(CachingAllocator::SegmentSize(kMiB + 512) == 20 * kMiB);
  CHECK(CachingAllocator::SegmentSize(11 * kMiB) == 12 * kMiB);
}

TEST_CASE("large requests share a 20 MiB segment; remainders under 1 MiB are not split off") {
  CountedMemory raw;
  CachingAllocator a(&raw, "test allocator");
  void* p = a.Allocate(5 * kMiB, kDev);
  void* q = a.Allocate(5 * kMiB, kDev);
  CHECK(raw.mallocs == 1);
  CHECK(At(q) == At(p) + 5 * kMiB);
  a.Deallocate(p, 5 * kMiB, kDev);
  // 5 MiB free at p: a 4.5 MiB request takes all of it (the 0.5 MiB rest is too small to split).
  void* r = a.Allocate(4 * kMiB + kMiB / 2, kDev);
  CHECK(r == p);
  CHECK(a.Stats(0).allocated_bytes.current == static_cast<int64_t>(10 * kMiB));
  a.Deallocate(q, 0, kDev);
  a.Deallocate(r, 0, kDev);
}

TEST_CASE("out of memory empties the cache and retries once, then names what holds memory") {
  CountedMemory raw(/*capacity=*/23 * kMiB);
  CachingAllocator a(&raw, "test allocator");
  void* small = a.Allocate(4096, kDev);     // a 2 MiB segment
  a.Deallocate(small, 4096, kDev);          // cached
  void* big = a.Allocate(22 * kMiB, kDev);  // needs the cached 2 MiB back
  CHECK(a.Stats(0).num_alloc_retries == 1);
  CHECK(raw.frees == 1);
  try {
    a.Allocate(4 * kMiB, kDev);
    FAIL("expected out of memory");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) ==
          "test allocator: out of memory allocating 4194304 bytes on test:0 (23068672 bytes in "
          "use by tensors, 0 cached, of which 0 kept by captured CUDA graphs)");
  }
  CHECK(a.Stats(0).num_ooms == 1);
  a.Deallocate(big, 0, kDev);
}

TEST_CASE("a graph pool's blocks are never handed to eager requests while the graph lives") {
  CountedMemory raw;
  CachingAllocator a(&raw, "test allocator");
  const PoolId pool = a.NewPool(0);
  CHECK(a.Stats(0).graph_pools == 1);
  // The capture: an intermediate freed inside it, an output kept.
  a.BeginAllocateToPool(0, pool);
  CHECK(CachingAllocator::CurrentPool(&a, 0) == pool);
  CHECK(CachingAllocator::CurrentPool(&a, 1) == 0);  // another device: the default pool
  void* tmp = a.Allocate(8192, kDev);
  void* out = a.Allocate(8192, kDev);
  void* other_thread = nullptr;
  std::thread([&] { other_thread = a.Allocate(8192, kDev); }).join();  // eager, elsewhere
  a.Deallocate(tmp, 8192, kDev);
  void* tmp2 = a.Allocate(8192, kDev);  // the capture reuses its own freed block
  CHECK(tmp2 == tmp);
  a.Deallocate(tmp2, 8192, kDev);
  a.EndAllocateToPool(0, pool);
  CHECK(a.PoolOf(out, 0) == pool);
  CHECK(a.PoolOf(other_thread, 0) == 0);
  std::set<char*> graph_segment;
  for (size_t i = 0; i < 2 * kMiB; i += 512) graph_segment.insert(At(tmp) + i);
  // Eager code asks for every size the graph's free blocks could serve, many times over.
  std::vector<void*> eager;
  for (size_t n : {512, 8192, 16384, 65536, 8192, 512}) eager.push_back(a.Allocate(n, kDev));
  for (void* p : eager) CHECK(graph_segment.count(At(p)) == 0);
  MemoryStats s = a.Stats(0);
  CHECK(s.graph_pool_reserved_bytes.current == static_cast<int64_t>(2 * kMiB));
  CHECK(s.graph_pool_allocated_bytes.current == 8192);
  // empty_cache leaves a live graph's free blocks alone (its kernels write them on replay).
  for (void* p : eager) a.Deallocate(p, 0, kDev);
  a.Deallocate(other_thread, 0, kDev);
  a.EmptyCache(-1);
  CHECK(a.Stats(0).graph_pool_reserved_bytes.current == static_cast<int64_t>(2 * kMiB));
  CHECK(a.Stats(0).reserved_bytes.current == static_cast<int64_t>(2 * kMiB));
  // The graph is deleted while its output lives: the segment returns when the output does.
  a.ReleasePool(0, pool);
  CHECK(a.Stats(0).graph_pools == 0);
  CHECK(raw.in_use() == 2 * kMiB);
  a.Deallocate(out, 8192, kDev);
  CHECK(raw.in_use() == 0);
  s = a.Stats(0);
  CHECK(s.reserved_bytes.current == 0);
  CHECK(s.graph_pool_reserved_bytes.current == 0);
  CHECK(s.graph_pool_allocated_bytes.current == 0);
}

TEST_CASE("a shared graph pool lives until its last holder releases it") {
  CountedMemory raw;
  CachingAllocator a(&raw, "test allocator");
  const PoolId pool = a.NewPool(0);
  a.RetainPool(0, pool);  // a second graph captured into the same pool
  a.BeginAllocateToPool(0, pool);
  void* p = a.Allocate(1 << 16, kDev);
  a.Deallocate(p, 0, kDev);
  a.EndAllocateToPool(0, pool);
  a.ReleasePool(0, pool);
  CHECK(raw.in_use() == 2 * kMiB);  // the other graph still replays into it
  a.ReleasePool(0, pool);
  CHECK(raw.in_use() == 0);
  try {
    a.BeginAllocateToPool(0, pool);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) ==
          "test allocator: cannot allocate into graph pool 1 of test:0: no such pool is held");
  }
  try {
    a.RetainPool(0, pool);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) ==
          "test allocator: graph pool 1 of test:0 does not exist (or "
          "was released by every graph using it)");
  }
}

TEST_CASE(
    "a default-pool scope inside a capture allocates eager memory, then the capture goes on") {
  CountedMemory raw;
  CachingAllocator a(&raw, "test allocator");
  const PoolId pool = a.NewPool(0);
  a.BeginAllocateToPool(0, pool);
  void* captured = a.Allocate(8192, kDev);
  void* workspace = nullptr;
  {
    // A library's workspace made by the first (captured) call: it must outlive the graph.
    CachingAllocator::DefaultPoolScope eager(&a, 0);
    CHECK(CachingAllocator::CurrentPool(&a, 0) == 0);
    workspace = a.Allocate(1 << 20, kDev);
    {
      // A capture begun inside the scope routes into its pool again until it ends.
      a.BeginAllocateToPool(0, pool);
      CHECK(CachingAllocator::CurrentPool(&a, 0) == pool);
      a.EndAllocateToPool(0, pool);
    }
    CHECK(CachingAllocator::CurrentPool(&a, 0) == 0);
  }
  CHECK(CachingAllocator::CurrentPool(&a, 0) == pool);
  void* captured2 = a.Allocate(8192, kDev);
  a.EndAllocateToPool(0, pool);
  CHECK(a.PoolOf(workspace, 0) == 0);
  CHECK(a.PoolOf(captured, 0) == pool);
  CHECK(a.PoolOf(captured2, 0) == pool);
  // The graph goes: its segment returns once its blocks do; the workspace's stays cached.
  a.Deallocate(captured, 0, kDev);
  a.Deallocate(captured2, 0, kDev);
  a.ReleasePool(0, pool);
  CHECK(raw.in_use() == 2 * kMiB);
  CHECK(a.Stats(0).graph_pool_reserved_bytes.current == 0);
  a.Deallocate(workspace, 0, kDev);
  // Nothing for an allocator that is not a caching one.
  { CachingAllocator::DefaultPoolScope none(nullptr, 0); }
}

}  // namespace
}  // namespace oneflow
