// NCCL collectives for the CUDA tensors of a communicator's group (built only with CUDA).
//
// Every member creates it in the same collective call: members publish their host and GPU
// (PCI bus id) through the control plane; when two members share a GPU NCCL cannot serve the
// group, and Create returns null (the communicator then stages through host memory). Group
// rank 0 draws the NCCL unique id and publishes it; the communicator is initialised
// non-blocking so that a missing peer ends in a timeout naming the rank and the group.
//
// Each call orders itself after the device's compute stream (an event), runs on the group's
// own stream, makes the compute stream wait for it, and waits on the host for completion
// with the communicator's timeout (polling NCCL's asynchronous error so that a peer's failure
// is reported instead of hanging). Tensors are contiguous CUDA tensors on this rank's device;
// counts are in elements.
#pragma once

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
  template <typename F>
  void Run(const char* name, F&& enqueue);

  std::unique_ptr<State> state_;
  Device device_;
  std::string desc_;
  int my_rank_;
  double timeout_s_;
};

}  // namespace runtime
}  // namespace oneflow
