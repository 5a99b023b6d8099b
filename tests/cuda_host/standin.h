// The host stand-in for the GPU's threads (a test harness, never a product path): our CUDA kernel
// headers (core/kernels/cuda/kernels/*.cuh, written to core/kernels/cuda/launch.cuh's contract)
// compile as host C++ and run with one host thread per CUDA thread, under ThreadSanitizer,
// AddressSanitizer and UBSan (tools/cuda_host/check.sh), against naive host references.
//
// A test, tests/cuda_host/<concept>_test.cc, is picked up by tools/cuda_host/check.sh (every
// *_test.cc there, three sanitizer builds) and by the Bazel target //tests:cuda_host_test:
//
//   #include "core/kernels/cuda/kernels/scale.cuh"   // includes launch.cuh -> this file
//   #include "tests/cuda_host/standin_test_util.h"   // Catch2, kRowLengths, RequireClose
//
//   TEST_CASE("ScaleKernel matches the host", "[scale]") {
//     std::vector<float> x(1025, 1.f), y(1025);
//     OF_CUDA_LAUNCH(oneflow::cuda::ScaleKernel<float>, 5, 256, 0, nullptr, 1025, x.data(),
//                    y.data(), 2.f);
//     for (float v : y) REQUIRE(v == 2.f);
//   }
//
// "Device" memory is host memory (std::vector), launches are synchronous, the stream argument
// is not used. Run: tools/cuda_host/check.sh [filter] (all *_test.cc under tsan, asan+ubsan);
// one file: tools/cuda_host/check.sh scale  (tests/cuda_host/scale_test.cc).
//
// What runs like on a GPU:
//   - threadIdx/blockIdx/blockDim/gridDim (x, y, z), warps of 32 consecutive linear thread ids;
//   - every thread of a block is a host thread (a pool reused across launches); the blocks of a
//     grid run one after another, so static __shared__ arrays (`__shared__` is `static` here) are
//     per block; launches are serialised (one at a time per process);
//   - __syncthreads (and _count/_and/_or) is a barrier of every thread of the block;
//   - __shfl_sync/_xor/_up/_down (width included), __ballot_sync, __all_sync, __any_sync,
//     __syncwarp go through a per-warp exchange: all lanes of the warp must call the same one;
//   - OF_DYNAMIC_SMEM points at a per-launch buffer of exactly smem_bytes (ASan reports any byte
//     past it), filled with 0xff (NaN) at the start of every block: a kernel reading shared
//     memory it did not write sees NaN / -1, as unpredictable as on a GPU;
//   - __half / __nv_bfloat16 are the toolkit's own (cuda_fp16.h, cuda_bf16.h compile on host);
//   - fast math (__expf, rsqrtf, __fdividef...) is the exact host function; __ldg is a load;
//     atomics are relaxed host atomics.
//
// What fails loudly (OF_CUDA_LAUNCH throws std::runtime_error naming the kernel and the rule):
//   - launch limits: block x,y <= 1024, z <= 64, x*y*z <= 1024; grid x <= 2^31-1, y,z <= 65535;
//     every dimension >= 1; dynamic shared memory <= 48 KiB unless the kernel opted in with
//     cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, n) (n <= 227
//     KiB). Static __shared__ sizes are not seen here: the ptxas check (tools/cuda_host/
//     ptxas_check.py) reads them from the CUDA build;
//   - divergent barriers, stricter than the hardware: every thread of the block must reach the
//     same __syncthreads (same source line); a thread that returned while others wait at a
//     barrier is an error (CUDA calls a barrier in non-uniform control flow undefined, and
//     `if (i >= n) return;` before a __syncthreads is the classic bug);
//   - divergent warp operations: all existing lanes of the warp must call the same shuffle/vote
//     (same function, line, mask, width) with mask == the warp's lanes (0xffffffff; a partial
//     last warp of a block of 48 threads needs mask 0xffff); a lane that returned or waits at
//     __syncthreads while another waits at a shuffle is an error;
//   - a missing __syncthreads between warps: the barriers are the only synchronisation between
//     warps of a block (a shuffle orders only its own warp), so under ThreadSanitizer a shared
//     memory write by one warp and a read by another without a barrier between them is reported
//     as a data race (tests/cuda_host/standin_test.cc "[.race]" shows it; check.sh asserts it).
//     A missing __syncwarp between lanes of one warp is NOT detected (shuffles order the warp).
//
// Not supported (compile error or documented gap): __CUDA_ARCH__ is not defined (don't branch on
// it in kernels), cooperative groups, __constant__ memory copies, textures, inline PTX, the
// runtime API (no cudaMemcpy: "device" pointers are host pointers), __activemask() returns the
// warp's existing lanes (convergence is not tracked).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

