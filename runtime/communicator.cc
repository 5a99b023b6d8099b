#include "runtime/communicator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <set>

#include "core/error.h"
#include "core/functional.h"
#include "core/profiler.h"
#include "runtime/gloo_group.h"
#include "runtime/nccl_group.h"

namespace oneflow {
namespace runtime {

// ---- helpers ----

namespace {

// What the profiler shows of a collective: this rank's bytes and the group.
void Describe(profiler::Range& r, const Tensor& t, const Communicator& c) {
  r.set_bytes(t.defined() ? t.numel() * static_cast<int64_t>(SizeOf(t.dtype())) : 0);
  r.set_detail(StrCat(c.description(), " ", c.transport()));
}

void CheckTensor(const Tensor& t, const char* op, const char* what) {
  if (!t.defined()) throw Error(StrCat(op, ": ", what, " is an undefined tensor"));
  if (!t.is_contiguous()) throw Error(StrCat(op, ": ", what, " must be contiguous"));
}

// The checks every two-buffer collective starts with.
void CheckInOut(const Tensor& in, const Tensor& out, const char* op) {
  CheckTensor(in, op, "input");
  CheckTensor(out, op, "output");
  if (in.device() != out.device()) {
    throw Error(StrCat(op, ": input is on ", in.device().ToString(), " but output on ",
                       out.device().ToString()));
  }
  if (in.dtype() != out.dtype()) {
    throw Error(StrCat(op, ": input is ", DTypeName(in.dtype()), " but output is ",
                       DTypeName(out.dtype())));
  }
}

// kAvg divides by the group size: integers would truncate.
void CheckAverage(ReduceOp op, DType dtype, const char* name) {
  if (op == ReduceOp::kAvg && !IsFloating(dtype)) {
    throw Error(StrCat(name, ": average needs a floating point tensor, got ", DTypeName(dtype)));
  }
}

void CheckCounts(const std::vector<int64_t>& counts, int size, const std::string& desc,
                 const char* op) {
  if (static_cast<int>(counts.size()) != size) {
    throw Error(StrCat(op, ": got ", counts.size(), " counts for group ", desc, " of size ", size));
  }
}

// Elements per row (product of dims 1..); 1 for a 0-d tensor.
int64_t RowSize(const Tensor& t) {
  int64_t n = 1;
  for (int64_t d = 1; d < t.ndim(); ++d) n *= t.size(d);
  return n;
}

int64_t Rows(const Tensor& t) { return t.ndim() == 0 ? 1 : t.size(0); }

}  // namespace

// ---- Communicator ----

Communicator::Communicator(int my_rank)
    : ranks_{my_rank}, my_rank_(my_rank), group_rank_(0), timeout_s_(1) {
  desc_ = StrCat("cpu:[", my_rank, "]");
}

Communicator::Communicator(ControlClient& client, std::vector<int> ranks, int my_rank,
                           double timeout_s, const std::string& name)
    : client_(&client), ranks_(std::move(ranks)), my_rank_(my_rank), timeout_s_(timeout_s) {
  desc_ = "cpu:[";
  for (size_t i = 0; i < ranks_.size(); ++i) desc_ += (i ? "," : "") + std::to_string(ranks_[i]);
  desc_ += "]";
  if (!name.empty()) desc_ += "/" + name;
  if (ranks_.empty()) throw Error("communicator: empty group");
  if (std::set<int>(ranks_.begin(), ranks_.end()).size() != ranks_.size()) {
    throw Error(StrCat("communicator: group ", desc_, " lists a rank twice"));
  }
  if (timeout_s_ <= 0) throw Error(StrCat("communicator: timeout must be positive"));
  auto it = std::find(ranks_.begin(), ranks_.end(), my_rank_);
  if (it == ranks_.end()) {
    throw Error(StrCat("communicator: rank ", my_rank_, " is not in group ", desc_));
  }
  group_rank_ = static_cast<int>(it - ranks_.begin());
  if (size() > 1) {
    watch_ = std::make_unique<CallWatch>(client_, desc_, ranks_, my_rank_);
    CallPrint set_up;
    set_up.op = CallOp::kSetUp;
    WatchScope watching(watch_.get(), set_up);
    try {
      Connect();
    } catch (const Error& e) {
      // A member that never comes: say what each member is doing (an abort has said it).
      if (std::string(e.what()).find("aborted the job") != std::string::npos) throw;
      throw Error(StrCat(e.what(), "; ", WatchReport(*client_, ranks_, my_rank_)));
    }
    auto report = [this] { return WatchReport(*client_, ranks_, my_rank_); };
    gloo_->set_timeout_report(report);
    if (shm_) shm_->set_timeout_report(report);
  } else {
    Connect();
  }
}

void Communicator::Connect() {
  if (size() > 1) {
    // Members on one machine share memory: every member publishes its host and all compare.
    const std::string host_key = "host/" + desc_ + "/";
    client_->Set(host_key + std::to_string(group_rank_), HostId());
    std::vector<std::string> keys, hosts;
    for (int r = 0; r < size(); ++r) keys.push_back(host_key + std::to_string(r));
    client_->Wait(keys, timeout_s_);
    for (const auto& k : keys) hosts.push_back(client_->Get(k).value_or(""));
    const char* shm_env = std::getenv("ONEFLOW_SHM");
    const bool shm_allowed = !(shm_env && std::string(shm_env) == "0");
    if (shm_allowed && SameHost(hosts)) {
      shm_ = std::make_unique<ShmGroup>(*client_, "shm/" + desc_, my_rank_, group_rank_, size(),
                                        timeout_s_, desc_, ranks_);
    } else if (shm_allowed) {
      MakeHierarchy(hosts);
    }
  }
  gloo_ = std::make_unique<GlooGroup>(*client_, desc_, my_rank_, group_rank_, size(), timeout_s_,
                                      ranks_);
}

// A group across hosts where some host holds several members: all-reduce first inside each
// host (shared memory), then across hosts between one leader per host (Gloo), then the
// leaders broadcast inside their hosts, so each host's data crosses the network once.
void Communicator::MakeHierarchy(const std::vector<std::string>& hosts) {
  std::vector<int> local, leaders;
  std::set<std::string> seen;
  for (int i = 0; i < size(); ++i) {
    if (hosts[i] == hosts[group_rank_]) local.push_back(ranks_[i]);
    if (seen.insert(hosts[i]).second) leaders.push_back(ranks_[i]);
  }
  if (static_cast<int>(leaders.size()) == size()) return;  // one member per host: plain Gloo
  leader_ = local.front();
  if (local.size() > 1) {
    local_ = std::make_unique<Communicator>(*client_, local, my_rank_, timeout_s_,
                                            StrCat(desc_, "/host"));
  }
  if (my_rank_ == leader_) {
    leaders_ = std::make_unique<Communicator>(*client_, leaders, my_rank_, timeout_s_,
                                              StrCat(desc_, "/leaders"));
  }
}

// queue_ (the last member) goes first: it runs the calls still queued, which use the others.
Communicator::~Communicator() = default;

const char* Communicator::transport() const {
  if (size() == 1) return "self";
  if (leader_ >= 0) return "shm+gloo";
  return shm_ ? "shm" : "gloo";
}

// ---- asynchronous calls ----

std::shared_ptr<Work> Communicator::Async(std::function<void(Communicator&)> fn) {
  return queue_.Async([this, fn = std::move(fn)] { fn(*this); });
}

void Communicator::Drain() { queue_.Drain(); }

int Communicator::GroupRankOf(int global_rank, const char* op) const {
  auto it = std::find(ranks_.begin(), ranks_.end(), global_rank);
  if (it == ranks_.end()) {
    throw Error(StrCat(op, ": rank ", global_rank, " is not in group ", desc_));
  }
  return static_cast<int>(it - ranks_.begin());
}

void Communicator::AllReduce(Tensor& t, ReduceOp op) {
  const char* name = "all_reduce";
  profiler::Range prof(profiler::Kind::kCollective, name);
  if (prof.active()) Describe(prof, t, *this);
  CheckTensor(t, name, "tensor");
  CheckAverage(op, t.dtype(), name);
  if (size() == 1 || (t.numel() == 0 && !t.is_cpu())) return;
  if (!t.is_cpu()) {
    return OnCuda(
        name, {t}, {t}, [&](NcclGroup& g) { g.AllReduce(t, t, op, name); },
        [&](std::vector<Tensor>& h) { AllReduce(h[0], op); });
  }
  CallPrint print = CallPrint::Of(CallOp::kAllReduce, t.dtype(), t.numel(), static_cast<int>(op));
  Drain();
  std::lock_guard<std::mutex> lock(mu_);
  if (shm_) {
    if (auto regions = SharedRegionsOf(t)) {
      print.variant = kVariantShared;
      WatchScope watching(watch_.get(), print);
      shm_->Expect(print);
      shm_->ReduceRegions(*regions, static_cast<size_t>(t.offset()) * SizeOf(t.dtype()), t.numel(),
                          t.dtype(), op, name);
    } else {
      WatchScope watching(watch_.get(), print);
      shm_->Expect(print);
      shm_->Reduce(t.raw_data(), t.raw_data(), t.numel(), t.dtype(), op, 0, t.numel(), name);
    }
    return;
  }
  if (leader_ >= 0) {
    // Sums add up inside the host first; an average divides once, by the whole group.
    const ReduceOp step = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
    if (local_) local_->AllReduce(t, step);
    if (leaders_) leaders_->AllReduce(t, step);
    if (local_) local_->Broadcast(t, leader_);
    if (op == ReduceOp::kAvg) fn::copy_(t, fn::div(t, fn::full(Shape({}), size(), t.dtype())));
    return;
  }
  WatchScope watching(watch_.get(), print);
  gloo_->Agree(print, name);
  if (t.numel() > 0) gloo_->AllReduce(t.raw_data(), t.numel(), t.dtype(), op, name);
}

Tensor Communicator::AllReduced(const Tensor& x, ReduceOp op) {
  const char* name = "all_reduce";
  const size_t es = SizeOf(x.dtype()), bytes = static_cast<size_t>(x.numel()) * es;
  if (!shm_ || !x.is_cpu() || x.numel() == 0 || bytes > kMaxScratchBytes) {
    Tensor y = fn::contiguous_copy(x);
    AllReduce(y, op);
    return y;
  }
  profiler::Range prof(profiler::Kind::kCollective, name);
  if (prof.active()) Describe(prof, x, *this);
  Tensor in = x.is_contiguous() ? x : fn::contiguous_copy(x);
  CheckTensor(in, name, "tensor");
  CheckAverage(op, x.dtype(), name);
  Drain();
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > scratch_bytes_) {
    // Every member makes the same calls in the same order, so all grow here together.
    size_t grown = std::max<size_t>(scratch_bytes_ * 2, 64 << 10);
    while (grown < bytes) grown *= 2;
    scratch_bytes_ = std::min(grown, kMaxScratchBytes);
    scratch_.reset();
    scratch_ = std::make_shared<SharedRegions>(shm_->MapRegions(
        *client_, StrCat("scratch/", desc_, "/", shared_created_++), scratch_bytes_));
  }
  // This rank's part is read from x itself; the rest goes where the others read it.
  auto [lo, hi] = shm_->PartOf(x.numel());
  auto* mine = static_cast<uint8_t*>(scratch_->Region(group_rank_));
  const auto* src = static_cast<const uint8_t*>(in.raw_data());
  std::memcpy(mine, src, static_cast<size_t>(lo) * es);
  std::memcpy(mine + hi * es, src + hi * es, bytes - static_cast<size_t>(hi) * es);
  std::vector<ShmGroup::LocalPiece> pieces;
  if (hi > lo) pieces.push_back({lo, hi - lo, src + lo * es});
  const CallPrint agreed = CallPrint::Of(CallOp::kAllReduce, x.dtype(), x.numel(),
                                         static_cast<int>(op), -1, kVariantScratch);
  WatchScope watching(watch_.get(), agreed);
  shm_->Expect(agreed);
  // This rank's part of the sum is written straight into y; the others' arrive in the region.
  Tensor y = Tensor::Empty(x.shape(), x.dtype(), Device::CPU());
  auto* dst = static_cast<uint8_t*>(y.raw_data());
  shm_->ReduceRegions(*scratch_, 0, x.numel(), x.dtype(), op, name, pieces, dst);
  std::memcpy(dst, mine, static_cast<size_t>(lo) * es);
  std::memcpy(dst + hi * es, mine + hi * es, bytes - static_cast<size_t>(hi) * es);
  return y;
}

Tensor Communicator::EmptyShared(int64_t numel, DType dtype) {
  ONEFLOW_CHECK(numel >= 0, "empty_shared: numel must be >= 0, got ", numel);
  if (!shm_ || numel == 0) return Tensor::Empty(Shape({numel}), dtype, Device::CPU());
  Drain();
  std::lock_guard<std::mutex> lock(mu_);
  const size_t bytes = static_cast<size_t>(numel) * SizeOf(dtype);
  // Forget tensors that are gone (AllReduce looks every CPU tensor up in this list).
  shared_.erase(std::remove_if(shared_.begin(), shared_.end(),
                               [](const SharedTensor& s) { return s.storage.expired(); }),
                shared_.end());
  auto regions = std::make_shared<SharedRegions>(
      shm_->MapRegions(*client_, StrCat("shared/", desc_, "/", shared_created_++), bytes));
  auto storage = Storage::Borrow(regions->Region(group_rank_), bytes, Device::CPU(), regions);
  shared_.push_back({storage, regions});
  return Tensor::FromStorage(std::move(storage), Shape({numel}), dtype);
}

std::pair<int64_t, int64_t> Communicator::SharedPartOf(const Tensor& t) const {
  if (!shm_ || !SharedRegionsOf(t)) return {0, 0};
  return shm_->PartOf(t.numel());
}

void Communicator::AllReduce(Tensor& t, ReduceOp op,
                             const std::vector<std::pair<int64_t, Tensor>>& local) {
  const char* name = "all_reduce";
  if (local.empty()) return AllReduce(t, op);
  profiler::Range prof(profiler::Kind::kCollective, name);
  if (prof.active()) Describe(prof, t, *this);
  CheckTensor(t, name, "tensor");
  CheckAverage(op, t.dtype(), name);
  auto regions = shm_ ? SharedRegionsOf(t) : nullptr;
  ONEFLOW_CHECK(regions != nullptr, name, ": local pieces need a tensor in shared memory (from ",
                "EmptyShared, in a group on one machine)");
  std::vector<ShmGroup::LocalPiece> pieces;
  for (const auto& [offset, piece] : local) {
    ONEFLOW_CHECK(piece.is_cpu() && piece.is_contiguous() && piece.dtype() == t.dtype(), name,
                  ": a local piece must be a contiguous CPU ", DTypeName(t.dtype()), " tensor");
    pieces.push_back({offset, piece.numel(), piece.raw_data()});
  }
  Drain();
  std::lock_guard<std::mutex> lock(mu_);
  const CallPrint agreed = CallPrint::Of(CallOp::kAllReduce, t.dtype(), t.numel(),
                                         static_cast<int>(op), -1, kVariantShared);
  WatchScope watching(watch_.get(), agreed);
  shm_->Expect(agreed);
  shm_->ReduceRegions(*regions, static_cast<size_t>(t.offset()) * SizeOf(t.dtype()), t.numel(),
                      t.dtype(), op, name, pieces);
}

std::shared_ptr<const SharedRegions> Communicator::SharedRegionsOf(const Tensor& t) const {
  for (const SharedTensor& s : shared_) {
    if (s.storage.lock() == t.storage()) return s.regions.lock();
  }
  return nullptr;
}

void Communicator::Broadcast(Tensor& t, int root) {
  const char* name = "broadcast";
  profiler::Range prof(profiler::Kind::kCollective, name);
  if (prof.active()) Describe(prof, t, *this);
  CheckTensor(t, name, "tensor");
  int groot = GroupRankOf(root, name);
  if (!t.is_cpu() && t.numel() > 0 && size() > 1) {
    return OnCuda(
        name, {t}, {t}, [&](NcclGroup& g) { g.Broadcast(t, groot, name); },
        [&](std::vector<Tensor>& h) { Broadcast(h[0], root); });
  }
  Drain();
  std::lock_guard<std::mutex> lock(mu_);
  if (size() == 1) return;
  const CallPrint print = CallPrint::Of(CallOp::kBroadcast, t.dtype(), t.numel(), 0, root);
  if (shm_) {
    WatchScope watching(watch_.get(), print);
    shm_->Expect(print);
    shm_->Broadcast(t.raw_data(), static_cast<size_t>(t.numel()) * SizeOf(t.dtype()), groot, name);
    return;
  }
  WatchScope watching(watch_.get(), print);
  gloo_->Agree(print, name);
  if (t.numel() > 0) gloo_->Broadcast(t.raw_data(), t.numel(), t.dtype(), groot, name);
}

void Communicator::GatherLocally(const Tensor& in, Tensor& out, const std::vector<int64_t>& elems,
                                 const char* name) {
  const size_t es = SizeOf(in.dtype());
  if (size() == 1) {
    std::memcpy(out.raw_data(), in.raw_data(), static_cast<size_t>(in.numel()) * es);
    return;
  }
  std::vector<size_t> bytes;
  int64_t total = 0;
  for (int64_t e : elems) {
    bytes.push_back(static_cast<size_t>(e) * es);
    total += e;
  }
  const CallPrint agreed = CallPrint::Of(CallOp::kAllGather, in.dtype(), total);
  WatchScope watching(watch_.get(), agreed);
  shm_->Expect(agreed);
  shm_->AllGather(in.raw_data(), out.raw_data(), bytes, name);
}

void Communicator::AllGather(const Tensor& in, Tensor& out) {
  const char* name = "all_gather";
  profiler::Range prof(profiler::Kind::kCollective, name);
  if (prof.active()) Describe(prof, in, *this);
  CheckInOut(in, out, name);
  if (out.numel() != in.numel() * size()) {
    throw Error(StrCat(name, ": output has ", out.numel(), " elements, expected ", size(), " x ",
                       in.numel(), " in group ", desc_));
  }
  Drain();
  std::lock_guard<std::mutex> lock(mu_);
  if (size() == 1 || shm_) {
    GatherLocally(in, out, std::vector<int64_t>(size(), in.numel()), name);
    return;
  }
  const CallPrint agreed = CallPrint::Of(CallOp::kAllGather, in.dtype(), out.numel());
  WatchScope watching(watch_.get(), agreed);
  gloo_->Agree(agreed, name);
  if (in.numel() > 0) gloo_->AllGather(in.raw_data(), out.raw_data(), in.numel(), in.dtype(), name);
}

void Communicator::AllGatherV(const Tensor& in, Tensor& out, const std::vector<int64_t>& counts) {
  const char* name = "all_gather_v";
  profiler::Range prof(profiler::Kind::kCollective, name);
  if (prof.active()) Describe(prof, in, *this);
  CheckInOut(in, out, name);
  CheckCounts(counts, size(), desc_, name);
  int64_t row = RowSize(out);
  int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  if (Rows(out) != total || in.numel() != counts[group_rank_] * row) {
    throw Error(StrCat(name, ": output has ", Rows(out), " rows and input ", in.numel(),
                       " elements, expected ", total, " rows and ", counts[group_rank_] * row,
                       " elements"));
  }
  std::vector<int64_t> elems;
  for (int64_t c : counts) elems.push_back(c * row);
  if (!in.is_cpu()) {
    return OnCuda(
        name, {in}, {out}, [&](NcclGroup& g) { g.AllGatherV(in, out, elems, name); },
        [&](std::vector<Tensor>& h) { AllGatherV(h[0], h[1], counts); });
  }
  Drain();
  std::lock_guard<std::mutex> lock(mu_);
  if (size() == 1 || shm_) {
    GatherLocally(in, out, elems, name);
    return;
  }
  const CallPrint agreed = CallPrint::Of(CallOp::kAllGather, in.dtype(), out.numel());
  WatchScope watching(watch_.get(), agreed);
  gloo_->Agree(agreed, name);
  if (out.numel() > 0) gloo_->AllGatherV(in.raw_data(), out.raw_data(), elems, in.dtype(), name);
}

void Communicator::ReduceScatter(const Tensor& in, Tensor& out, ReduceOp op) {
  if (Rows(in) % size() != 0) {
    throw Error(StrCat("reduce_scatter: input has ", Rows(in), " rows, not a multiple of ", size(),
                       " in group ", desc_));
  }
  ReduceScatterV(in, out, std::vector<int64_t>(size(), Rows(in) / size()), op);
}

void Communicator::ReduceScatterV(const Tensor& in, Tensor& out, const std::vector<int64_t>& counts,
                                  ReduceOp op) {
  const char* name = "reduce_scatter";
  profiler::Range prof(profiler::Kind::kCollective, name);
  if (prof.active()) Describe(prof, in, *this);
  CheckInOut(in, out, name);
  CheckCounts(counts, size(), desc_, name);
  int64_t row = RowSize(in);
  int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  if (Rows(in) != total || out.numel() != counts[group_rank_] * row) {
    throw Error(StrCat(name, ": input has ", Rows(in), " rows and output ", out.numel(),
                       " elements, expected ", total, " rows and ", counts[group_rank_] * row,
                       " elements"));
  }
  CheckAverage(op, in.dtype(), name);
  if (!in.is_cpu()) {
    std::vector<int64_t> elems;
    for (int64_t c : counts) elems.push_back(c * row);
    return OnCuda(
        name, {in}, {out}, [&](NcclGroup& g) { g.ReduceScatterV(in, out, elems, op, name); },
        [&](std::vector<Tensor>& h) { ReduceScatterV(h[0], h[1], counts, op); });
  }
  int64_t start = std::accumulate(counts.begin(), counts.begin() + group_rank_, int64_t{0});
  size_t es = SizeOf(in.dtype());
  const CallPrint print =
      CallPrint::Of(CallOp::kReduceScatter, in.dtype(), in.numel(), static_cast<int>(op));
  if (shm_ || size() == 1) {
    Drain();
    std::lock_guard<std::mutex> lock(mu_);
    if (size() == 1) {
      std::memcpy(out.raw_data(), in.raw_data(), static_cast<size_t>(out.numel()) * es);
    } else {
      WatchScope watching(watch_.get(), print);
      shm_->Expect(print);
      shm_->Reduce(in.raw_data(), out.raw_data(), in.numel(), in.dtype(), op, start * row,
                   (start + counts[group_rank_]) * row, name);
    }
    return;
  }
  Tensor tmp = fn::contiguous_copy(in);
  if (leader_ >= 0) {
    AllReduce(tmp, op);
  } else {
    Drain();
    std::lock_guard<std::mutex> lock(mu_);
    WatchScope watching(watch_.get(), print);
    gloo_->Agree(print, name);
    if (tmp.numel() > 0) gloo_->AllReduce(tmp.raw_data(), tmp.numel(), tmp.dtype(), op, name);
  }
  std::memcpy(out.raw_data(), static_cast<char*>(tmp.raw_data()) + start * row * es,
              static_cast<size_t>(out.numel()) * es);
}

void Communicator::AllToAll(const Tensor& in, Tensor& out) {
  if (Rows(in) % size() != 0 || Rows(out) % size() != 0) {
    throw Error(StrCat("all_to_all: input has ", Rows(in), " rows and output ", Rows(out),
                       ", not multiples of ", size(), " in group ", desc_));
  }
  AllToAllV(in, out, std::vector<int64_t>(size(), Rows(in) / size()),
            std::vector<int64_t>(size(), Rows(out) / size()));
}

void Communicator::AllToAllV(const Tensor& in, Tensor& out, const std::vector<int64_t>& in_counts,
                             const std::vector<int64_t>& out_counts) {
  const char* name = "all_to_all";
  profiler::Range prof(profiler::Kind::kCollective, name);
  if (prof.active()) Describe(prof, in, *this);
  CheckInOut(in, out, name);
  if (static_cast<int>(in_counts.size()) != size() ||
      static_cast<int>(out_counts.size()) != size()) {
    throw Error(StrCat(name, ": counts must have ", size(), " entries for group ", desc_));
  }
  int64_t row = in.ndim() > 0 ? RowSize(in) : 1;
  if (out.ndim() > 0 && RowSize(out) != row) {
    throw Error(
        StrCat(name, ": input rows have ", row, " elements but output rows ", RowSize(out)));
  }
  int64_t in_total = std::accumulate(in_counts.begin(), in_counts.end(), int64_t{0});
  int64_t out_total = std::accumulate(out_counts.begin(), out_counts.end(), int64_t{0});
  if (in.numel() != in_total * row || out.numel() != out_total * row) {
    throw Error(StrCat(name, ": input has ", Rows(in), " rows and output ", Rows(out),
                       ", counts say ", in_total, " and ", out_total));
  }
  std::vector<int64_t> in_elems, out_elems;
  for (int64_t c : in_counts) in_elems.push_back(c * row);
  for (int64_t c : out_counts) out_elems.push_back(c * row);
  if (!in.is_cpu()) {
    return OnCuda(
        name, {in}, {out}, [&](NcclGroup& g) { g.AllToAllV(in, out, in_elems, out_elems, name); },
        [&](std::vector<Tensor>& h) { AllToAllV(h[0], h[1], in_counts, out_counts); });
  }
  Drain();
  std::lock_guard<std::mutex> lock(mu_);
  if (size() == 1) {
    std::memcpy(out.raw_data(), in.raw_data(),
                static_cast<size_t>(in.numel()) * SizeOf(in.dtype()));
    return;
  }
  const CallPrint agreed = CallPrint::Of(CallOp::kAllToAll, in.dtype(), -1);
  WatchScope watching(watch_.get(), agreed);
  gloo_->Agree(agreed, name);
  gloo_->AllToAllV(in.raw_data(), out.raw_data(), in_elems, out_elems, in.dtype(), name);
}

void Communicator::Send(const Tensor& t, int peer, uint32_t tag) {
  const char* name = "send";
  profiler::Range prof(profiler::Kind::kCollective, name);
  if (prof.active()) Describe(prof, t, *this);
  CheckTensor(t, name, "tensor");
  int gpeer = GroupRankOf(peer, name);
  if (gpeer == group_rank_)
    throw Error(StrCat(name, ": rank ", my_rank_, " cannot send to itself"));
  if (!t.is_cpu() && t.numel() > 0) {
    return OnCuda(
        name, {t}, {}, [&](NcclGroup& g) { g.Send(t, gpeer, name); },
        [&](std::vector<Tensor>& h) { Send(h[0], peer, tag); });
  }
  Drain();
  std::lock_guard<std::mutex> lock(mu_);
  size_t nbytes = static_cast<size_t>(t.numel()) * SizeOf(t.dtype());
  if (nbytes == 0) return;
  WatchScope watching(watch_.get(), CallPrint::Of(CallOp::kSend, t.dtype(), t.numel(), 0, peer));
  gloo_->Send(t.raw_data(), nbytes, gpeer, tag, name);
}

void Communicator::Recv(Tensor& t, int peer, uint32_t tag) {
  const char* name = "recv";
  profiler::Range prof(profiler::Kind::kCollective, name);
  if (prof.active()) Describe(prof, t, *this);
  CheckTensor(t, name, "tensor");
  int gpeer = GroupRankOf(peer, name);
  if (gpeer == group_rank_) {
    throw Error(StrCat(name, ": rank ", my_rank_, " cannot receive from itself"));
  }
  if (!t.is_cpu() && t.numel() > 0) {
    return OnCuda(
        name, {}, {t}, [&](NcclGroup& g) { g.Recv(t, gpeer, name); },
        [&](std::vector<Tensor>& h) { Recv(h[0], peer, tag); });
  }
  Drain();
  std::lock_guard<std::mutex> lock(mu_);
  size_t nbytes = static_cast<size_t>(t.numel()) * SizeOf(t.dtype());
  if (nbytes == 0) return;
  WatchScope watching(watch_.get(), CallPrint::Of(CallOp::kRecv, t.dtype(), t.numel(), 0, peer));
  gloo_->Recv(t.raw_data(), nbytes, gpeer, tag, name);
}

// ---- CUDA tensors ----

NcclGroup* Communicator::Nccl(const Device& device, const char* op) {
  // The group's name for its CUDA tensors: "cuda:[0,1]" beside the CPU one's "cpu:[0,1]".
  const std::string cuda_desc = "cuda" + desc_.substr(desc_.find(':'));
  if (FakeCuda()) {
    // The stand-in CUDA device (tests without a GPU) has no NCCL: its tensors take the host path
    // a group NCCL cannot serve takes, without the warning. Its members still settle that
    // together, as NcclGroup::Create begins (each posts its device and waits for all), so a
    // call that only some members make stalls here as it would on GPUs, and times out naming
    // the group.
    if (!nccl_tried_) {
      const std::string prefix = "nccl/" + cuda_desc + "/gpu/";
      client_->Set(prefix + std::to_string(group_rank_), "stand-in");
      std::vector<std::string> keys;
      for (int r = 0; r < size(); ++r) keys.push_back(prefix + std::to_string(r));
      try {
        client_->Wait(keys, timeout_s_);
      } catch (const std::exception& e) {
        throw Error(StrCat(op, ": rank ", my_rank_, " waited for the other members of group ",
                           cuda_desc, " to settle how it moves CUDA tensors: ", OneLine(e.what())));
      }
      nccl_tried_ = true;
    }
    return nullptr;
  }
  if (!nccl_tried_) {
    std::string why;
    try {
      nccl_ = NcclGroup::Create(*client_, cuda_desc, my_rank_, group_rank_, size(), device,
                                timeout_s_, &why);
    } catch (const std::exception& e) {
      throw Error(StrCat(op, ": ", OneLine(e.what())));
    }
    // Only a decision (a group, or why not) is final: a failed attempt is retried next call
    // rather than silently falling back to host memory.
    nccl_tried_ = true;
    if (!nccl_) {
      std::fprintf(stderr,
                   "oneflow: warning: NCCL cannot serve group %s (%s); its CUDA collectives go "
                   "through host memory and %s instead\n",
                   cuda_desc.c_str(), why.c_str(), shm_ ? "shared memory" : "Gloo");
    }
  }
  if (nccl_ && nccl_->device() != device) {
    throw Error(StrCat(op, ": rank ", my_rank_, " passed a tensor on ", device.ToString(),
                       " but its NCCL communicator for group ", cuda_desc, " is on ",
                       nccl_->device().ToString()));
  }
  return nccl_.get();
}

void Communicator::PrepareCuda(const Device& device) {
  if (device.type != DeviceType::kCUDA || !client_ || size() <= 1) return;
  Drain();
  std::lock_guard<std::mutex> lock(mu_);
  Nccl(device, "prepare_cuda");
}

void Communicator::OnCuda(const char* name, const std::vector<Tensor>& ins,
                          const std::vector<Tensor>& outs,
                          const std::function<void(NcclGroup&)>& nccl,
                          const std::function<void(std::vector<Tensor>&)>& host) {
  const Device device = (ins.empty() ? outs[0] : ins[0]).device();
  for (const auto* list : {&ins, &outs}) {
    for (const Tensor& t : *list) {
      if (t.device() != device) {
        throw Error(StrCat(name, ": expected tensors on one device, got ", device.ToString(),
                           " and ", t.device().ToString()));
      }
    }
  }
  NcclGroup* group = nullptr;
  {
    Drain();
    std::lock_guard<std::mutex> lock(mu_);
    group = client_ && size() > 1 ? Nccl(device, name) : nullptr;
    if (group) {
      // An asynchronous call leaves the compute stream's wait to its Work's Wait, so that the
      // caller's kernels queued meanwhile (DDP's backward) overlap the collective on the GPU.
      group->set_deferred_waits(WorkQueue::CurrentWaits());
      try {
        nccl(*group);
      } catch (...) {
        group->set_deferred_waits(nullptr);
        throw;
      }
      group->set_deferred_waits(nullptr);
      return;
    }
  }
  // Through host memory: the CPU collective on copies, results copied back. An output that is
  // also an input (in-place collectives) shares its host copy.
  std::vector<Tensor> h;
  for (const Tensor& t : ins) h.push_back(fn::to_device(t, Device::CPU()));
  for (const Tensor& t : outs) {
    auto same = std::find_if(ins.begin(), ins.end(), [&](const Tensor& i) { return i.is_same(t); });
    h.push_back(same != ins.end() ? h[same - ins.begin()]
                                  : Tensor::Empty(t.shape(), t.dtype(), Device::CPU()));
  }
  host(h);
  for (size_t i = 0; i < outs.size(); ++i) {
    const Tensor& hout = h[ins.size() + i];
    fn::copy_(outs[i], hout);
  }
}

void Communicator::Barrier() {
  const char* name = "barrier";
  profiler::Range prof(profiler::Kind::kCollective, name);
  if (prof.active()) Describe(prof, Tensor(), *this);
  Drain();
  std::lock_guard<std::mutex> lock(mu_);
  if (size() == 1) return;
  CallPrint print;
  print.op = CallOp::kBarrier;
  if (shm_) {
    WatchScope watching(watch_.get(), print);
    shm_->Expect(print);
    shm_->Barrier(name);
    return;
  }
  WatchScope watching(watch_.get(), print);
  gloo_->Agree(print, name);  // every member's call arrived: a barrier
}

}  // namespace runtime
}  // namespace oneflow
