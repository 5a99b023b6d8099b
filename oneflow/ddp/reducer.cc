#include "oneflow/ddp/reducer.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <thread>

#include "core/autograd.h"
#include "core/functional.h"

namespace oneflow {
namespace ddp {

using runtime::Communicator;
using runtime::ReduceOp;
using Clock = std::chrono::steady_clock;

namespace {

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The part of flat that holds the parameter at `offset`, shaped like it.
Tensor Piece(const Tensor& flat, int64_t offset, const Tensor& like) {
  return fn::view(fn::slice(flat, 0, offset, offset + like.numel()), like.shape().dims());
}

}  // namespace

std::shared_ptr<Reducer> Reducer::Create(std::vector<Tensor> params, std::vector<std::string> names,
                                         Communicator& comm, ReducerOptions options) {
  std::shared_ptr<Reducer> r(new Reducer(std::move(params), std::move(names), comm, options));
  r->InstallHooks();
  return r;
}

Reducer::Reducer(std::vector<Tensor> params, std::vector<std::string> names, Communicator& comm,
                 ReducerOptions options)
    : params_(std::move(params)), names_(std::move(names)), comm_(comm), options_(options) {
  ONEFLOW_CHECK(names_.size() == params_.size(), "DistributedDataParallel: ", params_.size(),
                " parameters but ", names_.size(), " names");
  const int n = static_cast<int>(params_.size());
  for (int i = 0; i < n; ++i) {
    const Tensor& p = params_[i];
    ONEFLOW_CHECK(!p.is_global(), "DistributedDataParallel: parameter '", names_[i],
                  "' is a global tensor; DDP wraps a local module (global modules need no DDP: "
                  "their broadcast parameters get all-reduced gradients already)");
    ONEFLOW_CHECK(p.requires_grad() && p.is_leaf(), "DistributedDataParallel: parameter '",
                  names_[i], "' is not a leaf that requires grad");
    ONEFLOW_CHECK(IsFloating(p.dtype()), "DistributedDataParallel: parameter '", names_[i],
                  "' has dtype ", DTypeName(p.dtype()), ", expected a floating point dtype");
    ONEFLOW_CHECK(p.device() == params_[0].device(), "DistributedDataParallel: parameter '",
                  names_[i], "' is on ", p.device().ToString(), " but '", names_[0], "' on ",
                  params_[0].device().ToString(), "; put the module on one device");
  }
  // Reverse order (backward's), one open bucket per dtype; a bucket closes at its byte cap.
  bucket_of_.assign(n, -1);
  slot_of_.assign(n, -1);
  std::map<DType, int> open;
  std::vector<int64_t> bytes;
  for (int i = n - 1; i >= 0; --i) {
    DType dt = params_[i].dtype();
    auto it = open.find(dt);
    if (it == open.end()) {
      it = open.emplace(dt, static_cast<int>(buckets_.size())).first;
      buckets_.emplace_back();
      bytes.push_back(0);
    }
    int b = it->second;
    bucket_of_[i] = b;
    slot_of_[i] = static_cast<int>(buckets_[b].params.size());
    buckets_[b].params.push_back(i);
    bytes[b] += params_[i].numel() * static_cast<int64_t>(SizeOf(dt));
    int64_t cap = b == 0 ? options_.first_bucket_cap_bytes : options_.bucket_cap_bytes;
    if (bytes[b] >= cap) open.erase(it);
  }
  for (Bucket& bucket : buckets_) {
    int64_t total = 0;
    for (int i : bucket.params) {
      bucket.offsets.push_back(total);
      total += params_[i].numel();
    }
    const Tensor& first = params_[bucket.params[0]];
    if (first.is_cpu()) {
      // In shared memory when the ranks share a machine: reduced in place, no staging copies.
      NoGradGuard no_grad;
      bucket.flat = comm_.EmptyShared(total, first.dtype());
      fn::fill_(bucket.flat, 0.0);
      bucket.part = comm_.SharedPartOf(bucket.flat);
    } else {
      bucket.flat = fn::zeros(Shape({total}), first.dtype(), first.device());
    }
  }
  // Backward computes each gradient straight into its place in the bucket where it can (the
  // weight of a linear layer): nothing to copy before the reduction.
  for (const Bucket& bucket : buckets_) {
    for (size_t s = 0; s < bucket.params.size(); ++s) {
      const Tensor& p = params_[bucket.params[s]];
      p.impl()->mutable_autograd().grad_buffer =
          Piece(bucket.flat, bucket.offsets[s], p).impl_ptr();
    }
  }
  ready_.assign(n, 0);
  used_.assign(n, 0);
  Reset();
}

Reducer::~Reducer() {
  for (const Bucket& bucket : buckets_) {
    for (int i : bucket.params) {
      AutogradMeta& am = params_[i].impl()->mutable_autograd();
      if (am.grad_buffer && am.grad_buffer->storage == bucket.flat.storage())
        am.grad_buffer.reset();
    }
  }
}

void Reducer::InstallHooks() {
  std::weak_ptr<Reducer> weak = weak_from_this();
  for (size_t i = 0; i < params_.size(); ++i) {
    int index = static_cast<int>(i);
    params_[i].impl()->mutable_autograd().post_accumulate_grad_hooks.push_back(
        [weak, index](const Tensor&) {
          if (auto self = weak.lock()) self->OnGradReady(index);
        });
  }
}

std::vector<std::vector<int>> Reducer::bucket_indices() const {
  std::vector<std::vector<int>> out;
  for (const Bucket& b : buckets_) out.push_back(b.params);
  return out;
}

void Reducer::Reset() {
  std::fill(ready_.begin(), ready_.end(), 0);
  std::fill(used_.begin(), used_.end(), 0);
  for (Bucket& b : buckets_) {
    b.pending = static_cast<int>(b.params.size());
    b.local.clear();
    b.work.reset();
  }
  used_work_.reset();
  next_bucket_ = 0;
  armed_ = false;
  finalize_queued_ = false;
}

void Reducer::PrepareForBackward() {
  if (!sync_) return;
  Reset();
  armed_ = true;
}

void Reducer::OnGradReady(int index) {
  if (!sync_) return;  // no_sync(): accumulate locally
  if (!armed_) {
    throw Error(StrCat("DistributedDataParallel: a gradient reached parameter '", names_[index],
                       "' in a backward pass that did not follow a forward of the wrapped model "
                       "(or a second backward after one forward); call the DDP model itself, ",
                       "not .module, before each backward"));
  }
  if (ready_[index]) {
    throw Error(StrCat("DistributedDataParallel: parameter '", names_[index],
                       "' received its gradient twice in one backward pass"));
  }
  if (!finalize_queued_) {
    std::weak_ptr<Reducer> weak = weak_from_this();
    QueueBackwardCallback([weak] {
      if (auto self = weak.lock()) self->Finalize();
    });
    finalize_queued_ = true;
  }
  MarkReady(index, true);
  LaunchReadyBuckets();
}

void Reducer::MarkReady(int index, bool used) {
  ready_[index] = 1;
  used_[index] = used ? 1 : 0;
  Bucket& bucket = buckets_[bucket_of_[index]];
  const Tensor& p = params_[index];
  Tensor grad = p.grad();
  Tensor piece = Piece(bucket.flat, bucket.offsets[slot_of_[index]], p);
  --bucket.pending;
  NoGradGuard no_grad;
  if (!grad.defined()) {
    fn::fill_(piece, 0.0);
    return;
  }
  const int64_t offset = bucket.offsets[slot_of_[index]], n = p.numel();
  if (grad.storage() == piece.storage() && grad.offset() == piece.offset() &&
      grad.is_contiguous()) {
    return;  // .grad is still the view of the last reduction: already in place
  }
  // The elements [a, b) of this gradient fall into the part of the bucket this rank reduces:
  // the reduction reads them from the gradient itself; only the rest, which other ranks
  // read, is copied into the bucket's shared memory.
  const int64_t a = std::clamp(bucket.part.first - offset, int64_t{0}, n);
  const int64_t b = std::clamp(bucket.part.second - offset, int64_t{0}, n);
  const int64_t item = static_cast<int64_t>(SizeOf(p.dtype()));
  if (a >= b || !grad.is_contiguous() || !grad.is_cpu()) {
    fn::copy_(piece, grad);
    stats_.copied_bytes += n * item;
    return;
  }
  stats_.copied_bytes += (n - (b - a)) * item;
  auto flat = [](const Tensor& t, int64_t from, int64_t to) {
    return Tensor::MakeView(t, Shape({to - from}), {1}, t.offset() + from);
  };
  if (a > 0) fn::copy_(flat(piece, 0, a), flat(grad, 0, a));
  if (b < n) fn::copy_(flat(piece, b, n), flat(grad, b, n));
  bucket.local.emplace_back(offset + a, flat(grad, a, b));
}

void Reducer::LaunchReadyBuckets() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    Bucket& b = buckets_[next_bucket_++];
    Tensor flat = b.flat;
    std::vector<std::pair<int64_t, Tensor>> local = std::move(b.local);
    b.local.clear();
    if (!options_.overlap) {
      Clock::time_point start = Clock::now();
      comm_.AllReduce(flat, ReduceOp::kAvg, local);
      const double seconds = SecondsSince(start);
      *comm_seconds_ += seconds;
      stats_.exposed_seconds += seconds;
      continue;
    }
    std::shared_ptr<double> seconds = comm_seconds_;
    b.work = comm_.Async([flat, local, seconds](Communicator& c) mutable {
      Clock::time_point start = Clock::now();
      c.AllReduce(flat, ReduceOp::kAvg, local);
      *seconds += SecondsSince(start);
    });
  }
}

