#include "runtime/shm_group.h"

#include <fcntl.h>
#include <immintrin.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace oneflow {
namespace runtime {
namespace {

constexpr size_t kLine = 64;
constexpr size_t kHeaderBytes = 4096;
constexpr int64_t kAlignElems = 64;  // part boundaries on whole cache lines for every dtype

size_t ChunkBytes() {
  const char* v = std::getenv("ONEFLOW_SHM_CHUNK_BYTES");
  long long n = v ? std::atoll(v) : 0;
  if (n >= 4096) return static_cast<size_t>(n) / kLine * kLine;
  return size_t{256} << 10;
}

std::atomic<uint64_t>* FlagAt(uint8_t* base, int r) {
  return reinterpret_cast<std::atomic<uint64_t>*>(base + static_cast<size_t>(r) * kLine);
}

// How many ranks sleep on rank r's flag (they asked the kernel to wake them when it moves).
std::atomic<uint32_t>* SleepersAt(uint8_t* base, int r) {
  return reinterpret_cast<std::atomic<uint32_t>*>(base + static_cast<size_t>(r) * kLine + 8);
}

// Beside each rank's flag, on its cache line: the call each of its last two first meetings
// began (by the parity of the meeting's sequence number: a member can be one meeting ahead of a
// reader, never two).
struct PostedCall {
  uint64_t seq;
  CallPrint print;
};
static_assert(16 + 2 * sizeof(PostedCall) <= kLine, "two posted calls fit beside the flag");

PostedCall* PostedAt(uint8_t* base, int r, uint64_t seq) {
  return reinterpret_cast<PostedCall*>(base + static_cast<size_t>(r) * kLine + 16 +
                                       (seq & 1) * sizeof(PostedCall));
}

// A futex on the low 32 bits of a flag (x86 is little-endian): every increment changes them.
// Not FUTEX_PRIVATE: the flag lives in memory shared between processes.
void FutexWait(std::atomic<uint64_t>* flag, uint32_t seen, long timeout_ns) {
  timespec ts{0, timeout_ns};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(flag), FUTEX_WAIT, seen, &ts, nullptr, 0);
}
void FutexWakeAll(std::atomic<uint64_t>* flag) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(flag), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

template <typename T>
void ReduceRange(T* res, const std::vector<const T*>& src, int64_t lo, int64_t hi, ReduceOp op) {
  const T* a = src[0];
  const T* b = src.size() > 1 ? src[1] : src[0];
  const size_t n = src.size();
  switch (op) {
    case ReduceOp::kMax:
      for (int64_t j = lo; j < hi; ++j) res[j] = std::max(a[j], b[j]);
      for (size_t r = 2; r < n; ++r)
        for (int64_t j = lo; j < hi; ++j) res[j] = std::max(res[j], src[r][j]);
      break;
    case ReduceOp::kMin:
      for (int64_t j = lo; j < hi; ++j) res[j] = std::min(a[j], b[j]);
      for (size_t r = 2; r < n; ++r)
        for (int64_t j = lo; j < hi; ++j) res[j] = std::min(res[j], src[r][j]);
      break;
    default:
      if (n == 1) {
        for (int64_t j = lo; j < hi; ++j) res[j] = a[j];
      } else {
        for (int64_t j = lo; j < hi; ++j) res[j] = static_cast<T>(a[j] + b[j]);
      }
      for (size_t r = 2; r < n; ++r)
        for (int64_t j = lo; j < hi; ++j) res[j] = static_cast<T>(res[j] + src[r][j]);
      if constexpr (std::is_floating_point<T>::value) {
        if (op == ReduceOp::kAvg) {
          const T k = T(1) / static_cast<T>(n);
          for (int64_t j = lo; j < hi; ++j) res[j] *= k;
        }
      }
  }
}

}  // namespace

std::string HostId() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  // Containers (and network namespaces with their own mounts) on one kernel share the boot id
  // but not necessarily /dev/shm, where the segments live.
  struct stat shm {};
  std::string shm_id = stat("/dev/shm", &shm) == 0 ? StrCat(shm.st_dev, ":", shm.st_ino) : "none";
  return std::string(host) + "/" + boot + "/" + shm_id;
}

bool SameHost(const std::vector<std::string>& host_ids) {
  for (const auto& h : host_ids) {
    if (h != host_ids.front()) return false;
  }
  return true;
}

