#include "runtime/communicator.h"

#include "runtime/nccl_group.h"

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <set>

#include "core/error.h"
#include "core/functional.h"
#include "runtime/world.h"

namespace oneflow {
namespace runtime {

// ---- GlooStore ----

// Gloo's rendezvous store over the control plane. Every key is prefixed with `prefix`; get()
// waits for the key (like Gloo's own stores) and every wait is bounded by timeout_s.
class GlooStore : public gloo::rendezvous::Store {
 public:
  GlooStore(ControlClient& client, std::string prefix, double timeout_s);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::vector<std::string> Prefixed(const std::vector<std::string>& keys) const;

  ControlClient& client_;
  std::string prefix_;
  double timeout_s_;
};


GlooStore::GlooStore(ControlClient& client, std::string prefix, double timeout_s)
    : client_(client), prefix_(std::move(prefix)), timeout_s_(timeout_s) {}

std::vector<std::string> GlooStore::Prefixed(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(prefix_ + k);
  return out;
}

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  client_.Set(prefix_ + key, std::string(data.begin(), data.end()));
}

std::vector<char> GlooStore::get(const std::string& key) {
  client_.Wait({prefix_ + key}, timeout_s_);
  std::optional<std::string> v = client_.Get(prefix_ + key);
  if (!v) throw Error(StrCat("gloo store: key '", prefix_, key, "' vanished after a wait"));
  return std::vector<char>(v->begin(), v->end());
}

void GlooStore::wait(const std::vector<std::string>& keys) {
  client_.Wait(Prefixed(keys), timeout_s_);
}

void GlooStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  double t = timeout.count() > 0 ? timeout.count() / 1000.0 : timeout_s_;
  client_.Wait(Prefixed(keys), std::min(t, timeout_s_));
}

// ---- helpers ----

namespace {

template <typename T>
gloo::AllreduceOptions::Func ReduceFunc(ReduceOp op) {
  using Fn = void (*)(void*, const void*, const void*, size_t);
  switch (op) {
    case ReduceOp::kMax:
      return static_cast<Fn>(&gloo::max<T>);
    case ReduceOp::kMin:
      return static_cast<Fn>(&gloo::min<T>);
    default:
      return static_cast<Fn>(&gloo::sum<T>);  // kSum, kAvg (divided afterwards)
  }
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

std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

std::string FormatSeconds(double s) {
  std::string out = StrCat(s);
  return out;
}

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
                                        timeout_s_, desc_);
    } else if (shm_allowed) {
      MakeHierarchy(hosts);
    }
  }
  store_ = std::make_unique<GlooStore>(*client_, "gloo/" + desc_ + "/", timeout_s_);
  gloo::transport::tcp::attr attr;
  if (const char* ifname = std::getenv("ONEFLOW_IFNAME"); ifname && *ifname) {
    attr.iface = ifname;
  } else {
    attr.hostname = ReachableAddress(WorldFromEnv());
  }
  try {
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(group_rank_, size());
    ctx->setTimeout(Timeout());
    ctx->connectFullMesh(*store_, dev);
    context_ = std::move(ctx);
  } catch (const Error& e) {
    throw Error(StrCat("communicator: rank ", my_rank_, " could not connect group ", desc_, ": ",
                       OneLine(e.what())));
  } catch (const std::exception& e) {
    Rethrow("connect", e);
  }
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

Communicator::~Communicator() {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stopping_ = true;
    queue_cv_.notify_all();
  }
  if (worker_.joinable()) worker_.join();
}

const char* Communicator::transport() const {
  if (size() == 1) return "self";
  if (leader_ >= 0) return "shm+gloo";
  return shm_ ? "shm" : "gloo";
}

// ---- asynchronous calls ----

void Work::Finish(std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  error_ = error;
  cv_.notify_all();
}

void Work::Wait() {
  std::vector<std::function<void()>> waits;
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    waits.swap(on_wait_);
    error = error_;
  }
  for (const auto& w : waits) w();
  if (error) std::rethrow_exception(error);
}

Work::~Work() {
  for (const auto& w : on_wait_) {
    try {
      w();
    } catch (...) {  // a broken device: nothing left to order
    }
  }
}

bool Work::IsCompleted() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

namespace {
thread_local bool t_on_worker = false;
thread_local Work* t_work = nullptr;  // the asynchronous call the worker runs
}  // namespace