// ---- qualifiers ----------------------------------------------------------------------------
// crt/host_defines.h (through cuda_runtime.h) already makes __global__/__device__/__host__
// empty and __forceinline__ `inline __attribute__((always_inline))`.
#undef __shared__
#define __shared__ static
#define __launch_bounds__(...)

// ---- built-in variables --------------------------------------------------------------------
inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;
constexpr int warpSize = 32;

namespace oneflow {
namespace cuda_host {

// Thrown inside the kernel's threads once the launch failed (another thread found the error);
// never leaves the stand-in.
struct KernelAborted {};

struct Launch;

// A warp's exchange: the lanes' values of the current operation (double-buffered by the
// generation's parity) and each lane's state, for the divergence checks.
struct Warp {
  enum State { kRunning, kAtWarpOp, kAtBarrier, kExited };
  std::mutex m;
  std::condition_variable cv;
  int lanes = 0;           // lanes that exist (fewer than 32 in a partial last warp)
  unsigned lane_mask = 0;  // bits of the existing lanes
  State state[32] = {};
  int arrived = 0;
  uint64_t gen = 0;
  const char* op = nullptr;  // the operation the arrived lanes wait in
  const char* file = nullptr;
  int line = 0;
  unsigned mask = 0;
  int width = 0;
  uint64_t slot[2][32] = {};
};

// A block's barrier (and the end of the block, where every thread waits for the others).
struct Block {
  std::mutex m;
  std::condition_variable cv;
  int threads = 0;
  int arrived = 0;
  int exited = 0;
  uint64_t gen = 0;
  uint64_t epoch = 0;  // blocks finished
  const char* file = nullptr;
  int line = 0;
  int count = 0, last_count = 0;  // __syncthreads_count
  std::vector<std::unique_ptr<Warp>> warps;
};

struct Launch {
  std::string kernel;
  Block block;
  unsigned char* smem = nullptr;
  size_t smem_bytes = 0;
  std::mutex err_m;
  std::string error;
  std::atomic<bool> aborted{false};
};

struct ThreadCtx {
  Launch* launch = nullptr;
  int tid = 0;  // linear id in the block
};
inline thread_local ThreadCtx tls;

inline Launch& Cur() {
  if (tls.launch == nullptr)
    throw std::logic_error("cuda_host: a device function was called outside OF_CUDA_LAUNCH");
  return *tls.launch;
}

// Records the launch's first error, wakes every waiting thread and unwinds this one.
[[noreturn]] inline void Fail(const std::string& msg) {
  Launch& l = Cur();
  {
    std::lock_guard<std::mutex> g(l.err_m);
    if (l.error.empty()) l.error = msg;
  }
  l.aborted = true;
  {
    std::lock_guard<std::mutex> g(l.block.m);
    l.block.cv.notify_all();
  }
  for (auto& w : l.block.warps) {
    std::lock_guard<std::mutex> g(w->m);
    w->cv.notify_all();
  }
  throw KernelAborted{};
}

template <typename... A>
std::string Str(const A&... a) {
  std::ostringstream s;
  (s << ... << a);
  return s.str();
}

inline const char* StateName(Warp::State s) {
  switch (s) {
    case Warp::kRunning:
      return "running";
    case Warp::kAtWarpOp:
      return "waiting in a warp operation";
    case Warp::kAtBarrier:
      return "waiting at __syncthreads";
    case Warp::kExited:
      return "returned";
  }
  return "?";
}

inline std::string Who() {
  return Str("thread ", tls.tid, " (warp ", tls.tid / 32, ", lane ", tls.tid % 32, ") of block (",
             blockIdx.x, ",", blockIdx.y, ",", blockIdx.z, ")");
}

// The warp operation every lane of the warp must join. put: this lane's 64 bits; take(slots):
// the result from the lanes' bits.
template <typename Take>
auto WarpOp(const char* op, const char* file, int line, unsigned mask, int width, uint64_t put,
            Take take) {
  Launch& l = Cur();
  const int lane = tls.tid % 32;
  Warp& w = *l.block.warps[tls.tid / 32];
  std::unique_lock<std::mutex> g(w.m);
  if (l.aborted) throw KernelAborted{};
  if (mask != w.lane_mask) {
    g.unlock();
    Fail(Str(l.kernel, ": ", op, " at ", file, ":", line, " by ", Who(), " with mask 0x", std::hex,
             mask, ": the stand-in needs the mask of every lane of the warp (0x", w.lane_mask,
             std::dec, ", ", w.lanes, " lanes)"));
  }
  if (width <= 0 || width > 32 || (width & (width - 1)) != 0) {
    g.unlock();
    Fail(Str(l.kernel, ": ", op, " at ", file, ":", line, " with width ", width,
             ": needs a power of 2 in [1, 32]"));
  }
  for (int k = 0; k < w.lanes; ++k) {
    if (k == lane) continue;
    if (w.state[k] == Warp::kExited || w.state[k] == Warp::kAtBarrier) {
      g.unlock();
      Fail(Str(l.kernel, ": divergent warp: ", Who(), " calls ", op, " at ", file, ":", line,
               " while lane ", k, " is ", StateName(w.state[k]),
               " (every lane of the mask must call it)"));
    }
  }
  if (w.arrived == 0) {
    w.op = op, w.file = file, w.line = line, w.mask = mask, w.width = width;
  } else if (w.op != op || w.line != line || std::strcmp(w.file, file) != 0 || w.width != width) {
    std::string first = Str(w.op, " at ", w.file, ":", w.line, " width ", w.width);
    g.unlock();
    Fail(Str(l.kernel, ": divergent warp: ", Who(), " calls ", op, " at ", file, ":", line,
             " width ", width, " while other lanes wait in ", first));
  }
  const uint64_t my = w.gen;
  w.slot[my & 1][lane] = put;
  w.state[lane] = Warp::kAtWarpOp;
  if (++w.arrived == w.lanes) {
    w.arrived = 0;
    ++w.gen;
    for (int k = 0; k < w.lanes; ++k) w.state[k] = Warp::kRunning;
    w.cv.notify_all();
  } else {
    w.cv.wait(g, [&] { return w.gen != my || l.aborted; });
    if (w.gen == my) throw KernelAborted{};
  }
  return take(w.slot[my & 1], lane, w.lanes);
}

// The lane's state on the way to a barrier or the block's end; fails when another lane of the
// warp waits in a warp operation.
inline void LeaveWarp(Warp::State to, const char* what) {
  Launch& l = Cur();
  const int lane = tls.tid % 32;
  Warp& w = *l.block.warps[tls.tid / 32];
  std::unique_lock<std::mutex> g(w.m);
  if (l.aborted) throw KernelAborted{};
  for (int k = 0; k < w.lanes; ++k) {
    if (k != lane && w.state[k] == Warp::kAtWarpOp) {
      std::string other = Str(w.op, " at ", w.file, ":", w.line);
      g.unlock();
      Fail(Str(l.kernel, ": divergent warp: ", Who(), " ", what, " while lane ", k, " waits in ",
               other));
    }
  }
  w.state[lane] = to;
}

inline int SyncThreads(const char* file, int line, int pred) {
  Launch& l = Cur();
  LeaveWarp(Warp::kAtBarrier, Str("reaches __syncthreads at ", file, ":", line).c_str());
  Block& b = l.block;
  std::unique_lock<std::mutex> g(b.m);
  if (l.aborted) throw KernelAborted{};
  if (b.exited > 0) {
    g.unlock();
    Fail(Str(l.kernel, ": divergent __syncthreads: ", Who(), " waits at ", file, ":", line, " but ",
             b.exited, " thread(s) of the block already returned (every thread must reach it)"));
  }
  if (b.arrived == 0) {
    b.file = file, b.line = line, b.count = 0;
  } else if (b.line != line || std::strcmp(b.file, file) != 0) {
    std::string first = Str(b.file, ":", b.line);
    g.unlock();
    Fail(Str(l.kernel, ": divergent __syncthreads: ", Who(), " waits at ", file, ":", line,
             " while others wait at ", first));
  }
  b.count += pred != 0;
  const uint64_t my = b.gen;
  if (++b.arrived == b.threads) {
    b.arrived = 0;
    b.last_count = b.count;
    ++b.gen;
    for (auto& w : b.warps) {
      std::lock_guard<std::mutex> wg(w->m);
      for (int k = 0; k < w->lanes; ++k) w->state[k] = Warp::kRunning;
    }
    b.cv.notify_all();
  } else {
    b.cv.wait(g, [&] { return b.gen != my || l.aborted; });
    if (b.gen == my) throw KernelAborted{};
  }
  return b.last_count;
}

// The end of this thread's part of the block: waits for every thread of the block, then the
// last one prepares the next block (warp states, dynamic shared memory poison).
inline void ExitBlock() {
  Launch& l = Cur();
  LeaveWarp(Warp::kExited, "returns");
  Block& b = l.block;
  std::unique_lock<std::mutex> g(b.m);
  if (l.aborted) throw KernelAborted{};
  if (b.arrived > 0) {
    std::string where = Str(b.file, ":", b.line);
    g.unlock();
    Fail(Str(l.kernel, ": divergent __syncthreads: ", Who(), " returned while ", b.arrived,
             " thread(s) wait at ", where, " (every thread must reach it)"));
  }
  const uint64_t my = b.epoch;
  if (++b.exited == b.threads) {
    b.exited = 0;
    for (auto& w : b.warps) {
      std::lock_guard<std::mutex> wg(w->m);
      for (int k = 0; k < w->lanes; ++k) w->state[k] = Warp::kRunning;
      w->arrived = 0;
    }
    if (l.smem_bytes) std::memset(l.smem, 0xff, l.smem_bytes);
    ++b.epoch;
    b.cv.notify_all();
  } else {
    b.cv.wait(g, [&] { return b.epoch != my || l.aborted; });
    if (b.epoch == my) throw KernelAborted{};
  }
}

// Host threads reused across launches: thread i runs CUDA thread i of every block.
class Pool {
 public:
  static Pool& Get() {
    static Pool pool;
    return pool;
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> g(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  // Runs f(i) on n threads, returns when all returned.
  void Run(int n, const std::function<void(int)>& f) {
    std::unique_lock<std::mutex> g(m_);
    while (static_cast<int>(threads_.size()) < n) {
      const int i = static_cast<int>(threads_.size());
      threads_.emplace_back([this, i] { Work(i); });
    }
    job_ = &f;
    job_threads_ = n;
    remaining_ = n;
    ++job_id_;
    cv_.notify_all();
    done_.wait(g, [&] { return remaining_ == 0; });
    job_ = nullptr;
  }

 private:
  void Work(int i) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int)>* f;
      {
        std::unique_lock<std::mutex> g(m_);
        cv_.wait(g, [&] { return stop_ || job_id_ != seen; });
        if (stop_) return;
        seen = job_id_;
        if (i >= job_threads_) continue;
        f = job_;
      }
      (*f)(i);
      std::lock_guard<std::mutex> g(m_);
      if (--remaining_ == 0) done_.notify_all();
    }
  }
  std::mutex m_;
  std::condition_variable cv_, done_;
  std::vector<std::thread> threads_;
  const std::function<void(int)>* job_ = nullptr;
  int job_threads_ = 0, remaining_ = 0;
  uint64_t job_id_ = 0;
  bool stop_ = false;
};

// Kernels that opted in to more than 48 KiB of dynamic shared memory (cudaFuncSetAttribute).
inline std::map<const void*, int>& SmemOptIn() {
  static std::map<const void*, int> m;
  return m;
}
inline std::mutex& LaunchMutex() {
  static std::mutex m;
  return m;
}

constexpr size_t kSmemDefault = 48 * 1024, kSmemMax = 227 * 1024;

template <typename D>
dim3 ToDim3(const D& d, const char* kernel, const char* what) {
  if constexpr (std::is_integral_v<D>) {
    if (d < 1 || static_cast<long long>(d) > 0x7fffffffLL)
      throw std::runtime_error(
          Str("OF_CUDA_LAUNCH(", kernel, "): ", what, " of ", d, ", needs 1 .. 2^31-1"));
    return dim3(static_cast<unsigned>(d));
  } else {
    return dim3(d);
  }
}

inline void CheckLimits(const char* k, dim3 g, dim3 b, size_t smem, const void* fn) {
  auto fail = [&](const std::string& m) {
    throw std::runtime_error(Str("OF_CUDA_LAUNCH(", k, "): ", m));
  };
  if (b.x < 1 || b.y < 1 || b.z < 1 || b.x > 1024 || b.y > 1024 || b.z > 64)
    fail(Str("block (", b.x, ",", b.y, ",", b.z, "): each of x, y in 1..1024, z in 1..64"));
  if (static_cast<uint64_t>(b.x) * b.y * b.z > 1024)
    fail(Str("block (", b.x, ",", b.y, ",", b.z, ") has ", uint64_t(b.x) * b.y * b.z,
             " threads, at most 1024"));
  if (g.x < 1 || g.y < 1 || g.z < 1 || g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535)
    fail(Str("grid (", g.x, ",", g.y, ",", g.z, "): x in 1..2^31-1, y and z in 1..65535"));
  size_t limit = kSmemDefault;
  auto it = SmemOptIn().find(fn);
  if (it != SmemOptIn().end()) limit = static_cast<size_t>(it->second);
  if (smem > limit)
    fail(Str(smem, " bytes of dynamic shared memory, at most ", limit,
             limit == kSmemDefault ? " without cudaFuncSetAttribute("
                                     "cudaFuncAttributeMaxDynamicSharedMemorySize)"
                                   : " (the kernel's cudaFuncSetAttribute)"));
}

// One CUDA thread: runs every block of the grid in turn.
template <typename F, typename Params>
void RunThread(Launch& l, int tid, dim3 grid, dim3 block, F kernel, const Params& params) {
  tls.launch = &l;
  tls.tid = tid;
  threadIdx = make_uint3(tid % block.x, tid / block.x % block.y, tid / (block.x * block.y));
  blockDim = block;
  gridDim = grid;
  const uint64_t blocks = uint64_t(grid.x) * grid.y * grid.z;
  try {
    for (uint64_t bi = 0; bi < blocks && !l.aborted; ++bi) {
      blockIdx = make_uint3(bi % grid.x, bi / grid.x % grid.y, bi / (uint64_t(grid.x) * grid.y));
      std::apply(kernel, params);
      ExitBlock();
    }
  } catch (const KernelAborted&) {
  } catch (const std::exception& e) {
    try {
      Fail(Str(l.kernel, ": ", Who(), " threw: ", e.what()));
    } catch (const KernelAborted&) {
    }
  }
  tls.launch = nullptr;
}

template <typename... P, typename G, typename B, typename S, typename... A>
void LaunchKernel(const char* name, void (*kernel)(P...), const G& grid_arg, const B& block_arg,
                  size_t smem, S /*stream: launches are synchronous*/, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "OF_CUDA_LAUNCH: argument count differs");
  const dim3 grid = ToDim3(grid_arg, name, "grid"), block = ToDim3(block_arg, name, "block");
  CheckLimits(name, grid, block, smem, reinterpret_cast<const void*>(kernel));
  const std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
  std::lock_guard<std::mutex> serial(LaunchMutex());
  Launch l;
  l.kernel = name;
  const int n = static_cast<int>(block.x * block.y * block.z);
  l.block.threads = n;
  for (int w = 0; w * 32 < n; ++w) {
    auto warp = std::make_unique<Warp>();
    warp->lanes = std::min(32, n - w * 32);
    warp->lane_mask = warp->lanes == 32 ? 0xffffffffu : (1u << warp->lanes) - 1;
    l.block.warps.push_back(std::move(warp));
  }
  std::unique_ptr<unsigned char[]> smem_buf(new unsigned char[smem]);
  l.smem = smem_buf.get();
  l.smem_bytes = smem;
  if (smem) std::memset(l.smem, 0xff, smem);
  const std::function<void(int)> job = [&](int tid) {
    RunThread(l, tid, grid, block, kernel, params);
  };
  Pool::Get().Run(n, job);
  if (l.aborted) throw std::runtime_error(l.error);
}