std::shared_ptr<ShmSegment> ShmSegment::Map(ControlClient& client, const std::string& key,
                                            size_t bytes, int my_rank, int group_rank, int size,
                                            double timeout_s, const std::string& desc) {
  std::string name;
  int fd = -1;
  if (group_rank == 0) {
    static std::atomic<int> counter{0};
    name = StrCat("/oneflow-", getpid(), "-", counter++);
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      int err = errno;
      if (fd >= 0) {
        close(fd);
        shm_unlink(name.c_str());
      }
      throw Error(StrCat("shared memory: rank ", my_rank, " could not create ", bytes,
                         " bytes for group ", desc, ": ", std::strerror(err)));
    }
    client.Set(key + "/name", name);
  } else {
    client.Wait({key + "/name"}, timeout_s);
    name = client.Get(key + "/name").value_or("");
    fd = shm_open(name.c_str(), O_RDWR, 0600);
    if (fd < 0) {
      throw Error(StrCat("shared memory: rank ", my_rank, " could not open ", name, " for group ",
                         desc, ": ", std::strerror(errno)));
    }
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int map_err = errno;
  close(fd);
  if (p == MAP_FAILED) {
    if (group_rank == 0) shm_unlink(name.c_str());
    throw Error(StrCat("shared memory: rank ", my_rank, " could not map ", name, " for group ",
                       desc, ": ", std::strerror(map_err)));
  }
  std::shared_ptr<ShmSegment> segment(new ShmSegment(static_cast<uint8_t*>(p), bytes));
  // Once everyone has mapped the segment its name is no longer needed.
  try {
    client.Barrier(key + "/mapped", size, timeout_s);
  } catch (...) {
    if (group_rank == 0) shm_unlink(name.c_str());
    throw;
  }
  if (group_rank == 0) shm_unlink(name.c_str());
  return segment;
}

ShmSegment::~ShmSegment() { munmap(base_, bytes_); }

ShmGroup::ShmGroup(ControlClient& client, const std::string& key, int my_rank, int group_rank,
                   int size, double timeout_s, std::string desc, std::vector<int> ranks)
    : my_rank_(my_rank),
      group_rank_(group_rank),
      size_(size),
      timeout_s_(timeout_s),
      desc_(std::move(desc)),
      chunk_bytes_(ChunkBytes()),
      ranks_(std::move(ranks)) {
  if (ranks_.empty()) {
    for (int r = 0; r < size_; ++r) ranks_.push_back(r);
  }
  if (static_cast<size_t>(size_) * kLine > kHeaderBytes) {
    throw Error(
        StrCat("shared memory: group ", desc_, " has more than ", kHeaderBytes / kLine, " ranks"));
  }
  segment_ =
      ShmSegment::Map(client, key, kHeaderBytes + (static_cast<size_t>(size_) + 1) * chunk_bytes_,
                      my_rank_, group_rank_, size_, timeout_s_, desc_);
  base_ = segment_->data();
}

ShmGroup::~ShmGroup() = default;

uint8_t* ShmGroup::Slot(int r) const {
  return base_ + kHeaderBytes + static_cast<size_t>(r) * chunk_bytes_;
}
uint8_t* ShmGroup::Result() const { return Slot(size_); }

void ShmGroup::Meet(const char* opname) {
  // Spin briefly (the peers usually arrive within microseconds), then sleep on the peer's flag
  // so that a waiting rank leaves its core to the threads still computing (two ranks with a
  // compute and a communication thread each share two cores). The seq_cst store/load pairs
  // (flag then sleepers here, sleepers then flag in the waiter) make a lost wake-up impossible.
  ++seq_;
  const bool first = expecting_;
  if (first) {
    *PostedAt(base_, group_rank_, seq_) = PostedCall{seq_, print_};
    expecting_ = false;
  }
  std::atomic<uint64_t>* mine = FlagAt(base_, group_rank_);
  mine->store(seq_, std::memory_order_seq_cst);
  if (SleepersAt(base_, group_rank_)->load(std::memory_order_seq_cst) > 0) FutexWakeAll(mine);
  using Clock = std::chrono::steady_clock;
  Clock::time_point deadline{};
  bool timing = false;
  for (int r = 0; r < size_; ++r) {
    std::atomic<uint64_t>* f = FlagAt(base_, r);
    for (int spins = 0; f->load(std::memory_order_acquire) < seq_; ++spins) {
      if (spins < 1024) {
        _mm_pause();
        continue;
      }
      if (!timing) {
        timing = true;
        deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s_ * 1e3));
      } else if (Clock::now() > deadline) {
        throw Error(StrCat(opname, ": rank ", my_rank_, " timed out after ", timeout_s_,
                           " s in group ", desc_, " (is another rank dead or stuck?)",
                           report_ ? "; " + report_() : std::string()));
      }
      std::atomic<uint32_t>* sleepers = SleepersAt(base_, r);
      sleepers->fetch_add(1, std::memory_order_seq_cst);
      uint64_t seen = f->load(std::memory_order_seq_cst);
      if (seen < seq_) FutexWait(f, static_cast<uint32_t>(seen), 20'000'000);  // 20 ms at most
      sleepers->fetch_sub(1, std::memory_order_seq_cst);
    }
  }
  CheckCalls(opname, first);
}

