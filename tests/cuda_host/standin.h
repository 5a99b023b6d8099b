// The host stand-in for the GPU's threads (a test harness, never a product path): our CUDA kernel
// headers (core/kernels/cuda/kernels/*.cuh, written to core/kernels/cuda/launch.cuh's contract)
// compile as host C++ and run with every CUDA thread a host thread of its own, under
// ThreadSanitizer, AddressSanitizer and UBSan (tools/cuda_host/check.sh), against host references.
//
// Adding a kernel's test: write tests/cuda_host/<concept>_test.cc (Catch2, no main). It is picked
// up by tools/cuda_host/check.sh (every tests/cuda_host/*_test.cc, built alone with headers only,
// under TSan and under ASan+UBSan; tools/test runs it) and by Bazel as
// //tests:cuda_host/<concept>_test (no sanitizer). Nothing to register.
//
//   #include "core/kernels/cuda/kernels/scale.cuh"   // includes launch.cuh -> this file
//   #include "tests/cuda_host/standin_test_util.h"   // Catch2, kRowLengths, RequireClose
//
//   TEST_CASE("ScaleKernel matches the host", "[scale]") {
//     for (int64_t n : oneflow::cuda_host::kRowLengths) {
//       auto x = oneflow::cuda_host::RandomVector<__half>(n, /*seed=*/n);
//       std::vector<__half> y(n);
//       OF_CUDA_LAUNCH(oneflow::cuda::ScaleKernel<__half>, CeilDiv(n, 256), 256, 0, nullptr, n,
//                      x.data(), y.data(), 2.f);
//       std::vector<double> want(n);
//       for (int64_t i = 0; i < n; ++i) want[i] = 2 * oneflow::cuda_host::ToDouble(x[i]);
//       oneflow::cuda_host::RequireClose(y, want, "scale n=" + std::to_string(n));
//     }
//   }
//
//   tools/cuda_host/check.sh scale                        # that file, both sanitizer builds
//   CUDA_HOST_SANITIZERS=asan tools/cuda_host/check.sh scale "[scale]"   # one build, a tag
//   bazel test //tests:cuda_host/scale_test
//
// ptxas (tools/cuda_host/ptxas_check.py, in tools/test) checks every __global__ of
// core/kernels/cuda/kernels/*.cuh for sm_90: no spills, registers x block size within the
// register file (block size: __launch_bounds__(N), else a `// ptxas_check: block N` line above
// the kernel, else 1024), and 16-byte global loads in kernels marked `// ptxas_check:
// vector_loads`. Put the marks in your header, right above the kernel's template line.
//
// "Device" memory is host memory (std::vector), launches are synchronous (the stream argument is
// not used), a failed launch throws std::runtime_error (REQUIRE_THROWS_WITH sees the message).
//
// How it runs:
//   - each CUDA thread is a fiber (own stack, own thread for ThreadSanitizer) of the launching
//     host thread, switched only at barriers, warp operations and the block's end, in a fixed
//     order (even blocks thread 0 first, odd blocks last thread first): runs are reproducible and
//     a missing barrier gets both orders;
//   - threadIdx/blockIdx/blockDim/gridDim (x, y, z), warps of 32 consecutive linear thread ids;
//   - the blocks of a grid run one after another, so static __shared__ arrays (`__shared__` is
//     `static` here) are per block; launches are serialised (one at a time per process);
//   - __syncthreads (and _count/_and/_or) is a barrier of every thread of the block;
//   - __shfl_sync/_xor/_up/_down (width included), __ballot_sync, __all_sync, __any_sync,
//     __syncwarp go through a per-warp exchange: all lanes of the warp must call the same one;
//   - OF_DYNAMIC_SMEM points at a per-launch buffer of exactly smem_bytes (ASan reports any byte
//     past it), filled with 0xff (NaN) at the start of every block: a kernel reading shared
//     memory it did not write sees NaN / -1, as unpredictable as on a GPU (static __shared__
//     arrays keep the previous block's values instead);
//   - __half / __nv_bfloat16 are the toolkit's own (cuda_fp16.h, cuda_bf16.h compile on host);
//   - fast math (__expf, rsqrtf, __fdividef...) is the exact host function; __ldg is a load;
//     atomics are relaxed host atomics.
//
// What fails loudly (OF_CUDA_LAUNCH throws std::runtime_error naming the kernel and the rule):
//   - launch limits: block x,y <= 1024, z <= 64, x*y*z <= 1024; grid x <= 2^31-1, y,z <= 65535;
//     every dimension >= 1 (an int64 grid is checked before it becomes a dim3); dynamic shared
//     memory <= 48 KiB unless the kernel opted in with cudaFuncSetAttribute(kernel,
//     cudaFuncAttributeMaxDynamicSharedMemorySize, n), n <= 227 KiB. Static __shared__ sizes and
//     registers are not seen here: tools/cuda_host/ptxas_check.py reads them from the CUDA build;
//   - divergent barriers, stricter than the hardware: every thread of the block must reach the
//     same __syncthreads (same source line); a thread that returned while others wait at a
//     barrier is an error (CUDA calls a barrier in non-uniform control flow undefined, and
//     `if (i >= n) return;` before a __syncthreads is the classic bug);
//   - divergent warp operations: all existing lanes of the warp must call the same shuffle/vote
//     (same function, line, mask, width) with mask == the warp's lanes (0xffffffff; a partial
//     last warp of a block of 48 threads needs mask 0xffff); a lane that returned or waits at
//     __syncthreads while another waits at a shuffle is an error;
//   - a missing __syncthreads between warps: the barriers are the only synchronisation between
//     warps of a block that ThreadSanitizer is told of (a warp operation orders its own warp), so
//     a shared memory write by one warp and a read by another with no barrier between them is a
//     data race report (standin_test.cc "[.race]" shows it; check.sh requires it). A missing
//     __syncwarp between lanes of one warp is NOT detected (shuffles order the warp).
//
// Not supported (compile error or documented gap): __CUDA_ARCH__ is not defined (don't branch on
// it in kernels), cooperative groups, __constant__ memory copies, textures, inline PTX, the
// runtime API (no cudaMemcpy: "device" pointers are host pointers), __activemask() returns the
// warp's existing lanes (convergence is not tracked), spin-waiting on another thread's write
// (threads switch only at the sync points above, so a spin loop never ends), x86-64 only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
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

