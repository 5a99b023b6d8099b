// The profiler's event recorder: what the dispatcher, autograd, boxing, the communicators,
// nn.Graph replays and Python's record_function report into while oneflow.profiler runs.
//
//   profiler::Range r(profiler::Kind::kCollective, "all_reduce");
//   if (r.active()) r.set_bytes(t.nbytes()).set_detail("cpu:[0,1]");  // lazily: only when on
//
// Off (the default) a Range costs one relaxed atomic load and a branch: nothing is allocated
// and no clock is read. On, each Range appends one Event (start/end on the steady clock, the
// recording thread, and what its reporter attached) when it closes. Stop() hands the events
// over and turns recording off. A Range that began before Stop() and ends after it is dropped.
//
// Memory (Options::profile_memory): Storage reports each allocation and free (CountMemory);
// an event carries the bytes its thread allocated minus freed while it was open, per device
// type. Device time (Options::cuda): a reporter that runs work on a CUDA stream calls
// MarkDevice(index) and the installed DeviceTimer records an event pair on that stream
// around the work; the elapsed times are read once, in Stop(), never with a sync per op.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace oneflow {
namespace profiler {

// What reported an event; Python names each kind's category in the Chrome trace.
enum class Kind : uint8_t {
  kOp,          // a dispatcher call (CallOp): the op's name
  kBackward,    // an autograd node's gradient formula (MatmulBackward0), nested in backward
  kBoxing,      // one boxing step: its SBP change and the bytes it moves per rank
  kCollective,  // a communicator call: its kind, group and bytes
  kGraphStep,   // one step of an nn.Graph replay
  kUser,        // record_function, profiler steps, DataLoader waits (Python)
  kCount,
};
const char* KindName(Kind kind);  // "op", "backward", "boxing", "collective", "graph", "user"

struct Event {
  Kind kind = Kind::kOp;
  std::string name;
  int64_t start_ns = 0, end_ns = 0;  // steady clock (NowNs)
  int64_t thread = 0;                // the OS thread id
  std::string shapes;                // input shapes when Options::record_shapes: "[[2, 3], []]"
  std::string detail;                // boxing: the step; collective: the group
  std::string stack;                 // with_stack: the op call's frames, innermost first
  int64_t bytes = -1;                // bytes moved (boxing, collectives); -1: not applicable
  int64_t memory[2] = {0, 0};        // net bytes allocated while open: cpu, cuda
  int device = -1;                   // CUDA device index of the device times, -1: none
  int64_t device_start_ns = -1, device_end_ns = -1;  // on the steady clock, from CUDA events
  void* device_marks[2] = {nullptr, nullptr};        // the DeviceTimer's events until Stop()
};

struct Options {
  bool record_shapes = false;
  bool profile_memory = false;
  bool cuda = false;  // device times of CUDA work (needs a DeviceTimer: CUDA builds)
  // The call stack of every op event (Event::stack), from the installed StackProvider.
  bool with_stack = false;
};

// What the Python binding installs: the Python call stack of the running thread ("file(line):
// function" frames, innermost first, one a line; empty without one). Start refuses
// Options::with_stack while none is installed.
using StackProvider = std::string (*)();
void SetStackProvider(StackProvider provider);
bool WithStack();
// REQUIRES: WithStack().
std::string CurrentStack();

// What the CUDA backend installs: event pairs on a device's current stream. Unset members: no
// device timing in this build (Start refuses Options::cuda).
struct DeviceTimer {
  void* (*mark)(int device) = nullptr;  // records an event on the device's stream
  // Waits for the marks (once, in Stop()) and gives the steady-clock time of each; the marks
  // come in (start, end) pairs, a range's two.
  void (*resolve)(void* const* marks, int64_t* out_ns, size_t n) = nullptr;
  void (*release)(void* mark) = nullptr;
  // Called by Start: forget the reference marks of the last session (a device's first mark
  // in a session records one whose steady-clock time it learns with one sync).
  void (*reset)() = nullptr;
};
void SetDeviceTimer(const DeviceTimer& timer);

namespace detail {
extern std::atomic<bool> g_on;
extern std::atomic<bool> g_memory;
void AddMemory(int device_type, int64_t delta);
}  // namespace detail

inline bool Enabled() { return detail::g_on.load(std::memory_order_relaxed); }
bool RecordShapes();

// Starts recording; throws oneflow::Error when recording is already on or Options::cuda is set
// in a build without a DeviceTimer.
void Start(const Options& options);
// The events recorded since Start, ordered by start; recording is off afterwards.
std::vector<Event> Stop();
int64_t NowNs();
int64_t ThreadId();  // this thread's OS id

// Storage's report of an allocation (delta > 0) or free; device_type 0 cpu, 1 cuda.
inline void CountMemory(int device_type, int64_t delta) {
  if (detail::g_memory.load(std::memory_order_relaxed)) detail::AddMemory(device_type, delta);
}

class Range {
 public:
  Range(Kind kind, const char* name) {
    if (Enabled()) Begin(kind, name);
  }
  Range(Kind kind, const std::string& name) {
    if (Enabled()) Begin(kind, name.c_str());
  }
  ~Range() {
    if (open_) End();
  }
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

  bool active() const { return open_ != nullptr; }
  // REQUIRES: active().
  Range& set_bytes(int64_t bytes);
  Range& set_detail(std::string detail);
  Range& set_shapes(std::string shapes);
  Range& set_name(std::string name);
  Range& set_stack(std::string stack);
  // The work this range times runs on CUDA device `device` (its current stream): with
  // Options::cuda, marks the stream now and again when the range ends.
  Range& MarkDevice(int device);
  // Closes the range before its scope ends (Python's record_function).
  void End();

 private:
  struct Open;  // the event being recorded, and what its end needs (off: none, no allocation)
  void Begin(Kind kind, const char* name);
  Open* open_ = nullptr;  // owned; End() deletes it
};

}  // namespace profiler
}  // namespace oneflow
