// The job as one process sees it: who it is (WorldInfo), the control plane (rank 0 serves it,
// every rank is a client), a heartbeat, and the communicators of its groups, created lazily
// and cached by ranks (one communicator moves a group's CPU tensors through shared memory or
// Gloo and its CUDA tensors through NCCL).
//
//   runtime::Env& env = runtime::Env::Get();     // first call joins the job
//   env.Comm({0, 1}).AllReduce(t);                // every member must ask for the same group
//   oneflow::comm::AllReduce(t);                  // the same over the whole world
//
// Rank 0 binds MASTER_ADDR:MASTER_PORT; the others connect within the timeout
// (ONEFLOW_TIMEOUT_SECONDS), presenting the job's token (ONEFLOW_JOB_TOKEN, else the job's
// description: see JobDescription), and all meet before Get() returns; meanwhile rank 0 prints
// every ONEFLOW_WAIT_REPORT_SECONDS (30) which ranks it still waits for. A thread sends a heartbeat
// every second; the master aborts the job when a rank stays silent for
// ONEFLOW_HEARTBEAT_TIMEOUT_SECONDS (default 10); the same thread ends the job when a
// collective waits for a member known to be elsewhere (call_watch.h). When a rank learns the job
// was aborted (another rank failed or died) it prints one line naming that rank and exits with
// status 1, instead of waiting in a collective until the timeout. At exit every rank meets the
// others once (so rank 0 keeps serving until all are done).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/device.h"
#include "runtime/communicator.h"
#include "runtime/world.h"

namespace oneflow {
namespace runtime {

class Env {
 public:
  // The process's Env, created (and the job joined) on first use.
  static Env& Get();
  // True once Get() has run in this process.
  static bool Started();

  const WorldInfo& world() const { return world_; }
  int rank() const { return world_.rank; }
  int world_size() const { return world_.world_size; }
  // Null in a job of one process.
  ControlClient* control() { return client_.get(); }

  // The communicator of `ranks` (global ranks, in group order); created by the first call of
  // each member (a collective among them), then cached. It serves tensors of either device
  // type; `device` only matters in a build without CUDA, which refuses kCUDA.
  Communicator& Comm(const std::vector<int>& ranks, DeviceType device = DeviceType::kCPU);
  Communicator& WorldComm(DeviceType device = DeviceType::kCPU);

  // Tells every rank the job failed here; they exit within seconds naming this rank.
  void Abort(const std::string& reason);
  // Meets the other ranks, stops the heartbeat and (rank 0) the control plane. Idempotent; runs
  // at exit.
  void Shutdown();

  ~Env();

 private:
  Env();
  void HeartbeatLoop();
  void Join();
  void StopHeartbeat();

  WorldInfo world_;
  std::unique_ptr<ControlServer> server_;
  std::unique_ptr<ControlClient> client_;
  std::map<std::vector<int>, std::unique_ptr<Communicator>> comms_;
  std::mutex mu_;
  std::thread heartbeat_;
  std::mutex hb_mu_;
  std::condition_variable hb_cv_;
  bool stopping_ = false;
  std::atomic<bool> aborted_{false};  // this rank called Abort
  bool shut_down_ = false;
};

}  // namespace runtime

// The collectives over the whole world, in place where PyTorch's are (see Communicator).
namespace comm {
int GetRank();
int GetWorldSize();
int GetLocalRank();
int GetNodeSize();
void AllReduce(Tensor& t, runtime::ReduceOp op = runtime::ReduceOp::kSum);
void Broadcast(Tensor& t, int src);
// outs[i] receives rank i's t; every entry must have t's shape and dtype.
void AllGather(std::vector<Tensor>& outs, const Tensor& t);
// out = reduction over ranks of ins[rank]; ins has one tensor per rank.
void ReduceScatter(Tensor& out, const std::vector<Tensor>& ins,
                   runtime::ReduceOp op = runtime::ReduceOp::kSum);
void Send(const Tensor& t, int dst, uint32_t tag = 0);
void Recv(Tensor& t, int src, uint32_t tag = 0);
void Barrier();
}  // namespace comm
}  // namespace oneflow
