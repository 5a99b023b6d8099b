#include "core/caching_allocator.h"

#include <algorithm>

#include "core/error.h"

namespace oneflow {

namespace {

constexpr size_t kMinBlock = 512;               // every block is a multiple of this
constexpr size_t kSmallSize = size_t{1} << 20;  // requests up to this use the small segments
constexpr size_t kSmallSegment = size_t{2} << 20;
constexpr size_t kMinLargeAlloc = size_t{10} << 20;
constexpr size_t kLargeSegment = size_t{20} << 20;
constexpr size_t kRoundLarge = size_t{2} << 20;

size_t RoundUp(size_t n, size_t g) { return (n + g - 1) / g * g; }

// This thread's pool routing: (allocator, device index, pool), innermost last.
struct Route {
  const CachingAllocator* allocator;
  int index;
  PoolId pool;
};
thread_local std::vector<Route> t_routes;

}  // namespace

size_t CachingAllocator::RoundSize(size_t nbytes) {
  return nbytes < kMinBlock ? kMinBlock : RoundUp(nbytes, kMinBlock);
}

size_t CachingAllocator::SegmentSize(size_t size) {
  if (size <= kSmallSize) return kSmallSegment;
  if (size < kMinLargeAlloc) return kLargeSegment;
  return RoundUp(size, kRoundLarge);
}

CachingAllocator::~CachingAllocator() {
  // Only tests destroy an allocator (the process-wide ones live forever): give its blocks back.
  for (auto& [index, d] : dev_) {
    std::vector<Pool*> pools{&d.default_pool};
    for (auto& [id, p] : d.private_pools) pools.push_back(p.get());
    for (Pool* pool : pools) {
      for (auto* set : {&pool->small, &pool->large}) {
        for (Block* b : *set) {
          if (!b->prev && !b->next) raw_->Free(b->ptr, index);
          delete b;
        }
      }
    }
  }
}

PoolId CachingAllocator::CurrentPool(const CachingAllocator* a, int index) {
  for (auto it = t_routes.rbegin(); it != t_routes.rend(); ++it) {
    if (it->allocator == a && it->index == index) return it->pool;
  }
  return 0;
}

CachingAllocator::Pool* CachingAllocator::FindPool(PerDevice& d, PoolId id) {
  if (id == 0) return &d.default_pool;
  auto it = d.private_pools.find(id);
  return it == d.private_pools.end() ? nullptr : it->second.get();
}

CachingAllocator::Block* CachingAllocator::TakeFree(Pool& pool, size_t size) {
  auto& set = size <= kSmallSize ? pool.small : pool.large;
  Block key;
  key.size = size;
  auto it = set.lower_bound(&key);
  if (it == set.end()) return nullptr;
  Block* b = *it;
  set.erase(it);
  return b;
}

void* CachingAllocator::Split(PerDevice& d, Block* block, size_t size) {
  const bool small = block->small;
  const size_t rest = block->size - size;
  // A small block's remainder is worth keeping from one granule on; a large one's only when it
  // could serve a large request (smaller remainders would fragment the large segments).
  if (small ? rest >= kMinBlock : rest > kSmallSize) {
    auto* r = new Block;
    r->size = rest;
    r->ptr = static_cast<char*>(block->ptr) + size;
    r->pool = block->pool;
    r->small = small;
    r->prev = block;
    r->next = block->next;
    if (block->next) block->next->prev = r;
    block->next = r;
    block->size = size;
    (small ? block->pool->small : block->pool->large).insert(r);
  }
  block->allocated = true;
  d.live[block->ptr] = block;
  const auto bytes = static_cast<int64_t>(block->size);
  d.stats.allocated_bytes.Add(bytes);
  d.stats.allocation.Add(1);
  if (block->pool->id != 0) d.stats.graph_pool_allocated_bytes.Add(bytes);
  return block->ptr;
}

void* CachingAllocator::Allocate(size_t nbytes, const Device& device) {
  if (nbytes == 0) return nullptr;
  const int index = device.index;
  const size_t size = RoundSize(nbytes);
  const PoolId pool_id = CurrentPool(this, index);
  {
    std::lock_guard<std::mutex> lock(mu_);
    PerDevice& d = Dev(index);
    Pool* pool = FindPool(d, pool_id);
    ONEFLOW_CHECK(pool, what_, ": allocation into graph pool ", pool_id, " of ", raw_->Name(index),
                  ", which was released");
    if (Block* b = TakeFree(*pool, size)) return Split(d, b, size);
  }
  const size_t segment = SegmentSize(size);
  void* p = raw_->Malloc(segment, index);
  if (!p) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++Dev(index).stats.num_alloc_retries;
    }
    ReleaseCachedForRetry(index);
    p = raw_->Malloc(segment, index);
  }
  std::lock_guard<std::mutex> lock(mu_);
  PerDevice& d = Dev(index);
  if (!p) {
    ++d.stats.num_ooms;
    const int64_t used = d.stats.allocated_bytes.current;
    throw Error(StrCat(
        what_, ": out of memory allocating ", nbytes, " bytes on ", raw_->Name(index), " (", used,
        " bytes in use by tensors, ", d.stats.reserved_bytes.current - used, " cached, of which ",
        d.stats.graph_pool_reserved_bytes.current - d.stats.graph_pool_allocated_bytes.current,
        " kept by captured CUDA graphs)"));
  }
  return Split(d, AddSegment(d, FindPool(d, pool_id), p, segment), size);
}

