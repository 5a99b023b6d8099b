// Collectives for a group of ranks: the router between shared memory, NCCL and Gloo over TCP.
//
//   ControlClient client(addr, port, rank, token);
//   Communicator comm(client, {0, 1, 2, 3}, rank, /*timeout_s=*/300);
//   comm.AllReduce(grad, ReduceOp::kSum);
//
// A Communicator checks each call's arguments and picks the path that moves the data:
//   - CUDA tensors: nccl_group.h (NcclGroup: one NCCL communicator per group, created on first
//     use) when NCCL can serve the group, else the CPU path below on host copies;
//   - members on one machine (transport "shm"): shm_group.h (ShmGroup: a shared-memory segment)
//     for all-reduce, broadcast, all-gather(v), reduce-scatter(v) and barrier, and EmptyShared
//     tensors that every member maps (DDP's gradient buckets, reduced in place);
//   - across machines where some share one ("shm+gloo"): all-reduce inside each machine, once
//     between the machines' leaders, then a broadcast inside each machine (a Communicator each);
//   - otherwise, and always for all-to-all(v) and send/recv: gloo_group.h (GlooGroup: Gloo over
//     a full mesh of TCP pairs, rendezvous through the control plane).
// Every operation has the communicator's timeout; a timeout or I/O error becomes a one-line
// oneflow::Error naming the rank, the operation and the group:
//   all_reduce: rank 1 timed out after 5 s in group cpu:[0,1] (is another rank dead or stuck?)
//
// Ranks are global ranks everywhere (my_rank, Broadcast's root, Send/Recv's peer); counts
// vectors are indexed by position in the group's ranks vector and count rows (dim 0).
// Supported dtypes: float32, float64, int32, int64, int8, uint8 (kAvg: floating only).
//
// Calls from several threads are serialized by a mutex and run synchronously; Async() queues a
// call for the communicator's worker thread (work_queue.h) and returns a Work handle (overlap
// with compute). After a timeout the communicator should be considered broken. Destroying it
// closes its TCP pairs: peers still inside an operation with this rank then fail with a
// connection error, so end with Barrier() before tearing a group down.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "runtime/call_watch.h"
#include "runtime/control_plane.h"
#include "runtime/shm_group.h"
#include "runtime/work_queue.h"

namespace oneflow {
namespace runtime {

class GlooGroup;
class NcclGroup;

class Communicator {
 public:
  // Collective over the members of `ranks` (global ranks, each once; my_rank among them): every
  // member must construct it with the same ranks and name. `name` tells apart several
  // communicators over the same ranks in one job (their rendezvous keys would collide
  // otherwise). Throws oneflow::Error when the peers do not show up within timeout_s.
  Communicator(ControlClient& client, std::vector<int> ranks, int my_rank, double timeout_s,
               const std::string& name = "");
  // The group of this rank alone (a job of one process needs no network): collectives are
  // local copies.
  explicit Communicator(int my_rank);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return my_rank_; }           // global rank
  int group_rank() const { return group_rank_; }  // position in ranks()
  int size() const { return static_cast<int>(ranks_.size()); }
  const std::vector<int>& ranks() const { return ranks_; }
  const std::string& description() const { return desc_; }  // "cpu:[0,1]"
  // "shm" when the members share this machine (and ONEFLOW_SHM is not 0), "shm+gloo" across
  // machines where some share one (all-reduce inside each machine first, then once between
  // machines), "gloo" across machines otherwise, "self" for a group of one.
  const char* transport() const;

  // Runs fn(*this) on the communicator's worker thread after every earlier asynchronous call;
  // a synchronous call waits for those first, so every rank sees one order. fn keeps what it
  // captured (tensors) alive until it ran.
  std::shared_ptr<Work> Async(std::function<void(Communicator&)> fn);

