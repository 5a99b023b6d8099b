// What this process's collectives are doing, for the line a collective that waits too long ends
// with (PyTorch's desync report is the model). Every communicator call marks itself on its
// communicator's CallWatch (WatchScope: a few stores under an uncontended lock). Env's heartbeat
// thread runs WatchTick() every second: a call that has waited over ONEFLOW_DESYNC_SECONDS
// (default 2) posts what it is to the control plane (key "oneflow/doing/<rank>") and reads what
// the other members of its group posted. A member seen twice in a row at the end of its script,
// or in another call of the same group (whose calls run one at a time: it waits for this rank
// there), cannot be on its way to this call, except where both wait in sends and recvs (a
// pipeline's chain of recvs), unless they wait to receive from each other; the job then ends
// at once, with one line naming what every member is doing:
//   ranks disagree in group cpu:[0,1]: rank 0 is in all_reduce(float32, 4 elements), call 2 of
//   group cpu:[0,1], for 3 s; rank 1 is at exit (its script ended after 1 call in group
//   cpu:[0,1]) (every member must make the same calls in the same order)
// A member that posted nothing (computing, or in no collective), or a call of another group (its
// members may still come), leaves the call to its timeout, whose message then adds what every
// member posted (WatchReport).
//
//   CallWatch watch(client, "cpu:[0,1]", {0, 1}, my_rank);   // one per communicator
//   { WatchScope s(watch, print); ... move the data ... }
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/call_print.h"
#include "runtime/control_plane.h"

namespace oneflow {
namespace runtime {

class CallWatch {
 public:
  CallWatch(ControlClient* client, std::string group, std::vector<int> ranks, int my_rank);
  ~CallWatch();
  CallWatch(const CallWatch&) = delete;
  CallWatch& operator=(const CallWatch&) = delete;

  void Enter(const CallPrint& print);
  void Leave();

 private:
  friend std::string WatchTick(ControlClient& client, int my_rank);
  friend void WatchPostExit(ControlClient& client, int my_rank);
  friend std::string WatchPosted(int my_rank);
  // "all_reduce(float32, 4 elements), call 3 of group cpu:[0,1]" (under mu_).
  std::string Token() const;

  ControlClient* client_;
  const std::string group_;
  const std::vector<int> ranks_;
  const int my_rank_;
  std::mutex mu_;
  bool active_ = false;
  bool posted_ = false;
  int suspicious_ = 0;  // ticks in a row a member was seen elsewhere
  CallPrint print_;
  uint64_t calls_ = 0;  // calls so far (the current one included)
  std::chrono::steady_clock::time_point since_;
};

// Marks one call on its watch for the scope.
class WatchScope {
 public:
  WatchScope(CallWatch* watch, const CallPrint& print) : watch_(watch) {
    if (watch_) watch_->Enter(print);
  }
  ~WatchScope() {
    if (watch_) watch_->Leave();
  }
  WatchScope(const WatchScope&) = delete;
  WatchScope& operator=(const WatchScope&) = delete;

 private:
  CallWatch* watch_;
};

// The heartbeat thread's check (see above): the line to end the job with, or "".
std::string WatchTick(ControlClient& client, int my_rank);
// At the end of the script (before the exit barrier): posts where this rank is.
void WatchPostExit(ControlClient& client, int my_rank);
// What this process posts now: its long-waiting calls, and where it is at exit.
std::string WatchPosted(int my_rank);
// For a timeout's message: what each of `ranks` posted ("rank 1 posted nothing (not in a
// collective: computing, or stuck outside collectives)").
std::string WatchReport(ControlClient& client, const std::vector<int>& ranks, int my_rank);

}  // namespace runtime
}  // namespace oneflow
