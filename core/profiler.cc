#include "core/profiler.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>

#include "core/error.h"

namespace oneflow {
namespace profiler {

namespace detail {
std::atomic<bool> g_on{false};
std::atomic<bool> g_memory{false};
}  // namespace detail

namespace {

struct Session {
  std::mutex mu;
  Options options;
  uint64_t generation = 0;  // a Range records only into the session it began in
  std::vector<Event> events;
  DeviceTimer timer;
};
Session& S() {
  static Session* s = new Session;  // never destroyed: ranges may close during exit
  return *s;
}
std::atomic<uint64_t> g_generation{0};
std::atomic<bool> g_cuda{false};
std::atomic<bool> g_shapes{false};
std::atomic<bool> g_stack{false};
std::atomic<StackProvider> g_stack_provider{nullptr};

thread_local int64_t t_memory[2] = {0, 0};

}  // namespace

const char* KindName(Kind kind) {
  static const char* const kNames[] = {"op", "backward", "boxing", "collective", "graph", "user"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<size_t>(Kind::kCount),
                "one name per event kind");
  return kNames[static_cast<int>(kind)];
}

void SetDeviceTimer(const DeviceTimer& timer) {
  std::lock_guard<std::mutex> lock(S().mu);
  S().timer = timer;
}

void detail::AddMemory(int device_type, int64_t delta) { t_memory[device_type & 1] += delta; }

bool RecordShapes() { return g_shapes.load(std::memory_order_relaxed); }

void SetStackProvider(StackProvider provider) { g_stack_provider.store(provider); }
bool WithStack() { return g_stack.load(std::memory_order_relaxed); }
std::string CurrentStack() { return g_stack_provider.load()(); }

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t ThreadId() {
  thread_local int64_t id = static_cast<int64_t>(::syscall(SYS_gettid));
  return id;
}

void Start(const Options& options) {
  Session& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (detail::g_on.load()) {
    throw Error("profiler: recording is already on (one profile at a time per process)");
  }
  if (options.cuda && !s.timer.mark) {
    throw Error(
        "profiler: CUDA activity needs a build with CUDA (this one has none); profile "
        "ProfilerActivity.CPU only");
  }
  if (options.with_stack && !g_stack_provider.load()) {
    throw Error("profiler: with_stack needs a stack provider (the Python package installs one)");
  }
  if (options.cuda && s.timer.reset) s.timer.reset();
  s.options = options;
  s.events.clear();
  s.generation = g_generation.fetch_add(1) + 1;
  g_cuda.store(options.cuda);
  g_shapes.store(options.record_shapes);
  g_stack.store(options.with_stack);
  detail::g_memory.store(options.profile_memory);
  detail::g_on.store(true);
}

std::vector<Event> Stop() {
  Session& s = S();
  std::vector<Event> events;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    detail::g_on.store(false);
    detail::g_memory.store(false);
    g_cuda.store(false);
    g_shapes.store(false);
    g_stack.store(false);
    s.generation = 0;
    events.swap(s.events);
  }
  // Device times: every mark is read here, after the work ran (the timer waits once).
  std::vector<void*> marks;
  std::vector<size_t> owners;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].device < 0) continue;
    marks.push_back(events[i].device_marks[0]);
    marks.push_back(events[i].device_marks[1]);
    owners.push_back(i);
  }
  if (!marks.empty() && s.timer.resolve) {
    std::vector<int64_t> ns(marks.size());
    s.timer.resolve(marks.data(), ns.data(), marks.size());
    for (size_t k = 0; k < owners.size(); ++k) {
      Event& e = events[owners[k]];
      e.device_start_ns = ns[2 * k];
      e.device_end_ns = ns[2 * k + 1];
    }
  }
  for (void* m : marks) {
    if (s.timer.release) s.timer.release(m);
  }
  for (Event& e : events) e.device_marks[0] = e.device_marks[1] = nullptr;
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return a.start_ns < b.start_ns; });
  return events;
}

struct Range::Open {
  Event event;
  uint64_t generation = 0;
  int64_t memory_at_begin[2] = {0, 0};
};

void Range::Begin(Kind kind, const char* name) {
  open_ = new Open;
  Event& e = open_->event;
  e.kind = kind;
  e.name = name;
  e.thread = ThreadId();
  open_->memory_at_begin[0] = t_memory[0];
  open_->memory_at_begin[1] = t_memory[1];
  open_->generation = g_generation.load(std::memory_order_relaxed);
  e.start_ns = NowNs();
}

Range& Range::set_bytes(int64_t bytes) {
  open_->event.bytes = bytes;
  return *this;
}
Range& Range::set_detail(std::string detail) {
  open_->event.detail = std::move(detail);
  return *this;
}
Range& Range::set_shapes(std::string shapes) {
  open_->event.shapes = std::move(shapes);
  return *this;
}
Range& Range::set_stack(std::string stack) {
  open_->event.stack = std::move(stack);
  return *this;
}
Range& Range::set_name(std::string name) {
  open_->event.name = std::move(name);
  return *this;
}

Range& Range::MarkDevice(int device) {
  Event& e = open_->event;
  if (!g_cuda.load(std::memory_order_relaxed) || e.device >= 0) return *this;
  void* (*mark)(int) = S().timer.mark;
  if (!mark) return *this;
  e.device = device;
  e.device_marks[0] = mark(device);
  return *this;
}

void Range::End() {
  std::unique_ptr<Open> open(open_);
  open_ = nullptr;
  Event& e = open->event;
  e.end_ns = NowNs();
  if (e.device >= 0) e.device_marks[1] = S().timer.mark(e.device);
  e.memory[0] = t_memory[0] - open->memory_at_begin[0];
  e.memory[1] = t_memory[1] - open->memory_at_begin[1];
  Session& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.generation != open->generation || !detail::g_on.load(std::memory_order_relaxed)) {
    if (e.device >= 0 && s.timer.release) {
      s.timer.release(e.device_marks[0]);
      s.timer.release(e.device_marks[1]);
    }
    return;  // began in another session, or recording stopped meanwhile
  }
  s.events.push_back(std::move(e));
}

}  // namespace profiler
}  // namespace oneflow