// ---- sanitizer hooks -----------------------------------------------------------------------
// The CUDA threads are fibers of the launching host thread, switched at every barrier, warp
// operation and block end. ThreadSanitizer sees each as its own thread, ordered only where CUDA
// orders them: a barrier orders the block, a warp operation its warp (explicit acquire/release
// below); the stand-in's own bookkeeping is hidden from it. AddressSanitizer is told of every
// stack switch.
#if defined(__SANITIZE_THREAD__)
#define OF_HOST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define OF_HOST_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define OF_HOST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OF_HOST_ASAN 1
#endif
#endif
}  // namespace cuda_host
}  // namespace oneflow

#if defined(OF_HOST_TSAN)
extern "C" {
void* __tsan_get_current_fiber(void);
void* __tsan_create_fiber(unsigned flags);
void __tsan_switch_to_fiber(void* fiber, unsigned flags);
void __tsan_set_fiber_name(void* fiber, const char* name);
void __tsan_acquire(void* addr);
void __tsan_release(void* addr);
void AnnotateIgnoreReadsBegin(const char* f, int l);
void AnnotateIgnoreReadsEnd(const char* f, int l);
void AnnotateIgnoreWritesBegin(const char* f, int l);
void AnnotateIgnoreWritesEnd(const char* f, int l);
}
#endif
#if defined(OF_HOST_ASAN)
extern "C" {
void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, size_t size);
void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old,
                                     size_t* size_old);
void __asan_unpoison_memory_region(void const volatile* addr, size_t size);
}
#endif

#if !defined(__x86_64__)
#error "tests/cuda_host/standin.h switches fibers with x86-64 code"
#endif
// of_host_switch(save, load): saves the callee-saved registers on this stack and its pointer in
// *save, then continues on the stack `load` (saved by an earlier switch or made by NewStack).
extern "C" void of_host_switch(void** save, void* load);
asm(R"(
  .text
  .weak of_host_switch
  .type of_host_switch, @function
of_host_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size of_host_switch, .-of_host_switch
)");