std::shared_ptr<Work> Communicator::Async(std::function<void(Communicator&)> fn) {
  auto work = std::make_shared<Work>();
  std::lock_guard<std::mutex> lock(queue_mu_);
  if (!worker_.joinable()) worker_ = std::thread([this] { WorkerLoop(); });
  queue_.emplace_back(std::move(fn), work);
  ++pending_;
  queue_cv_.notify_all();
  return work;
}

void Communicator::WorkerLoop() {
  t_on_worker = true;
  std::unique_lock<std::mutex> lock(queue_mu_);
  while (true) {
    queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping with nothing left
    auto [fn, work] = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::exception_ptr error;
    t_work = work.get();
    try {
      fn(*this);
    } catch (...) {
      error = std::current_exception();
    }
    t_work = nullptr;
    work->Finish(error);
    lock.lock();
    --pending_;
    queue_cv_.notify_all();
  }
}

void Communicator::Drain() {
  if (t_on_worker) return;
  std::unique_lock<std::mutex> lock(queue_mu_);
  queue_cv_.wait(lock, [&] { return pending_ == 0; });
}

std::chrono::milliseconds Communicator::Timeout() const {
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(timeout_s_ * 1000)));
}

int Communicator::GroupRankOf(int global_rank, const char* op) const {
  auto it = std::find(ranks_.begin(), ranks_.end(), global_rank);
  if (it == ranks_.end()) {
    throw Error(StrCat(op, ": rank ", global_rank, " is not in group ", desc_));
  }
  return static_cast<int>(it - ranks_.begin());
}

void Communicator::Rethrow(const char* op, const std::exception& e) const {
  std::string msg = OneLine(e.what());
  std::string lower = msg;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  if (lower.find("timed out") != std::string::npos || lower.find("timeout") != std::string::npos) {
    throw Error(StrCat(op, ": rank ", my_rank_, " timed out after ", FormatSeconds(timeout_s_),
                       " s in group ", desc_, " (is another rank dead or stuck?)"));
  }
  // A peer's connection broke: its process or its whole node is probably gone. The master's
  // heartbeat watchdog will say which ranks were lost; wait for that verdict (a little longer
  // than the heartbeat timeout) so the line names them instead of an address.
  if (client_ != nullptr) {
    const char* v = std::getenv("ONEFLOW_HEARTBEAT_TIMEOUT_SECONDS");
    const double heartbeat_s = v && std::atof(v) > 0 ? std::atof(v) : 10.0;
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>((heartbeat_s + 2) * 1000));
    while (std::chrono::steady_clock::now() < deadline) {
      try {
        client_->Heartbeat();
      } catch (const Error& verdict) {
        throw Error(StrCat(op, ": rank ", my_rank_, " lost a peer in group ", desc_, " (", msg,
                           "): ", verdict.what()));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }
  throw Error(StrCat(op, ": rank ", my_rank_, " failed in group ", desc_, ": ", msg));
}

#define OF_GLOO_TRY(op, ...)            \
  do {                                  \
    try {                               \
      __VA_ARGS__;                      \
    } catch (const ::oneflow::Error&) { \
      throw;                            \
    } catch (const std::exception& e) { \
      Rethrow(op, e);                   \
    }                                   \
  } while (0)

void Communicator::AllReduce(Tensor& t, ReduceOp op) {
  const char* name = "all_reduce";
  CheckTensor(t, name, "tensor");
  CheckAverage(op, t.dtype(), name);
  if (t.numel() == 0 || size() == 1) return;
  if (!t.is_cpu()) {
    return OnCuda(
        name, {t}, {t}, [&](NcclGroup& g) { g.AllReduce(t, t, op, name); },
        [&](std::vector<Tensor>& h) { AllReduce(h[0], op); });
  }
  Drain();
  std::lock_guard<std::mutex> lock(mu_);
  if (shm_) {
    if (auto regions = SharedRegionsOf(t)) {
      shm_->ReduceRegions(*regions, static_cast<size_t>(t.offset()) * SizeOf(t.dtype()), t.numel(),
                          t.dtype(), op, name);
    } else {
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
  DispatchCommDType(t.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    size_t n = static_cast<size_t>(t.numel());
    OF_GLOO_TRY(name, {
      gloo::AllreduceOptions opts(context_);
      opts.setOutput(p, n);
      opts.setReduceFunction(ReduceFunc<T>(op));
      opts.setTimeout(Timeout());
      gloo::allreduce(opts);
    });
    if constexpr (std::is_floating_point<T>::value) {
      if (op == ReduceOp::kAvg) {
        T k = static_cast<T>(size());
        for (size_t i = 0; i < n; ++i) p[i] /= k;
      }
    }
  });
}

Tensor Communicator::AllReduced(const Tensor& x, ReduceOp op) {
  const char* name = "all_reduce";
  const size_t es = SizeOf(x.dtype()), bytes = static_cast<size_t>(x.numel()) * es;
  if (!shm_ || !x.is_cpu() || x.numel() == 0 || bytes > kMaxScratchBytes) {
    Tensor y = fn::contiguous_copy(x);
    AllReduce(y, op);
    return y;
  }
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
    scratch_ = std::make_shared<SharedRegions>(
        shm_->MapRegions(*client_, StrCat("scratch/", desc_, "/", shared_created_++),
                         scratch_bytes_));
  }
  // This rank's part is read from x itself; the rest goes where the others read it.
  auto [lo, hi] = shm_->PartOf(x.numel());
  auto* mine = static_cast<uint8_t*>(scratch_->Region(group_rank_));
  const auto* src = static_cast<const uint8_t*>(in.raw_data());
  std::memcpy(mine, src, static_cast<size_t>(lo) * es);
  std::memcpy(mine + hi * es, src + hi * es, bytes - static_cast<size_t>(hi) * es);
  std::vector<ShmGroup::LocalPiece> pieces;
  if (hi > lo) pieces.push_back({lo, hi - lo, src + lo * es});
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
  CheckTensor(t, name, "tensor");
  int groot = GroupRankOf(root, name);
  if (!t.is_cpu() && t.numel() > 0 && size() > 1) {
    return OnCuda(
        name, {t}, {t}, [&](NcclGroup& g) { g.Broadcast(t, groot, name); },
        [&](std::vector<Tensor>& h) { Broadcast(h[0], root); });
  }
  Drain();
  std::lock_guard<std::mutex> lock(mu_);
  if (t.numel() == 0 || size() == 1) return;
  if (shm_) {
    shm_->Broadcast(t.raw_data(), static_cast<size_t>(t.numel()) * SizeOf(t.dtype()), groot, name);
    return;
  }
  DispatchCommDType(t.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    OF_GLOO_TRY(name, {
      gloo::BroadcastOptions opts(context_);
      opts.setOutput(t.data<T>(), static_cast<size_t>(t.numel()));
      opts.setRoot(groot);
      opts.setTimeout(Timeout());
      gloo::broadcast(opts);
    });
  });
}

