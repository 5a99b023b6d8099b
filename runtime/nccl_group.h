// NCCL collectives for the CUDA tensors of a communicator's group (built only with CUDA).
//
// Every member creates it in the same collective call: members publish their host and GPU
// (PCI bus id) through the control plane; when two members share a GPU NCCL cannot serve the
// group, and Create returns null (the communicator then stages through host memory). Group
// rank 0 draws the NCCL unique id and publishes it; the communicator is initialised
// non-blocking so that a missing peer ends in a timeout naming the rank and the group.
//
// Each call orders itself after the device's compute stream (an event), runs on the group's
// own stream, and makes the compute stream wait for it (another event): the host does not wait,
// so it goes on queueing work (DDP's backward) while the collective runs. Every call's thread
// makes the group's device current before any CUDA call (events and streams belong to it).
//
// Failures: the host waits only where it reads a result (a copy to the CPU, synchronize, a
// bounds check), and while the group has collectives in flight those waits poll it (cuda::Watch):
// an NCCL error, or a collective unfinished after the communicator's timeout, aborts the
// communicator and throws "<op>: rank R in group G failed: ..." / "... timed out after T s".
// The next call of the group reports an earlier collective's failure the same way.
//
// Buffers: the compute stream's wait is queued before the call returns, so any later use of a
// freed block by the caching allocator (which reuses blocks in compute-stream order) comes after
// the collective. With set_deferred_waits the wait is queued later instead; the deferred wait
// then holds the tensors until it is queued. Tensors are contiguous CUDA tensors on this rank's
// device; counts are in elements.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "runtime/control_plane.h"
#include "runtime/shm_group.h"

namespace oneflow {
namespace runtime {

class NcclGroup {
 public:
  // Null when NCCL cannot serve the group (members sharing a GPU, or ONEFLOW_NCCL=0); `why`
  // then says so. Throws on timeout or NCCL errors.
  static std::unique_ptr<NcclGroup> Create(ControlClient& client, const std::string& desc,
                                           int my_rank, int group_rank, int size,
                                           const Device& device, double timeout_s,
                                           std::string* why);
  ~NcclGroup();
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  const Device& device() const { return device_; }

  // Where the compute stream's wait for each following collective goes. Null (the default):
  // queued before the call returns, so all later work of the device sees the result. Otherwise
  // the wait is appended to *waits, for the caller to run where the result is consumed (the
  // Work::Wait of an asynchronous call), so that compute queued meanwhile overlaps the
  // collective; each deferred wait keeps the collective's tensors alive until it ran.
  void set_deferred_waits(std::vector<std::function<void()>>* waits) { deferred_ = waits; }

  void AllReduce(const Tensor& in, const Tensor& out, ReduceOp op, const char* name);
  void Broadcast(const Tensor& t, int root_group_rank, const char* name);
  // counts[i]: elements of group rank i (equal for the even versions).
  void AllGatherV(const Tensor& in, const Tensor& out, const std::vector<int64_t>& counts,
                  const char* name);
  void ReduceScatterV(const Tensor& in, const Tensor& out, const std::vector<int64_t>& counts,
                      ReduceOp op, const char* name);
  void AllToAllV(const Tensor& in, const Tensor& out, const std::vector<int64_t>& in_counts,
                 const std::vector<int64_t>& out_counts, const char* name);
  void Send(const Tensor& t, int peer_group_rank, const char* name);
  void Recv(const Tensor& t, int peer_group_rank, const char* name);

 private:
  struct State;
  NcclGroup(std::unique_ptr<State> state, Device device, std::string desc, int my_rank,
            double timeout_s);
  // Queues enqueue(comm, stream) as one NCCL group call on the group's stream, ordered after
  // the compute stream's work and before its later work; `tensors` are the buffers it uses.
  template <typename F>
  void Run(const char* name, const std::vector<Tensor>& tensors, F&& enqueue);

  std::unique_ptr<State> state_;
  Device device_;
  std::string desc_;
  int my_rank_;
  double timeout_s_;
  std::vector<std::function<void()>>* deferred_ = nullptr;
};

}  // namespace runtime
}  // namespace oneflow