CachingAllocator::Block* CachingAllocator::AddSegment(PerDevice& d, Pool* pool, void* ptr,
                                                      size_t size) {
  auto* b = new Block;
  b->size = size;
  b->ptr = ptr;
  b->pool = pool;
  b->small = size == kSmallSegment;  // large segments are at least kMinLargeAlloc
  const auto bytes = static_cast<int64_t>(size);
  d.stats.reserved_bytes.Add(bytes);
  d.stats.segment.Add(1);
  pool->reserved.Add(bytes);
  if (pool->id != 0) d.stats.graph_pool_reserved_bytes.Add(bytes);
  return b;
}

void CachingAllocator::FreeBlock(PerDevice& d, Block* block) {
  Pool& pool = *block->pool;
  const auto bytes = static_cast<int64_t>(block->size);
  d.stats.allocated_bytes.Sub(bytes);
  d.stats.allocation.Sub(1);
  if (pool.id != 0) d.stats.graph_pool_allocated_bytes.Sub(bytes);
  block->allocated = false;
  auto& set = block->small ? pool.small : pool.large;
  for (Block* n : {block->prev, block->next}) {
    if (!n || n->allocated) continue;
    set.erase(n);
    if (n == block->prev) {
      n->size += block->size;
      n->next = block->next;
      if (block->next) block->next->prev = n;
      delete block;
      block = n;
    } else {
      block->size += n->size;
      block->next = n->next;
      if (n->next) n->next->prev = block;
      delete n;
    }
  }
  set.insert(block);
}

std::vector<std::pair<void*, size_t>> CachingAllocator::TakeFreeSegments(PerDevice& d, Pool& pool) {
  std::vector<std::pair<void*, size_t>> out;
  for (auto* set : {&pool.small, &pool.large}) {
    for (auto it = set->begin(); it != set->end();) {
      Block* b = *it;
      if (b->prev || b->next) {
        ++it;
        continue;
      }
      out.emplace_back(b->ptr, b->size);
      const auto bytes = static_cast<int64_t>(b->size);
      d.stats.reserved_bytes.Sub(bytes);
      d.stats.segment.Sub(1);
      pool.reserved.Sub(bytes);
      if (pool.id != 0) d.stats.graph_pool_reserved_bytes.Sub(bytes);
      delete b;
      it = set->erase(it);
    }
  }
  return out;
}

void CachingAllocator::DropPoolIfEmpty(PerDevice& d, Pool* pool) {
  if (pool->id == 0 || pool->holders > 0 || pool->reserved.current > 0) return;
  d.private_pools.erase(pool->id);
}

void CachingAllocator::ReturnSegments(int index,
                                      const std::vector<std::pair<void*, size_t>>& segments) {
  if (segments.empty()) return;
  try {
    raw_->WaitDevice(index);  // their blocks' last users have finished
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    PerDevice& d = Dev(index);
    for (const auto& [ptr, size] : segments) {
      Block* b = AddSegment(d, &d.default_pool, ptr, size);
      (b->small ? d.default_pool.small : d.default_pool.large).insert(b);
    }
    throw;
  }
  for (const auto& [ptr, size] : segments) raw_->Free(ptr, index);
}

void CachingAllocator::Deallocate(void* ptr, size_t, const Device& device) {
  if (!ptr) return;
  std::vector<std::pair<void*, size_t>> segments;
  {
    std::lock_guard<std::mutex> lock(mu_);
    PerDevice& d = Dev(device.index);
    auto it = d.live.find(ptr);
    if (it == d.live.end()) return;  // not ours: nothing a destructor could report
    Block* b = it->second;
    d.live.erase(it);
    Pool* pool = b->pool;
    FreeBlock(d, b);
    if (pool->id != 0 && pool->holders == 0) {  // a released graph pool drains as blocks return
      segments = TakeFreeSegments(d, *pool);
      DropPoolIfEmpty(d, pool);
    }
  }
  try {
    ReturnSegments(device.index, segments);
  } catch (...) {
    // Called from a destructor: a device in an error state keeps the memory (it is lost anyway).
  }
}