namespace oneflow {
namespace cuda_host {

inline void TsanAcquire(void* a) {
#if defined(OF_HOST_TSAN)
  __tsan_acquire(a);
#else
  (void)a;
#endif
}
inline void TsanRelease(void* a) {
#if defined(OF_HOST_TSAN)
  __tsan_release(a);
#else
  (void)a;
#endif
}
// The stand-in's bookkeeping, invisible to ThreadSanitizer while alive.
struct Internal {
#if defined(OF_HOST_TSAN)
  Internal() {
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
  }
  ~Internal() {
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
  }
#else
  Internal() {}
  ~Internal() {}
#endif
  Internal(const Internal&) = delete;
};

// Thrown inside the kernel's threads once the launch failed; never leaves the stand-in.
struct KernelAborted {};

template <typename... A>
std::string Str(const A&... a) {
  std::ostringstream s;
  (s << ... << a);
  return s.str();
}

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

// One CUDA thread: a stack of its own, reused by later launches.
struct Fiber {
  enum State { kRunnable, kAtWarpOp, kAtBarrier, kExited, kDone };
  static constexpr size_t kStack = 256 * 1024;
  char* stack = nullptr;  // kStack bytes above a guard page
  void* sp = nullptr;
  void* tsan = nullptr;
  void* fake_stack = nullptr;
  int tid = 0;
  uint3 idx{};
  uint3 bidx{};
  State state = kRunnable;
  bool queued = false;
  uint64_t put = 0, result = 0;
  int arg = 0;  // the lane's own argument of the warp operation (source lane, delta, mask)
};

struct WarpState {
  int lanes = 0;           // lanes that exist (fewer than 32 in a partial last warp)
  unsigned lane_mask = 0;  // bits of the existing lanes
  int arrived = 0;
  const char* op = nullptr;  // the operation the arrived lanes wait in
  const char* file = nullptr;
  int line = 0;
  int width = 0;
  char sync = 0;  // ThreadSanitizer's synchronisation object of the warp
};

// One launch: its fibers, the run queue, the block's barrier and the warps' exchanges.
struct Launch {
  std::string kernel;
  dim3 grid, block;
  int threads = 0;
  uint64_t blocks = 0;
  std::function<void()> run;  // the kernel with its arguments, for the current fiber
  unsigned char* smem = nullptr;
  size_t smem_bytes = 0;
  std::vector<Fiber*> fibers;
  std::vector<WarpState> warps;
  std::deque<Fiber*> queue;
  Fiber* current = nullptr;
  bool reverse = false;  // odd blocks run their threads last to first
  int arrived = 0, exited = 0, done = 0;
  const char* file = nullptr;  // the barrier the arrived threads wait at
  int line = 0;
  int count = 0, last_count = 0;  // __syncthreads_count
  bool aborted = false;
  std::string error;
  void* host_sp = nullptr;
  void* host_tsan = nullptr;
  void* host_fake = nullptr;
  const void* host_bottom = nullptr;
  size_t host_size = 0;
  char block_sync = 0, start_sync = 0, end_sync = 0;  // ThreadSanitizer's sync objects
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
inline Fiber& Self() { return *Cur().current; }

inline std::string Who() {
  return Str("thread ", tls.tid, " (warp ", tls.tid / 32, ", lane ", tls.tid % 32, ") of block (",
             blockIdx.x, ",", blockIdx.y, ",", blockIdx.z, ")");
}

inline const char* StateName(Fiber::State s) {
  switch (s) {
    case Fiber::kRunnable:
      return "running";
    case Fiber::kAtWarpOp:
      return "waiting in a warp operation";
    case Fiber::kAtBarrier:
      return "waiting at __syncthreads";
    case Fiber::kExited:
      return "returned";
    case Fiber::kDone:
      return "done";
  }
  return "?";
}

inline void Enqueue(Launch& l, Fiber* f) {
  if (!f->queued && f->state != Fiber::kDone) {
    f->queued = true;
    l.queue.push_back(f);
  }
}
// Makes the threads [first, first + n) runnable, in the block's order.
inline void Release(Launch& l, int first, int n) {
  for (int k = 0; k < n; ++k) {
    Fiber* f = l.fibers[first + (l.reverse ? n - 1 - k : k)];
    f->state = Fiber::kRunnable;
    Enqueue(l, f);
  }
}

// Records the launch's first error and lets every waiting thread unwind.
inline void Abort(Launch& l, const std::string& msg) {
  if (!l.aborted) l.error = msg;
  l.aborted = true;
  for (Fiber* f : l.fibers) Enqueue(l, f);
}
[[noreturn]] inline void Fail(const std::string& msg) {
  Abort(Cur(), msg);
  throw KernelAborted{};
}

// The running fiber's built-in variables.
inline void Restore(Launch& l, Fiber& f) {
  Internal internal;
  tls.launch = &l;
  tls.tid = f.tid;
  threadIdx = f.idx;
  blockIdx = f.bidx;
  blockDim = l.block;
  gridDim = l.grid;
}

// Hands the host thread back to the scheduler (OF_CUDA_LAUNCH's loop); returns when this thread
// runs again. last: the thread is done and its stack is not resumed.
inline void Park(bool last = false) {
  Launch* l;
  Fiber* f;
  void *host_sp, *host_tsan;
  const void* host_bottom;
  size_t host_size;
  {
    Internal internal;  // closed before the switch: a last switch never comes back
    l = &Cur();
    f = l->current;
    host_sp = l->host_sp, host_tsan = l->host_tsan;
    host_bottom = l->host_bottom, host_size = l->host_size;
  }
  (void)host_tsan, (void)host_bottom, (void)host_size, (void)last;
#if defined(OF_HOST_TSAN)
  __tsan_switch_to_fiber(host_tsan, 1 /*no_sync*/);
#endif
#if defined(OF_HOST_ASAN)
  __sanitizer_start_switch_fiber(last ? nullptr : &f->fake_stack, host_bottom, host_size);
#endif
  of_host_switch(&f->sp, host_sp);
#if defined(OF_HOST_ASAN)
  __sanitizer_finish_switch_fiber(f->fake_stack, &l->host_bottom, &l->host_size);
#endif
  Restore(*l, *f);
}

// Parks the thread in a wait; after the wait, acquires `sync` and unwinds if the launch failed.
inline void Wait(Launch& l, char* sync) {
  Park();
  TsanAcquire(sync);
  if (l.aborted) throw KernelAborted{};
}

// The warp operation every lane of the warp must join. put: this lane's 64 bits, arg: its
// argument; take(slots, lane, lanes, arg): a lane's result from the lanes' bits and its argument.
template <typename Take>
auto WarpOp(const char* op, const char* file, int line, unsigned mask, int width, uint64_t put,
            int arg, Take take) {
  Internal internal;
  Launch& l = Cur();
  Fiber& f = *l.current;
  const int lane = f.tid % 32, first = f.tid - lane;
  WarpState& w = l.warps[f.tid / 32];
  if (mask != w.lane_mask)
    Fail(Str(l.kernel, ": ", op, " at ", file, ":", line, " by ", Who(), " with mask 0x", std::hex,
             mask, ": the stand-in needs the mask of every lane of the warp (0x", w.lane_mask,
             std::dec, ", ", w.lanes, " lanes)"));
  if (width <= 0 || width > 32 || (width & (width - 1)) != 0)
    Fail(Str(l.kernel, ": ", op, " at ", file, ":", line, " with width ", width,
             ": needs a power of 2 in [1, 32]"));
  for (int k = 0; k < w.lanes; ++k) {
    const Fiber::State s = l.fibers[first + k]->state;
    if (s == Fiber::kExited || s == Fiber::kAtBarrier || s == Fiber::kDone)
      Fail(Str(l.kernel, ": divergent warp: ", Who(), " calls ", op, " at ", file, ":", line,
               " while lane ", k, " is ", StateName(s), " (every lane of the mask must call it)"));
  }
  if (w.arrived == 0) {
    w.op = op, w.file = file, w.line = line, w.width = width;
  } else if (w.op != op || w.line != line || std::strcmp(w.file, file) != 0 || w.width != width) {
    Fail(Str(l.kernel, ": divergent warp: ", Who(), " calls ", op, " at ", file, ":", line,
             " width ", width, " while other lanes wait in ", w.op, " at ", w.file, ":", w.line,
             " width ", w.width));
  }
  f.put = put;
  f.arg = arg;
  f.state = Fiber::kAtWarpOp;
  TsanRelease(&w.sync);
  if (++w.arrived == w.lanes) {
    TsanAcquire(&w.sync);
    uint64_t slots[32] = {};
    for (int k = 0; k < w.lanes; ++k) slots[k] = l.fibers[first + k]->put;
    for (int k = 0; k < w.lanes; ++k)
      l.fibers[first + k]->result = Bits(take(slots, k, w.lanes, l.fibers[first + k]->arg));
    w.arrived = 0;
    Release(l, first, w.lanes);
  }
  Wait(l, &w.sync);
  using R = decltype(take(static_cast<const uint64_t*>(nullptr), 0, 0, 0));
  return FromBits<R>(f.result);
}

// Fails when another lane of this thread's warp waits in a warp operation (the thread is on its
// way to `what` instead).
inline void CheckWarpLeft(Launch& l, const Fiber& f, const std::string& what) {
  const WarpState& w = l.warps[f.tid / 32];
  const int first = f.tid - f.tid % 32;
  for (int k = 0; k < w.lanes; ++k)
    if (l.fibers[first + k]->state == Fiber::kAtWarpOp)
      Fail(Str(l.kernel, ": divergent warp: ", Who(), " ", what, " while lane ", k, " waits in ",
               w.op, " at ", w.file, ":", w.line));
}

inline int SyncThreads(const char* file, int line, int pred) {
  Internal internal;
  Launch& l = Cur();
  Fiber& f = *l.current;
  CheckWarpLeft(l, f, Str("reaches __syncthreads at ", file, ":", line));
  if (l.exited > 0)
    Fail(Str(l.kernel, ": divergent __syncthreads: ", Who(), " waits at ", file, ":", line, " but ",
             l.exited, " thread(s) of the block already returned (every thread must reach it)"));
  if (l.arrived == 0) {
    l.file = file, l.line = line, l.count = 0;
  } else if (l.line != line || std::strcmp(l.file, file) != 0) {
    Fail(Str(l.kernel, ": divergent __syncthreads: ", Who(), " waits at ", file, ":", line,
             " while others wait at ", l.file, ":", l.line));
  }
  l.count += pred != 0;
  f.state = Fiber::kAtBarrier;
  TsanRelease(&l.block_sync);
  if (++l.arrived == l.threads) {
    l.arrived = 0;
    l.last_count = l.count;
    Release(l, 0, l.threads);
  }
  Wait(l, &l.block_sync);
  return l.last_count;
}

// The end of this thread's part of the block: waits for every thread of the block; the last one
// prepares the next block (dynamic shared memory poison, order).
inline void ExitBlock() {
  Internal internal;
  Launch& l = Cur();
  Fiber& f = *l.current;
  CheckWarpLeft(l, f, "returns");
  if (l.arrived > 0)
    Fail(Str(l.kernel, ": divergent __syncthreads: ", Who(), " returned while ", l.arrived,
             " thread(s) wait at ", l.file, ":", l.line, " (every thread must reach it)"));
  f.state = Fiber::kExited;
  TsanRelease(&l.block_sync);
  if (++l.exited == l.threads) {
    TsanAcquire(&l.block_sync);
    l.exited = 0;
    if (l.smem_bytes) std::memset(l.smem, 0xff, l.smem_bytes);
    TsanRelease(&l.block_sync);
    l.reverse = !l.reverse;
    Release(l, 0, l.threads);
  }
  Wait(l, &l.block_sync);
}

// The body of every fiber: CUDA thread `tid` of every block in turn.
inline void FiberMain() {
  Launch* lp;
  Fiber* fp;
  {
    Internal internal;
    lp = tls.launch;
    fp = lp->current;
  }
  Launch& l = *lp;
  Fiber& f = *fp;
#if defined(OF_HOST_ASAN)
  __sanitizer_finish_switch_fiber(nullptr, &l.host_bottom, &l.host_size);
#endif
  TsanAcquire(&l.start_sync);
  try {
    for (uint64_t bi = 0;; ++bi) {
      {
        Internal internal;
        if (bi >= l.blocks || l.aborted) break;
        f.bidx = make_uint3(bi % l.grid.x, bi / l.grid.x % l.grid.y,
                            bi / (uint64_t(l.grid.x) * l.grid.y));
        Restore(l, f);
      }
      l.run();
      ExitBlock();
    }
  } catch (const KernelAborted&) {
  } catch (const std::exception& e) {
    Internal internal;
    Abort(l, Str(l.kernel, ": ", Who(), " threw: ", e.what()));
  } catch (...) {  // e.g. a Catch2 REQUIRE inside the kernel: check results after the launch
    Internal internal;
    Abort(l, Str(l.kernel, ": ", Who(), " threw an exception"));
  }
  {
    Internal internal;
    TsanRelease(&l.end_sync);
    f.state = Fiber::kDone;
    ++l.done;
  }
  Park(/*last=*/true);
  std::abort();  // a finished fiber is never resumed
}

// Stacks and ThreadSanitizer contexts of up to 1024 fibers, made once per process.
inline std::vector<std::unique_ptr<Fiber>>& FiberPool() {
  static std::vector<std::unique_ptr<Fiber>> pool;
  return pool;
}

inline Fiber* GetFiber(int i) {
  auto& pool = FiberPool();
  while (static_cast<int>(pool.size()) <= i) {
    auto f = std::make_unique<Fiber>();
    const size_t page = 4096;
    void* p = mmap(nullptr, Fiber::kStack + page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("cuda_host: cannot map a fiber stack");
    mprotect(p, page, PROT_NONE);  // overflow faults instead of corrupting a neighbour
    f->stack = static_cast<char*>(p) + page;
#if defined(OF_HOST_TSAN)
    f->tsan = __tsan_create_fiber(0);
    __tsan_set_fiber_name(f->tsan, "cuda thread");
#endif
    pool.push_back(std::move(f));
  }
  return pool[i].get();
}

// A fresh stack whose first switch enters FiberMain.
inline void NewStack(Fiber& f) {
#if defined(OF_HOST_ASAN)
  __asan_unpoison_memory_region(f.stack, Fiber::kStack);
#endif
  auto top = reinterpret_cast<uintptr_t>(f.stack + Fiber::kStack) & ~uintptr_t(15);
  void** sp = reinterpret_cast<void**>(top);
  *--sp = nullptr;  // FiberMain's return address: the end of every backtrace
  *--sp = reinterpret_cast<void*>(&FiberMain);
  for (int k = 0; k < 6; ++k) *--sp = nullptr;  // rbp rbx r12 r13 r14 r15
  f.sp = sp;
}

// Runs the launch's fibers until all are done (the scheduler, on the launching thread).
inline void RunFibers(Launch& l) {
  {
    Internal internal;
    l.warps.clear();
    for (int w = 0; w * 32 < l.threads; ++w) {
      WarpState ws;
      ws.lanes = std::min(32, l.threads - w * 32);
      ws.lane_mask = ws.lanes == 32 ? 0xffffffffu : (1u << ws.lanes) - 1;
      l.warps.push_back(ws);
    }
    for (int i = 0; i < l.threads; ++i) {
      Fiber* f = GetFiber(i);
      f->tid = i;
      f->idx = make_uint3(i % l.block.x, i / l.block.x % l.block.y, i / (l.block.x * l.block.y));
      f->state = Fiber::kRunnable;
      f->queued = false;
      f->fake_stack = nullptr;
      NewStack(*f);
      l.fibers.push_back(f);
    }
    Release(l, 0, l.threads);
  }
#if defined(OF_HOST_TSAN)
  l.host_tsan = __tsan_get_current_fiber();
#endif
  TsanRelease(&l.start_sync);
  for (;;) {
    Fiber* f;
    {
      Internal internal;
      if (l.queue.empty()) {
        if (l.done == l.threads) break;
        std::string states;
        for (Fiber* g : l.fibers)
          if (g->state != Fiber::kDone)
            states += Str(" thread ", g->tid, ": ", StateName(g->state), ";");
        Abort(l, Str(l.kernel, ": the block cannot go on (a bug of the stand-in):", states));
        continue;
      }
      f = l.queue.front();
      l.queue.pop_front();
      f->queued = false;
      if (f->state == Fiber::kDone) continue;  // queued by an abort, finished since
      l.current = f;
      tls.launch = &l;  // FiberMain's first lines read it
    }
#if defined(OF_HOST_TSAN)
    __tsan_switch_to_fiber(f->tsan, 1 /*no_sync*/);
#endif
#if defined(OF_HOST_ASAN)
    __sanitizer_start_switch_fiber(&l.host_fake, f->stack, Fiber::kStack);
#endif
    of_host_switch(&l.host_sp, f->sp);
#if defined(OF_HOST_ASAN)
    __sanitizer_finish_switch_fiber(l.host_fake, nullptr, nullptr);
#endif
  }
  {
    Internal internal;
    tls.launch = nullptr;
  }
  TsanAcquire(&l.end_sync);
}

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

template <typename... P, typename G, typename B, typename S, typename... A>
void LaunchKernel(const char* name, void (*kernel)(P...), const G& grid_arg, const B& block_arg,
                  size_t smem, S /*stream: launches are synchronous*/, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "OF_CUDA_LAUNCH: argument count differs");
  const dim3 grid = ToDim3(grid_arg, name, "grid"), block = ToDim3(block_arg, name, "block");
  CheckLimits(name, grid, block, smem, reinterpret_cast<const void*>(kernel));
  const std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
  std::lock_guard<std::mutex> serial(LaunchMutex());
  if (tls.launch != nullptr) throw std::logic_error("cuda_host: OF_CUDA_LAUNCH inside a kernel");
  Launch l;
  l.kernel = name;
  l.grid = grid;
  l.block = block;
  l.threads = static_cast<int>(block.x * block.y * block.z);
  l.blocks = uint64_t(grid.x) * grid.y * grid.z;
  l.run = [&] { std::apply(kernel, params); };
  std::unique_ptr<unsigned char[]> smem_buf(new unsigned char[smem]);
  l.smem = smem_buf.get();
  l.smem_bytes = smem;
  if (smem) std::memset(l.smem, 0xff, smem);
  RunFibers(l);
  if (l.aborted) throw std::runtime_error(l.error);
}

inline unsigned char* DynamicSmem() { return Cur().smem; }

// The types CUDA's shuffles take.
template <typename T>
constexpr bool kShuffleType =
    std::is_arithmetic_v<T> || std::is_same_v<T, __half> || std::is_same_v<T, __half2> ||
    std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __nv_bfloat162>;

template <typename T>
T Shfl(const char* op, const char* file, int line, unsigned mask, T v, int arg, int width,
       int kind) {
  static_assert(kShuffleType<T>, "__shfl_*_sync takes arithmetic, half or bfloat16 values");
  return WarpOp(op, file, line, mask, width, Bits(v), arg,
                [width, kind](const uint64_t* s, int lane, int lanes, int arg) {
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
  return WarpOp(op, file, line, mask, 32, pred != 0, 0, [](const uint64_t* s, int, int lanes, int) {
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
   ::oneflow::cuda_host::Cur().warps[::oneflow::cuda_host::tls.tid / 32].lane_mask)
#define __any_sync(mask, p) \
  (::oneflow::cuda_host::Ballot("__any_sync", __FILE__, __LINE__, (mask), (p)) != 0u)
#define __syncwarp(...) ::oneflow::cuda_host::SyncWarp(__FILE__, __LINE__, ##__VA_ARGS__)
#define __activemask() \
  (::oneflow::cuda_host::Cur().warps[::oneflow::cuda_host::tls.tid / 32].lane_mask)

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

// CUDA declares the classification functions globally (device code calls isnan(v) unqualified).
using std::isfinite;
using std::isinf;
using std::isnan;
using std::signbit;

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