  // In place on every rank.
  void AllReduce(Tensor& t, ReduceOp op = ReduceOp::kSum);
  // A 1-d CPU tensor whose memory every member reaches when the group shares memory (transport
  // "shm"); otherwise an ordinary tensor. Collective (every member, same numel and dtype, same
  // order). AllReduce of a view of it (the same offset on every member) reduces in place across
  // the members' memory: no staging copies (DDP's gradient buckets live there).
  Tensor EmptyShared(int64_t numel, DType dtype);
  // For a view t of an EmptyShared tensor: the elements [first, second) of t that this rank
  // reduces in an all-reduce of t; (0, 0) when t is not in shared memory (or the group is one).
  std::pair<int64_t, int64_t> SharedPartOf(const Tensor& t) const;
  // AllReduce of such a view where this rank's data for some elements of its part is not in t:
  // `local` holds (element offset in t, contiguous tensor of t's dtype) pairs, read in place,
  // which saves copying them into shared memory first. Afterwards t holds the reduction.
  void AllReduce(Tensor& t, ReduceOp op, const std::vector<std::pair<int64_t, Tensor>>& local);
  // The reduction of x over the members as a new contiguous tensor; x is left as it is (what
  // boxing from partial to broadcast needs). Through shared memory, x is read in place for
  // the part this rank reduces and only the rest is copied into a scratch region the group
  // keeps (grown collectively to the largest call, up to kMaxScratchBytes).
  Tensor AllReduced(const Tensor& x, ReduceOp op = ReduceOp::kSum);
  static constexpr size_t kMaxScratchBytes = size_t{64} << 20;
  // t of the root (a global rank) overwrites t everywhere; shapes must agree.
  void Broadcast(Tensor& t, int root);
  // out = cat(in of every rank, dim 0); out has size() * in.shape[0] rows.
  void AllGather(const Tensor& in, Tensor& out);
  // Uneven: rank i contributes counts[i] rows; out has sum(counts) rows.
  void AllGatherV(const Tensor& in, Tensor& out, const std::vector<int64_t>& counts);
  // out = rows [r*k, (r+1)*k) of the reduction of in over ranks, k = in.shape[0] / size().
  // Gloo 0.5 has no reduce_scatter: implemented as an all-reduce of a copy and a local slice
  // (size() times the traffic of a real reduce-scatter).
  void ReduceScatter(const Tensor& in, Tensor& out, ReduceOp op = ReduceOp::kSum);
  // Uneven: rank i receives counts[i] rows; in has sum(counts) rows.
  void ReduceScatterV(const Tensor& in, Tensor& out, const std::vector<int64_t>& counts,
                      ReduceOp op = ReduceOp::kSum);
  // Rows [i*k, (i+1)*k) of in go to rank i; out's rows [j*k, (j+1)*k) come from rank j.
  void AllToAll(const Tensor& in, Tensor& out);
  // Uneven: in_counts[i] rows go to rank i, out_counts[j] rows come from rank j.
  void AllToAllV(const Tensor& in, Tensor& out, const std::vector<int64_t>& in_counts,
                 const std::vector<int64_t>& out_counts);
  // Point to point (peer is a global rank); a Send matches the Recv with the same tag.
  void Send(const Tensor& t, int peer, uint32_t tag = 0);
  void Recv(Tensor& t, int peer, uint32_t tag = 0);
  // Settles, with every member, how this group moves CUDA tensors of `device` (NCCL or the
  // host path; collective: every member calls it). Collectives settle it on their first CUDA
  // call, where all members take part; point-to-point transfers involve only two members, so
  // a caller whose pairs do not cover the group (boxing between placements) calls this first,
  // from every member, or the first Send would wait for members that never come.
  void PrepareCuda(const Device& device);
  void Barrier();

 private:
  void Connect();  // the constructor's rendezvous: shared memory, the hierarchy, Gloo
  int GroupRankOf(int global_rank, const char* op) const;
  // CUDA tensors: NCCL when it can serve the group (one GPU per member; created on first use,
  // null otherwise), else the CPU collective on host copies of the tensors. `host` gets the
  // host copies of ins then outs (in place: the same copy).
  NcclGroup* Nccl(const Device& device, const char* op);
  void OnCuda(const char* name, const std::vector<Tensor>& ins, const std::vector<Tensor>& outs,
              const std::function<void(NcclGroup&)>& nccl,
              const std::function<void(std::vector<Tensor>&)>& host);
  void Drain();  // waits for the queued asynchronous calls (not on the worker itself)
  // The shared memory t lives in (a tensor from EmptyShared, or a view of one), else null.
  std::shared_ptr<const SharedRegions> SharedRegionsOf(const Tensor& t) const;
  // all_gather(v) for a group of one or through shared memory; elems[i]: rank i's elements.
  void GatherLocally(const Tensor& in, Tensor& out, const std::vector<int64_t>& elems,
                     const char* name);
  void MakeHierarchy(const std::vector<std::string>& hosts);

  ControlClient* client_ = nullptr;
  std::vector<int> ranks_;
  int my_rank_;
  int group_rank_ = -1;
  double timeout_s_;
  std::string desc_;
  std::unique_ptr<GlooGroup> gloo_;  // every member over TCP (null for the group of one)
  std::unique_ptr<ShmGroup> shm_;
  // Across hosts (transport "shm+gloo"): this host's members, the hosts' leaders (on leaders
  // only) and this host's leader; leader_ < 0 without a hierarchy.
  std::unique_ptr<Communicator> local_, leaders_;
  int leader_ = -1;
  struct SharedTensor {
    std::weak_ptr<Storage> storage;
    std::weak_ptr<const SharedRegions> regions;
  };
  std::vector<SharedTensor> shared_;  // from EmptyShared (their memory lives while they do)
  int64_t shared_created_ = 0;        // EmptyShared calls so far: names their segments
  std::shared_ptr<const SharedRegions> scratch_;  // AllReduced's (null until first needed)
  size_t scratch_bytes_ = 0;
  std::unique_ptr<NcclGroup> nccl_;
  bool nccl_tried_ = false;
  std::unique_ptr<CallWatch> watch_;  // what this rank's calls are doing (null for one rank)
  std::mutex mu_;
  // Asynchronous calls. Last: destroyed first, it runs the calls still queued (which use the
  // members above) and joins its thread.
  WorkQueue queue_;
};

}  // namespace runtime
}  // namespace oneflow
