// Where a random op's kernel finds its seed and counter offset, and random numbers for CUDA
// graphs: while an RngCapture is active on this thread, random ops on its device read
// {seed, base offset} from a tensor on that device instead of taking them as arguments, so a
// captured graph, replayed, draws fresh numbers: before each replay PrepareReplay() moves the
// base to the generator's offset on the device (an add kernel, no host wait) and advances the
// generator by what the capture drew, so replays and eager draws share one sequence and a
// replay draws what eager code would have drawn in its place.
//
//   RngCapture rng(device);        // before the capture (writes the state: one host copy)
//   rng.Begin();                   // random ops on `device` read rng.state()
//   ... capture the step ...
//   rng.End();                     // rng.draws(): the counters the step takes
//   for (...) { rng.PrepareReplay(); /* launch the graph */ }
//
// The CPU kernels read the state as well (host memory). Where a replay runs the ops again
// from their recorded attrs (the stand-in CUDA device, ONEFLOW_FAKE_CUDA=1, which has no
// graphs), it does so between BeginReplay() and End(), and draws what the graph would.
#pragma once

#include <cstdint>

#include "core/attrs.h"
#include "core/ops/counter_rng.h"
#include "core/tensor.h"

namespace oneflow {

// The source of a random op's numbers from its attrs "seed" and "offset", on `device`.
rng::Source RngSource(const Attrs& a, const Device& device);
// Its shard window (attrs "logical_shape" and "shard_start"), for a draw of shape `local`.
rng::Window RngWindow(const Attrs& a, const Shape& local, const char* op);

class RngCapture {
 public:
  explicit RngCapture(const Device& device);
  ~RngCapture();
  RngCapture(const RngCapture&) = delete;
  RngCapture& operator=(const RngCapture&) = delete;

  // From Begin to End random ops on the device, on this thread, read state(); they draw what
  // eager code would have (the state is set to the generator's seed and offset).
  void Begin();
  // After PrepareReplay: from BeginReplay to End the ops, run again with the attrs they had in
  // the capture, read the state as the captured kernels do.
  void BeginReplay();
  void End();
  // Counters the ops between Begin and End reserved.
  uint64_t draws() const { return draws_; }
  // int64 {seed, base offset} on the device.
  const Tensor& state() const { return state_; }
  const Device& device() const { return device_; }
  // Before a replay: the base becomes the generator's offset (device add, no host wait) and
  // the generator advances past the replay's draws. A new seed (manual_seed since the last
  // replay) is written by a host copy. Returns the base.
  uint64_t PrepareReplay();

  // The capture active on this thread for `device`, or nullptr.
  static const RngCapture* Active(const Device& device);
  // An op's offset relative to the base (its attrs' offset minus the generator's offset at
  // Begin).
  uint64_t Relative(uint64_t offset) const { return offset - begin_offset_; }

 private:
  Device device_;
  Tensor state_;
  uint64_t seed_ = 0;          // the seed state_ holds
  uint64_t base_ = 0;          // the base state_ holds
  uint64_t begin_offset_ = 0;  // the generator's offset at Begin
  uint64_t draws_ = 0;
  const RngCapture* prev_ = nullptr;
  bool active_ = false;
  bool replaying_ = false;
};

}  // namespace oneflow