void Reducer::Finalize() {
  if (!armed_) return;
  NoGradGuard no_grad;
  const int n = static_cast<int>(params_.size());
  for (int i = 0; i < n; ++i) {
    if (ready_[i]) continue;
    if (!options_.find_unused_parameters) {
      std::string name = names_[i];
      Reset();
      throw Error(
          StrCat("DistributedDataParallel: parameter '", name,
                 "' got no gradient in this backward on "
                 "rank ",
                 comm_.rank(),
                 " (it took no part in the loss); pass "
                 "find_unused_parameters=True to DistributedDataParallel, or use every parameter"));
    }
    MarkReady(i, false);
  }
  LaunchReadyBuckets();
  if (options_.find_unused_parameters) {
    used_flags_ = fn::zeros(Shape({static_cast<int64_t>(n)}), DType::kInt32);
    std::copy(used_.begin(), used_.end(), used_flags_.data<int32_t>());
    Tensor flags = used_flags_;
    used_work_ =
        comm_.Async([flags](Communicator& c) mutable { c.AllReduce(flags, ReduceOp::kMax); });
  }
  Clock::time_point start = Clock::now();
  for (Bucket& b : buckets_) {
    if (b.work) b.work->Wait();
  }
  if (used_work_) used_work_->Wait();
  stats_.exposed_seconds += SecondsSince(start);
  stats_.comm_seconds = *comm_seconds_;
  ++stats_.reductions;

  for (const Bucket& b : buckets_) {
    for (size_t s = 0; s < b.params.size(); ++s) {
      int i = b.params[s];
      if (options_.find_unused_parameters && used_flags_.data<int32_t>()[i] == 0) continue;
      params_[i].set_grad(Piece(b.flat, b.offsets[s], params_[i]));
    }
  }
  Reset();
}