inline unsigned char* DynamicSmem() { return Cur().smem; }

template <typename T>
uint64_t Bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <typename T>
T FromBits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}

// The types CUDA's shuffles take.
template <typename T>
constexpr bool kShuffleType =
    std::is_arithmetic_v<T> || std::is_same_v<T, __half> || std::is_same_v<T, __half2> ||
    std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __nv_bfloat162>;

template <typename T>
T Shfl(const char* op, const char* file, int line, unsigned mask, T v, int arg, int width,
       int kind) {
  static_assert(kShuffleType<T>, "__shfl_*_sync takes arithmetic, half or bfloat16 values");
  return WarpOp(op, file, line, mask, width, Bits(v), [&](const uint64_t* s, int lane, int lanes) {
    const int base = lane / width * width;
    int src = lane;
    switch (kind) {
      case 0:  // __shfl_sync
        src = base + ((arg % width) + width) % width;
        break;
      case 1:  // xor
        src = lane ^ arg;
        if (src >= base + width) src = lane;
        break;
      case 2:  // up
        src = lane - arg;
        if (src < base) src = lane;
        break;
      case 3:  // down
        src = lane + arg;
        if (src >= base + width) src = lane;
        break;
    }
    if (src < 0 || src >= lanes) src = lane;
    return FromBits<T>(s[src]);
  });
}