void ShmGroup::Expect(const CallPrint& print) {
  print_ = print;
  expecting_ = true;
}

void ShmGroup::CheckCalls(const char* opname, bool expecting) {
  bool agree = true;
  for (int r = 0; r < size_ && agree; ++r) {
    if (r == group_rank_) continue;
    const PostedCall* p = PostedAt(base_, r, seq_);
    const bool at_first = p->seq == seq_;
    agree = at_first == expecting && (!expecting || p->print == print_);
  }
  if (agree) return;
  // Every member sees the same posts at this meeting, so all of them throw here. A member not at
  // the first meeting of a call is in the call it posted last.
  std::vector<CallPrint> prints(size_);
  for (int r = 0; r < size_; ++r) {
    if (r == group_rank_) {
      prints[r] = print_;
      continue;
    }
    const PostedCall* a = PostedAt(base_, r, seq_);
    const PostedCall* b = PostedAt(base_, r, seq_ + 1);
    const bool a_ok = a->seq <= seq_, b_ok = b->seq <= seq_;
    prints[r] = (a_ok && (!b_ok || a->seq >= b->seq)) ? a->print : b->print;
  }
  throw Error(MismatchLine(opname, desc_, ranks_, prints));
}

void ShmGroup::Reduce(const void* in, void* out, int64_t count, DType dtype, ReduceOp op,
                      int64_t keep_begin, int64_t keep_end, const char* opname) {
  DispatchCommDType(dtype, opname, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = static_cast<const T*>(in);
    T* dst = static_cast<T*>(out);
    const int64_t per_chunk = static_cast<int64_t>(chunk_bytes_ / sizeof(T));
    std::vector<const T*> slots(size_);
    for (int r = 0; r < size_; ++r) slots[r] = reinterpret_cast<const T*>(Slot(r));
    T* res = reinterpret_cast<T*>(Result());
    T* mine = reinterpret_cast<T*>(Slot(group_rank_));
    for (int64_t off = 0; off < count; off += per_chunk) {
      const int64_t len = std::min(per_chunk, count - off);
      std::memcpy(mine, src + off, static_cast<size_t>(len) * sizeof(T));
      Meet(opname);
      const auto [lo, hi] = PartOf(len);
      ReduceRange<T>(res, slots, lo, hi, op);
      Meet(opname);
      const int64_t b = std::max(off, keep_begin), e = std::min(off + len, keep_end);
      if (b < e) {
        std::memcpy(dst + (b - keep_begin), res + (b - off),
                    static_cast<size_t>(e - b) * sizeof(T));
      }
    }
  });
  MeetIfExpected(opname);
}

void ShmGroup::Broadcast(void* data, size_t bytes, int root, const char* opname) {
  uint8_t* p = static_cast<uint8_t*>(data);
  for (size_t off = 0; off < bytes; off += chunk_bytes_) {
    const size_t len = std::min(chunk_bytes_, bytes - off);
    // Only a rank's own slot may be written before the first meeting: the others may still be
    // copying the previous operation's result.
    if (group_rank_ == root) std::memcpy(Slot(root), p + off, len);
    Meet(opname);
    if (group_rank_ != root) std::memcpy(p + off, Slot(root), len);
    Meet(opname);
  }
  MeetIfExpected(opname);
}