void Communicator::GatherLocally(const Tensor& in, Tensor& out, const std::vector<int64_t>& elems,
                                 const char* name) {
  const size_t es = SizeOf(in.dtype());
  if (size() == 1) {
    std::memcpy(out.raw_data(), in.raw_data(), static_cast<size_t>(in.numel()) * es);
    return;
  }
  std::vector<size_t> bytes;
  for (int64_t e : elems) bytes.push_back(static_cast<size_t>(e) * es);
  shm_->AllGather(in.raw_data(), out.raw_data(), bytes, name);
}

void Communicator::AllGather(const Tensor& in, Tensor& out) {
  const char* name = "all_gather";
  CheckInOut(in, out, name);
  if (out.numel() != in.numel() * size()) {
    throw Error(StrCat(name, ": output has ", out.numel(), " elements, expected ", size(), " x ",
                       in.numel(), " in group ", desc_));
  }
  Drain();
  std::lock_guard<std::mutex> lock(mu_);
  if (in.numel() == 0) return;
  if (size() == 1 || shm_) {
    GatherLocally(in, out, std::vector<int64_t>(size(), in.numel()), name);
    return;
  }
  DispatchCommDType(in.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    OF_GLOO_TRY(name, {
      gloo::AllgatherOptions opts(context_);
      opts.setInput(in.data<T>(), static_cast<size_t>(in.numel()));
      opts.setOutput(out.data<T>(), static_cast<size_t>(out.numel()));
      opts.setTimeout(Timeout());
      gloo::allgather(opts);
    });
  });
}