inline unsigned Ballot(const char* op, const char* file, int line, unsigned mask, int pred) {
  return WarpOp(op, file, line, mask, 32, pred != 0, [](const uint64_t* s, int, int lanes) {
    unsigned r = 0;
    for (int k = 0; k < lanes; ++k) r |= (s[k] ? 1u : 0u) << k;
    return r;
  });
}

}  // namespace cuda_host
}  // namespace oneflow

// ---- launch --------------------------------------------------------------------------------
#define OF_CUDA_LAUNCH(kernel, grid, block, smem_bytes, stream, ...)                           \
  ::oneflow::cuda_host::LaunchKernel(#kernel, kernel, (grid), (block), (smem_bytes), (stream), \
                                     ##__VA_ARGS__)

#define OF_DYNAMIC_SMEM(T, name) T* name = reinterpret_cast<T*>(::oneflow::cuda_host::DynamicSmem())

// The runtime's opt-in to more dynamic shared memory, recorded for OF_CUDA_LAUNCH's check. Pass
// the kernel itself (the runtime's `const void*` overload is not defined here).
template <typename... P>
inline cudaError_t cudaFuncSetAttribute(void (*func)(P...), cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaErrorInvalidValue;
  if (value < 0 || static_cast<size_t>(value) > oneflow::cuda_host::kSmemMax)
    return cudaErrorInvalidValue;
  oneflow::cuda_host::SmemOptIn()[reinterpret_cast<const void*>(func)] = value;
  return cudaSuccess;
}

// ---- barriers, shuffles, votes -------------------------------------------------------------
#define __syncthreads() ((void)::oneflow::cuda_host::SyncThreads(__FILE__, __LINE__, 0))
#define __syncthreads_count(p) ::oneflow::cuda_host::SyncThreads(__FILE__, __LINE__, (p))
#define __syncthreads_and(p) (::oneflow::cuda_host::SyncThreads(__FILE__, __LINE__, !(p)) == 0)
#define __syncthreads_or(p) (::oneflow::cuda_host::SyncThreads(__FILE__, __LINE__, (p)) != 0)

namespace oneflow {
namespace cuda_host {
template <typename T>
T ShflW(const char* op, const char* f, int l, unsigned m, T v, int a, int kind) {
  return Shfl(op, f, l, m, v, a, 32, kind);
}
template <typename T>
T ShflW(const char* op, const char* f, int l, unsigned m, T v, int a, int w, int kind) {
  return Shfl(op, f, l, m, v, a, w, kind);
}
inline void SyncWarp(const char* f, int l, unsigned mask = 0xffffffffu) {
  (void)Ballot("__syncwarp", f, l, mask, 0);
}
}  // namespace cuda_host
}  // namespace oneflow
#define __shfl_sync(mask, v, ...) \
  ::oneflow::cuda_host::ShflW("__shfl_sync", __FILE__, __LINE__, (mask), (v), __VA_ARGS__, 0)
#define __shfl_xor_sync(mask, v, ...) \
  ::oneflow::cuda_host::ShflW("__shfl_xor_sync", __FILE__, __LINE__, (mask), (v), __VA_ARGS__, 1)
#define __shfl_up_sync(mask, v, ...) \
  ::oneflow::cuda_host::ShflW("__shfl_up_sync", __FILE__, __LINE__, (mask), (v), __VA_ARGS__, 2)
#define __shfl_down_sync(mask, v, ...) \
  ::oneflow::cuda_host::ShflW("__shfl_down_sync", __FILE__, __LINE__, (mask), (v), __VA_ARGS__, 3)
#define __ballot_sync(mask, p) \
  ::oneflow::cuda_host::Ballot("__ballot_sync", __FILE__, __LINE__, (mask), (p))
#define __all_sync(mask, p)                                                       \
  (::oneflow::cuda_host::Ballot("__all_sync", __FILE__, __LINE__, (mask), (p)) == \
   ::oneflow::cuda_host::Cur().block.warps[::oneflow::cuda_host::tls.tid / 32]->lane_mask)
#define __any_sync(mask, p) \
  (::oneflow::cuda_host::Ballot("__any_sync", __FILE__, __LINE__, (mask), (p)) != 0u)
#define __syncwarp(...) ::oneflow::cuda_host::SyncWarp(__FILE__, __LINE__, ##__VA_ARGS__)
#define __activemask() \
  (::oneflow::cuda_host::Cur().block.warps[::oneflow::cuda_host::tls.tid / 32]->lane_mask)

// ---- loads, math, bit tricks (exact host functions) ----------------------------------------
template <typename T>
inline T __ldg(const T* p) {
  return *p;
}
template <typename T>
inline T __ldcs(const T* p) {
  return *p;
}
template <typename T>
inline T __ldcg(const T* p) {
  return *p;
}
template <typename T>
inline T __ldca(const T* p) {
  return *p;
}
template <typename T>
inline T __ldlu(const T* p) {
  return *p;
}
template <typename T>
inline void __stcs(T* p, T v) {
  *p = v;
}
template <typename T>
inline void __stcg(T* p, T v) {
  *p = v;
}
template <typename T>
inline void __stwt(T* p, T v) {
  *p = v;
}

inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __exp10f(float x) { return std::pow(10.f, x); }
inline float __logf(float x) { return std::log(x); }
inline float __log2f(float x) { return std::log2(x); }
inline float __log10f(float x) { return std::log10(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __tanf(float x) { return std::tan(x); }
inline void __sincosf(float x, float* s, float* c) { *s = std::sin(x), *c = std::cos(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.f / x; }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float __frsqrt_rn(float x) { return 1.f / std::sqrt(x); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __drcp_rn(double x) { return 1.0 / x; }
inline double __dsqrt_rn(double x) { return std::sqrt(x); }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline float __saturatef(float x) { return x > 0.f ? (x < 1.f ? x : 1.f) : 0.f; }  // NaN -> 0
inline float normcdff(float x) { return 0.5f * std::erfc(-x * 0.70710678118654752f); }
inline double normcdf(double x) { return 0.5 * std::erfc(-x * 0.70710678118654752); }

inline int __float_as_int(float x) {
  return oneflow::cuda_host::FromBits<int>(oneflow::cuda_host::Bits(x));
}
inline unsigned __float_as_uint(float x) {
  return oneflow::cuda_host::FromBits<unsigned>(oneflow::cuda_host::Bits(x));
}
inline float __int_as_float(int x) {
  return oneflow::cuda_host::FromBits<float>(oneflow::cuda_host::Bits(x));
}
inline float __uint_as_float(unsigned x) {
  return oneflow::cuda_host::FromBits<float>(oneflow::cuda_host::Bits(x));
}
inline long long __double_as_longlong(double x) {
  return oneflow::cuda_host::FromBits<long long>(oneflow::cuda_host::Bits(x));
}
inline double __longlong_as_double(long long x) {
  return oneflow::cuda_host::FromBits<double>(oneflow::cuda_host::Bits(x));
}

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) {
  return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x));
}
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
inline unsigned __umulhi(unsigned a, unsigned b) {
  return static_cast<unsigned>((uint64_t(a) * b) >> 32);
}
inline int __mulhi(int a, int b) { return static_cast<int>((int64_t(a) * b) >> 32); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * b) >> 64);
}
inline long long __mul64hi(long long a, long long b) {
  return static_cast<long long>((static_cast<__int128>(a) * b) >> 64);
}
inline int __mul24(int a, int b) { return a * b; }
inline unsigned __umul24(unsigned a, unsigned b) { return a * b; }