bool OverlapPaysOff(int local_ranks) {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cores = sched_getaffinity(0, sizeof(set), &set) == 0
                        ? CPU_COUNT(&set)
                        : static_cast<int>(std::thread::hardware_concurrency());
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const int omp_threads = omp ? std::atoi(omp) : 0;
  const int threads = omp_threads > 0 ? omp_threads : cores;
  return cores >= std::max(local_ranks, 1) * (threads + 1);
}

void VerifyParamShapes(Communicator& comm, const std::vector<Tensor>& params,
                       const std::vector<std::string>& names) {
  // Each rank describes its parameters as [count, ndim, dims..., ndim, dims...].
  std::vector<int64_t> desc{static_cast<int64_t>(params.size())};
  for (const Tensor& p : params) {
    desc.push_back(p.ndim());
    for (int64_t d : p.shape().dims()) desc.push_back(d);
  }
  Tensor len = fn::full(Shape({1}), static_cast<double>(desc.size()), DType::kInt64);
  Tensor lens = fn::zeros(Shape({comm.size()}), DType::kInt64);
  comm.AllGather(len, lens);
  std::vector<int64_t> counts(lens.data<int64_t>(), lens.data<int64_t>() + comm.size());
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  Tensor mine = fn::zeros(Shape({static_cast<int64_t>(desc.size())}), DType::kInt64);
  std::copy(desc.begin(), desc.end(), mine.data<int64_t>());
  Tensor all = fn::zeros(Shape({total}), DType::kInt64);
  comm.AllGatherV(mine, all, counts);

  auto shape_at = [](const int64_t* d, size_t& pos) {
    std::vector<int64_t> dims(d + pos + 1, d + pos + 1 + d[pos]);
    pos += 1 + dims.size();
    return Shape(dims);
  };
  const int64_t* base = all.data<int64_t>();
  for (int r = 0; r < comm.size(); ++r) {
    const int64_t* d = base;
    base += counts[r];
    int peer = comm.ranks()[r];
    if (peer == comm.rank()) continue;
    size_t pos = 1;
    for (size_t i = 0; i < params.size(); ++i) {
      if (static_cast<int64_t>(i) >= d[0]) {
        throw Error(StrCat("DistributedDataParallel: rank ", comm.rank(), " has ", params.size(),
                           " parameters but rank ", peer, " has ", d[0], " (first missing: '",
                           names[i], "'); every rank must build the same model"));
      }
      Shape theirs = shape_at(d, pos);
      if (theirs != params[i].shape()) {
        throw Error(StrCat("DistributedDataParallel: parameter '", names[i], "' has shape ",
                           params[i].shape(), " on rank ", comm.rank(), " but ", theirs,
                           " on rank ", peer, "; every rank must build the same model"));
      }
    }
    if (d[0] > static_cast<int64_t>(params.size())) {
      throw Error(StrCat("DistributedDataParallel: rank ", comm.rank(), " has ", params.size(),
                         " parameters but rank ", peer, " has ", d[0],
                         "; every rank must build the same model"));
    }
  }
}

void BroadcastCoalesced(Communicator& comm, const std::vector<Tensor>& tensors, int root) {
  NoGradGuard no_grad;
  std::map<DType, std::vector<Tensor>> by_dtype;
  for (const Tensor& t : tensors) by_dtype[t.dtype()].push_back(t);
  for (auto& [dtype, group] : by_dtype) {
    int64_t total = 0;
    for (const Tensor& t : group) total += t.numel();
    Tensor flat = fn::empty(Shape({total}), dtype, group[0].device());
    int64_t offset = 0;
    for (const Tensor& t : group) {
      fn::copy_(Piece(flat, offset, t), t);
      offset += t.numel();
    }
    comm.Broadcast(flat, root);
    offset = 0;
    for (const Tensor& t : group) {
      fn::copy_(t, Piece(flat, offset, t));
      offset += t.numel();
    }
  }
}

}  // namespace ddp
}  // namespace oneflow
