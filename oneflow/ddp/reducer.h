// DistributedDataParallel's gradient reducer: parameters are grouped into buckets (in reverse
// order, the order backward produces their gradients); as soon as every gradient of a bucket
// is accumulated, it is copied into its bucket's flat buffer; once a bucket is complete it is
// all-reduced (averaged) asynchronously on the communicator's worker thread while backward goes
// on. At the end of backward the reducer waits for the buckets and makes each parameter's .grad
// a view of its bucket (as PyTorch's gradient_as_bucket_view: no copy back; the next reduction
// overwrites it, and a .grad still that view is not copied again). When the ranks share a
// machine the CPU buckets live in shared memory and are reduced in place across the ranks.
//
//   auto reducer = ddp::Reducer::Create(params, names, runtime::Env::Get().WorldComm(), {});
//   reducer->PrepareForBackward();  // in the wrapped forward
//   loss.backward();                // buckets go out during backward, finished at its end
//   optimizer.Step();               // sees averaged gradients
//
// Every rank must launch the same buckets in the same order: buckets go out in index order,
// each once all earlier ones have. A parameter without a gradient at the end of backward is an
// error (naming it) unless find_unused_parameters, which reduces zeros in its place and leaves
// .grad untouched where no rank produced one.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "runtime/communicator.h"

namespace oneflow {
namespace ddp {

struct ReducerOptions {
  int64_t bucket_cap_bytes = 25 << 20;
  int64_t first_bucket_cap_bytes = 1 << 20;  // small, so communication starts early
  bool find_unused_parameters = false;
  // Reduce buckets on the communicator's thread while backward goes on (true), or inline in
  // backward as each bucket completes (false): overlap pays off only with a core to spare for
  // the communication thread; on an oversubscribed machine the thread only steals the compute
  // threads' cores and waits to be scheduled at every meeting with its peers.
  bool overlap = true;
};

struct ReducerStats {
  int64_t reductions = 0;      // backward passes whose gradients were averaged
  double comm_seconds = 0;     // time the worker spent in the buckets' all-reduces
  double exposed_seconds = 0;  // time backward waited for them (all of it without overlap)
  // Gradient bytes copied into buckets; gradients computed in their bucket (see
  // AutogradMeta::grad_buffer) and this rank's own part of a shared bucket are not copied.
  int64_t copied_bytes = 0;
};

class Reducer : public std::enable_shared_from_this<Reducer> {
 public:
  // params: leaves requiring grad, local (not global) tensors of one device; names for errors.
  static std::shared_ptr<Reducer> Create(std::vector<Tensor> params, std::vector<std::string> names,
                                         runtime::Communicator& comm, ReducerOptions options);

  ~Reducer();

  // Arms the reducer for the next backward pass (no-op while sync is off).
  void PrepareForBackward();
  // no_sync(): while false, gradients accumulate locally and nothing is reduced.
  void set_sync(bool sync) { sync_ = sync; }
  bool sync() const { return sync_; }
  // Parameter indices per bucket, in launch order.
  std::vector<std::vector<int>> bucket_indices() const;
  ReducerStats stats() const { return stats_; }
  bool overlap() const { return options_.overlap; }

 private:
  struct Bucket {
    std::vector<int> params;
    std::vector<int64_t> offsets;  // element offset of each parameter in flat
    Tensor flat;                   // the gradients, then their average; .grad are views of it
    std::pair<int64_t, int64_t> part{0, 0};  // elements of flat this rank reduces (shared memory)
    std::vector<std::pair<int64_t, Tensor>> local;  // gradients read in place for that part
    int pending = 0;
    std::shared_ptr<runtime::Work> work;
  };

  Reducer(std::vector<Tensor> params, std::vector<std::string> names, runtime::Communicator& comm,
          ReducerOptions options);
  void InstallHooks();
  void OnGradReady(int index);
  void MarkReady(int index, bool used);
  void LaunchReadyBuckets();
  void Finalize();
  void Reset();

  std::vector<Tensor> params_;
  std::vector<std::string> names_;
  runtime::Communicator& comm_;
  ReducerOptions options_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;  // parameter -> bucket
  std::vector<int> slot_of_;    // parameter -> position in its bucket
  std::vector<char> ready_;
  std::vector<int32_t> used_;  // this rank produced a gradient (find_unused_parameters)
  std::shared_ptr<runtime::Work> used_work_;
  Tensor used_flags_;
  size_t next_bucket_ = 0;
  bool armed_ = false;
  bool finalize_queued_ = false;
  bool sync_ = true;
  ReducerStats stats_;
  std::shared_ptr<double> comm_seconds_ = std::make_shared<double>(0.0);  // written by the worker
};

// Checks that every member of comm holds parameters of the same shapes in the same order;
// throws one line naming the first parameter and rank that differ.
void VerifyParamShapes(runtime::Communicator& comm, const std::vector<Tensor>& params,
                       const std::vector<std::string>& names);

// Whether overlapping communication with backward pays off for local_ranks processes on this
// machine: its usable cores cover every rank's compute threads (OMP_NUM_THREADS, else all
// cores) plus one communication thread each.
bool OverlapPaysOff(int local_ranks);

// Overwrites tensors on every member with root's (a global rank): one broadcast per dtype.
void BroadcastCoalesced(runtime::Communicator& comm, const std::vector<Tensor>& tensors, int root);

}  // namespace ddp
}  // namespace oneflow