// CUDA's max/min overloads (device code calls them unqualified, mixed types included).
template <typename A, typename B,
          typename = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<C>)
    return std::fmax(C(a), C(b));
  else
    return C(a) < C(b) ? C(b) : C(a);
}
template <typename A, typename B,
          typename = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<C>)
    return std::fmin(C(a), C(b));
  else
    return C(b) < C(a) ? C(b) : C(a);
}

// ---- atomics: relaxed, like CUDA's (no ordering, so ThreadSanitizer still sees the races an
// atomic does not order) -------------------------------------------------------------------
namespace oneflow {
namespace cuda_host {
template <typename T, typename F>
T AtomicRmw(T* p, F f) {
  T old, next;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  do {
    next = f(old);
  } while (!__atomic_compare_exchange(p, &old, &next, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return old;
}
}  // namespace cuda_host
}  // namespace oneflow
#define OF_HOST_ATOMIC_(name, T, expr)                                                    \
  inline T name(T* p, T v) {                                                              \
    return ::oneflow::cuda_host::AtomicRmw(p, [v](T o) { return static_cast<T>(expr); }); \
  }
OF_HOST_ATOMIC_(atomicAdd, int, o + v)
OF_HOST_ATOMIC_(atomicAdd, unsigned, o + v)
OF_HOST_ATOMIC_(atomicAdd, unsigned long long, o + v)
OF_HOST_ATOMIC_(atomicAdd, float, o + v)
OF_HOST_ATOMIC_(atomicAdd, double, o + v)
OF_HOST_ATOMIC_(atomicAdd, __half, __float2half(__half2float(o) + __half2float(v)))
OF_HOST_ATOMIC_(atomicAdd, __nv_bfloat16,
                __float2bfloat16(__bfloat162float(o) + __bfloat162float(v)))
OF_HOST_ATOMIC_(atomicSub, int, o - v)
OF_HOST_ATOMIC_(atomicSub, unsigned, o - v)
OF_HOST_ATOMIC_(atomicExch, int, v)
OF_HOST_ATOMIC_(atomicExch, unsigned, v)
OF_HOST_ATOMIC_(atomicExch, unsigned long long, v)
OF_HOST_ATOMIC_(atomicExch, float, v)
OF_HOST_ATOMIC_(atomicMax, int, o < v ? v : o)
OF_HOST_ATOMIC_(atomicMax, unsigned, o < v ? v : o)
OF_HOST_ATOMIC_(atomicMax, long long, o < v ? v : o)
OF_HOST_ATOMIC_(atomicMax, unsigned long long, o < v ? v : o)
OF_HOST_ATOMIC_(atomicMin, int, v < o ? v : o)
OF_HOST_ATOMIC_(atomicMin, unsigned, v < o ? v : o)
OF_HOST_ATOMIC_(atomicMin, long long, v < o ? v : o)
OF_HOST_ATOMIC_(atomicMin, unsigned long long, v < o ? v : o)
OF_HOST_ATOMIC_(atomicAnd, int, o& v)
OF_HOST_ATOMIC_(atomicAnd, unsigned, o& v)
OF_HOST_ATOMIC_(atomicAnd, unsigned long long, o& v)
OF_HOST_ATOMIC_(atomicOr, int, o | v)
OF_HOST_ATOMIC_(atomicOr, unsigned, o | v)
OF_HOST_ATOMIC_(atomicOr, unsigned long long, o | v)
OF_HOST_ATOMIC_(atomicXor, int, o ^ v)
OF_HOST_ATOMIC_(atomicXor, unsigned, o ^ v)
OF_HOST_ATOMIC_(atomicXor, unsigned long long, o ^ v)
OF_HOST_ATOMIC_(atomicInc, unsigned, o >= v ? 0u : o + 1u)
OF_HOST_ATOMIC_(atomicDec, unsigned, (o == 0u || o > v) ? v : o - 1u)
#undef OF_HOST_ATOMIC_
template <typename T>
inline T atomicCAS(T* p, T compare, T v) {
  static_assert(std::is_integral_v<T> && (sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8));
  __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return compare;
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