void Communicator::AllGatherV(const Tensor& in, Tensor& out, const std::vector<int64_t>& counts) {
  const char* name = "all_gather_v";
  CheckInOut(in, out, name);
  CheckCounts(counts, size(), desc_, name);
  int64_t row = RowSize(out);
  int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  if (Rows(out) != total || in.numel() != counts[group_rank_] * row) {
    throw Error(StrCat(name, ": output has ", Rows(out), " rows and input ", in.numel(),
                       " elements, expected ", total, " rows and ", counts[group_rank_] * row,
                       " elements"));
  }
  if (!in.is_cpu()) {
    std::vector<int64_t> elems;
    for (int64_t c : counts) elems.push_back(c * row);
    return OnCuda(
        name, {in}, {out}, [&](NcclGroup& g) { g.AllGatherV(in, out, elems, name); },
        [&](std::vector<Tensor>& h) { AllGatherV(h[0], h[1], counts); });
  }
  Drain();
  std::lock_guard<std::mutex> lock(mu_);
  if (out.numel() == 0) return;
  if (size() == 1 || shm_) {
    std::vector<int64_t> elems;
    for (int64_t c : counts) elems.push_back(c * row);
    GatherLocally(in, out, elems, name);
    return;
  }
  std::vector<size_t> elements;
  for (int64_t c : counts) elements.push_back(static_cast<size_t>(c * row));
  DispatchCommDType(in.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    OF_GLOO_TRY(name, {
      gloo::AllgathervOptions opts(context_);
      opts.setInput(in.data<T>(), static_cast<size_t>(in.numel()));
      opts.setOutput(out.data<T>(), elements);
      opts.setTimeout(Timeout());
      gloo::allgatherv(opts);
    });
  });
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
  if (shm_ || size() == 1) {
    Drain();
    std::lock_guard<std::mutex> lock(mu_);
    if (size() == 1) {
      std::memcpy(out.raw_data(), in.raw_data(), static_cast<size_t>(out.numel()) * es);
    } else if (in.numel() > 0) {
      shm_->Reduce(in.raw_data(), out.raw_data(), in.numel(), in.dtype(), op, start * row,
                   (start + counts[group_rank_]) * row, name);
    }
    return;
  }
  Tensor tmp = fn::contiguous_copy(in);
  AllReduce(tmp, op);
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
        name, {in}, {out},
        [&](NcclGroup& g) { g.AllToAllV(in, out, in_elems, out_elems, name); },
        [&](std::vector<Tensor>& h) { AllToAllV(h[0], h[1], in_counts, out_counts); });
  }
  Drain();
  std::lock_guard<std::mutex> lock(mu_);
  if (size() == 1) {
    std::memcpy(out.raw_data(), in.raw_data(),
                static_cast<size_t>(in.numel()) * SizeOf(in.dtype()));
    return;
  }
  // Gloo refuses null buffers; an empty side gets a one-element scratch buffer. A rank with
  // nothing to send or receive still takes part (the others may be mid-operation with it).
  DispatchCommDType(in.dtype(), name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T scratch_in{}, scratch_out{};
    T* pin = in.numel() ? in.data<T>() : &scratch_in;
    T* pout = out.numel() ? out.data<T>() : &scratch_out;
    OF_GLOO_TRY(name, {
      gloo::AlltoallvOptions opts(context_);
      opts.setInput(pin, in_elems);
      opts.setOutput(pout, out_elems);
      opts.setTimeout(Timeout());
      gloo::alltoallv(opts);
    });
  });
}

namespace {
// Gloo builds collective slots from small prefixes in the high bits; keep user tags apart.
constexpr uint64_t kP2PSlotBase = uint64_t{0x6f66} << 40;  // "of"
}  // namespace

void Communicator::Send(const Tensor& t, int peer, uint32_t tag) {
  const char* name = "send";
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
  OF_GLOO_TRY(name, {
    auto buf = context_->createUnboundBuffer(t.raw_data(), nbytes);
    buf->send(gpeer, kP2PSlotBase | tag);
    buf->waitSend(Timeout());
  });
}

void Communicator::Recv(Tensor& t, int peer, uint32_t tag) {
  const char* name = "recv";
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
  OF_GLOO_TRY(name, {
    auto buf = context_->createUnboundBuffer(t.raw_data(), nbytes);
    buf->recv(gpeer, kP2PSlotBase | tag);
    buf->waitRecv(Timeout());
  });
}

// ---- CUDA tensors ----

NcclGroup* Communicator::Nccl(const Device& device, const char* op) {
  // The group's name for its CUDA tensors: "cuda:[0,1]" beside the CPU one's "cpu:[0,1]".
  const std::string cuda_desc = "cuda" + desc_.substr(desc_.find(':'));
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
      group->set_deferred_waits(t_work ? &t_work->on_wait_ : nullptr);
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
  Drain();
  std::lock_guard<std::mutex> lock(mu_);
  if (size() == 1) return;
  if (shm_) {
    shm_->Barrier("barrier");
    return;
  }
  OF_GLOO_TRY("barrier", {
    gloo::BarrierOptions opts(context_);
    opts.setTimeout(Timeout());
    gloo::barrier(opts);
  });
}

}  // namespace runtime
}  // namespace oneflow