void ShmGroup::AllGather(const void* in, void* out, const std::vector<size_t>& bytes,
                         const char* opname) {
  const uint8_t* src = static_cast<const uint8_t*>(in);
  uint8_t* dst = static_cast<uint8_t*>(out);
  std::vector<size_t> start(size_, 0);
  for (int r = 1; r < size_; ++r) start[r] = start[r - 1] + bytes[r - 1];
  const size_t most = *std::max_element(bytes.begin(), bytes.end());
  for (size_t off = 0; off < most; off += chunk_bytes_) {
    const size_t mine =
        bytes[group_rank_] > off ? std::min(chunk_bytes_, bytes[group_rank_] - off) : 0;
    if (mine > 0) std::memcpy(Slot(group_rank_), src + off, mine);
    Meet(opname);
    for (int r = 0; r < size_; ++r) {
      if (bytes[r] <= off) continue;
      const size_t len = std::min(chunk_bytes_, bytes[r] - off);
      std::memcpy(dst + start[r] + off, Slot(r), len);
    }
    Meet(opname);
  }
  MeetIfExpected(opname);
}

void ShmGroup::Barrier(const char* opname) { Meet(opname); }

SharedRegions ShmGroup::MapRegions(ControlClient& client, const std::string& key,
                                   size_t bytes_per_rank) {
  SharedRegions regions;
  // Whole pages per region: no cache line or page is written by two ranks.
  regions.region_bytes = std::max<size_t>((bytes_per_rank + 4095) / 4096 * 4096, 4096);
  regions.segment = ShmSegment::Map(client, key, regions.region_bytes * static_cast<size_t>(size_),
                                    my_rank_, group_rank_, size_, timeout_s_, desc_);
  return regions;
}

std::pair<int64_t, int64_t> ShmGroup::PartOf(int64_t count) const {
  int64_t part = (count + size_ - 1) / size_;
  part = (part + kAlignElems - 1) / kAlignElems * kAlignElems;
  const int64_t lo = std::min(count, part * group_rank_);
  return {lo, std::min(count, lo + part)};
}

void ShmGroup::ReduceRegions(const SharedRegions& regions, size_t byte_offset, int64_t count,
                             DType dtype, ReduceOp op, const char* opname,
                             const std::vector<LocalPiece>& local, void* out) {
  const auto [lo, hi] = PartOf(count);
  // Ranges of the part, each read from the region or from a local piece (sorted by offset).
  std::vector<LocalPiece> pieces = local;
  std::sort(pieces.begin(), pieces.end(),
            [](const LocalPiece& x, const LocalPiece& y) { return x.offset < y.offset; });
  int64_t end = lo;
  for (const LocalPiece& l : pieces) {
    ONEFLOW_CHECK(l.offset >= end && l.count >= 0 && l.offset + l.count <= hi, opname,
                  ": local piece [", l.offset, ", ", l.offset + l.count, ") overlaps another or ",
                  "lies outside this rank's part [", lo, ", ", hi, ")");
    end = l.offset + l.count;
  }
  DispatchCommDType(dtype, opname, [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<T*> region(size_);
    for (int r = 0; r < size_; ++r) {
      region[r] = reinterpret_cast<T*>(regions.Region(r) + byte_offset);
    }
    T* mine = region[group_rank_];
    T* result = out ? static_cast<T*>(out) : mine;  // where this rank's part of the sum goes
    Meet(opname);                                   // every member's data is in its region
    // Reduces [from, to) with this rank's data read from `own` (pointing at element `from`),
    // block by block, so the result is still in cache when copied into the other regions.
    // This rank's data comes first: ReduceRange reads the first two sources, then adds the
    // rest into the result, so the result may alias the first source but no other.
    constexpr int64_t kBlock = (16 << 10) / sizeof(T);
    std::vector<const T*> src(size_);
    auto reduce = [&](int64_t from, int64_t to, const T* own) {
      for (int64_t b = from; b < to; b += kBlock) {
        const int64_t len = std::min(to, b + kBlock) - b;
        src[0] = own + (b - from);
        int k = 1;
        for (int r = 0; r < size_; ++r) {
          if (r != group_rank_) src[k++] = region[r] + b;
        }
        ReduceRange<T>(result + b, src, 0, len, op);
        for (int r = 0; r < size_; ++r) {
          if (r != group_rank_) {
            std::memcpy(region[r] + b, result + b, static_cast<size_t>(len) * sizeof(T));
          }
        }
      }
    };
    int64_t at = lo;
    for (const LocalPiece& l : pieces) {
      if (at < l.offset) reduce(at, l.offset, mine + at);
      reduce(l.offset, l.offset + l.count, static_cast<const T*>(l.data));
      at = l.offset + l.count;
    }
    if (at < hi) reduce(at, hi, mine + at);
    Meet(opname);  // every part is everywhere
  });
}

}  // namespace runtime
}  // namespace oneflow