MemoryStats CachingAllocator::Stats(int index) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = dev_.find(index);
  if (it == dev_.end()) return MemoryStats();
  MemoryStats s = it->second.stats;
  s.graph_pools = 0;
  for (const auto& [id, pool] : it->second.private_pools) s.graph_pools += pool->holders > 0;
  return s;
}

void CachingAllocator::ResetPeakStats(int index) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = dev_.find(index);
  if (it != dev_.end()) it->second.stats.ResetPeak();
}

PoolId CachingAllocator::NewPool(int index) {
  std::lock_guard<std::mutex> lock(mu_);
  auto pool = std::make_unique<Pool>();
  pool->id = next_pool_++;
  pool->holders = 1;
  const PoolId id = pool->id;
  Dev(index).private_pools[id] = std::move(pool);
  return id;
}

void CachingAllocator::RetainPool(int index, PoolId id) {
  std::lock_guard<std::mutex> lock(mu_);
  Pool* pool = FindPool(Dev(index), id);
  ONEFLOW_CHECK(id != 0 && pool && pool->holders > 0, what_, ": graph pool ", id, " of ",
                raw_->Name(index), " does not exist (or was released by every graph using it)");
  ++pool->holders;
}

void CachingAllocator::ReleasePool(int index, PoolId id) {
  std::vector<std::pair<void*, size_t>> segments;
  {
    std::lock_guard<std::mutex> lock(mu_);
    PerDevice& d = Dev(index);
    Pool* pool = FindPool(d, id);
    if (id == 0 || !pool || pool->holders == 0) return;
    if (--pool->holders > 0) return;
    segments = TakeFreeSegments(d, *pool);
    DropPoolIfEmpty(d, pool);
  }
  ReturnSegments(index, segments);
}

void CachingAllocator::BeginAllocateToPool(int index, PoolId id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Pool* pool = FindPool(Dev(index), id);
    ONEFLOW_CHECK(id != 0 && pool && pool->holders > 0, what_, ": cannot allocate into graph pool ",
                  id, " of ", raw_->Name(index), ": no such pool is held");
  }
  t_routes.push_back({this, index, id});
}

void CachingAllocator::EndAllocateToPool(int index, PoolId id) {
  for (auto it = t_routes.rbegin(); it != t_routes.rend(); ++it) {
    if (it->allocator == this && it->index == index && it->pool == id) {
      t_routes.erase(std::next(it).base());
      return;
    }
  }
}

CachingAllocator::DefaultPoolScope::DefaultPoolScope(Allocator* allocator, int index)
    : a_(dynamic_cast<CachingAllocator*>(allocator)), index_(index) {
  if (a_) t_routes.push_back({a_, index, 0});
}

CachingAllocator::DefaultPoolScope::~DefaultPoolScope() {
  // Scopes nest with the routes pushed inside them: this one is the innermost default route.
  if (!a_) return;
  for (auto it = t_routes.rbegin(); it != t_routes.rend(); ++it) {
    if (it->allocator == a_ && it->index == index_ && it->pool == 0) {
      t_routes.erase(std::next(it).base());
      return;
    }
  }
}

PoolId CachingAllocator::PoolOf(void* ptr, int index) {
  std::lock_guard<std::mutex> lock(mu_);
  PerDevice& d = Dev(index);
  auto it = d.live.find(ptr);
  ONEFLOW_CHECK(it != d.live.end(), what_, ": ", ptr, " is no live block of ", raw_->Name(index));
  return it->second->pool->id;
}

void CachingAllocator::EmptyCache(int index) {
  std::map<int, std::vector<std::pair<void*, size_t>>> taken;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [dev, d] : dev_) {
      if (index >= 0 && dev != index) continue;
      auto& out = taken[dev];
      auto add = [&](Pool& pool) {
        auto segs = TakeFreeSegments(d, pool);
        out.insert(out.end(), segs.begin(), segs.end());
      };
      add(d.default_pool);
      std::vector<Pool*> released;
      for (auto& [id, pool] : d.private_pools) {
        if (pool->holders == 0) released.push_back(pool.get());
      }
      for (Pool* pool : released) {
        add(*pool);
        DropPoolIfEmpty(d, pool);
      }
    }
  }
  for (auto& [dev, segments] : taken) ReturnSegments(dev, segments);
}

void CachingAllocator::ReleaseCachedForRetry(int index) { EmptyCache(index); }

}  // namespace oneflow
