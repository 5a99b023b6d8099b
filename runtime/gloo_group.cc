#include "runtime/gloo_group.h"

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <thread>
#include <type_traits>
#include <utility>

#include "core/error.h"
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

std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

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

std::string FormatSeconds(double s) {
  std::string out = StrCat(s);
  return out;
}

// Gloo's options take non-const pointers, also for the buffers they only read.
template <typename T>
T* Input(const void* p) {
  return static_cast<T*>(const_cast<void*>(p));
}

// Gloo builds collective slots from small prefixes in the high bits; keep user tags apart.
constexpr uint64_t kP2PSlotBase = uint64_t{0x6f66} << 40;  // "of"
constexpr uint64_t kAgreeSlot = uint64_t{0x6670} << 40;    // "fp": Agree's calls

}  // namespace

// ---- errors ----

void GlooGroup::Rethrow(const char* op, const std::exception& e) const {
  std::string msg = OneLine(e.what());
  std::string lower = msg;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  if (lower.find("timed out") != std::string::npos || lower.find("timeout") != std::string::npos) {
    throw Error(StrCat(op, ": rank ", my_rank_, " timed out after ", FormatSeconds(timeout_s_),
                       " s in group ", desc_, " (is another rank dead or stuck?)",
                       report_ ? "; " + report_() : std::string()));
  }
  // A peer's connection broke: its process or its whole node is probably gone. The master's
  // heartbeat watchdog will say which ranks were lost; wait for that verdict (a little longer
  // than the heartbeat timeout) so the line names them instead of an address.
  const double heartbeat_s = HeartbeatTimeoutSeconds();
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>((heartbeat_s + 2) * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      client_.Heartbeat();
    } catch (const Error& verdict) {
      throw Error(StrCat(op, ": rank ", my_rank_, " lost a peer in group ", desc_, " (", msg,
                         "): ", verdict.what()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
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

std::chrono::milliseconds GlooGroup::Timeout() const {
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(timeout_s_ * 1000)));
}

// ---- GlooGroup ----

GlooGroup::GlooGroup(ControlClient& client, std::string desc, int my_rank, int group_rank, int size,
                     double timeout_s, std::vector<int> ranks)
    : client_(client),
      desc_(std::move(desc)),
      my_rank_(my_rank),
      group_rank_(group_rank),
      size_(size),
      timeout_s_(timeout_s),
      ranks_(std::move(ranks)) {
  if (ranks_.empty()) {
    for (int r = 0; r < size_; ++r) ranks_.push_back(r);
  }
  store_ = std::make_unique<GlooStore>(client_, "gloo/" + desc_ + "/", timeout_s_);
  gloo::transport::tcp::attr attr;
  if (const char* ifname = std::getenv("ONEFLOW_IFNAME"); ifname && *ifname) {
    attr.iface = ifname;
  } else {
    attr.hostname = ReachableAddress(WorldFromEnv());
  }
  try {
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(group_rank_, size_);
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

GlooGroup::~GlooGroup() = default;

void GlooGroup::Agree(const CallPrint& mine, const char* opname) {
  std::vector<CallPrint> all(size_);
  all[group_rank_] = mine;
  OF_GLOO_TRY(opname, {
    CallPrint out = mine;
    auto send = context_->createUnboundBuffer(&out, sizeof(CallPrint));
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> recvs;
    for (int r = 0; r < size_; ++r) {
      if (r == group_rank_) continue;
      recvs.push_back(context_->createUnboundBuffer(&all[r], sizeof(CallPrint)));
      recvs.back()->recv(r, kAgreeSlot);
    }
    for (int r = 0; r < size_; ++r) {
      if (r != group_rank_) send->send(r, kAgreeSlot);
    }
    for (auto& b : recvs) b->waitRecv(Timeout());
    for (int r = 0; r < size_; ++r) {
      if (r != group_rank_) send->waitSend(Timeout());
    }
  });
  for (const CallPrint& p : all) {
    if (p != mine) throw Error(MismatchLine(opname, desc_, ranks_, all));
  }
}

void GlooGroup::AllReduce(void* data, int64_t count, DType dtype, ReduceOp op, const char* opname) {
  DispatchCommDType(dtype, opname, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(data);
    size_t n = static_cast<size_t>(count);
    OF_GLOO_TRY(opname, {
      gloo::AllreduceOptions opts(context_);
      opts.setOutput(p, n);
      opts.setReduceFunction(ReduceFunc<T>(op));
      opts.setTimeout(Timeout());
      gloo::allreduce(opts);
    });
    if constexpr (std::is_floating_point<T>::value) {
      if (op == ReduceOp::kAvg) {
        T k = static_cast<T>(size_);
        for (size_t i = 0; i < n; ++i) p[i] /= k;
      }
    }
  });
}

void GlooGroup::Broadcast(void* data, int64_t count, DType dtype, int root, const char* opname) {
  DispatchCommDType(dtype, opname, [&](auto tag) {
    using T = typename decltype(tag)::type;
    OF_GLOO_TRY(opname, {
      gloo::BroadcastOptions opts(context_);
      opts.setOutput(static_cast<T*>(data), static_cast<size_t>(count));
      opts.setRoot(root);
      opts.setTimeout(Timeout());
      gloo::broadcast(opts);
    });
  });
}

void GlooGroup::AllGather(const void* in, void* out, int64_t count, DType dtype,
                          const char* opname) {
  DispatchCommDType(dtype, opname, [&](auto tag) {
    using T = typename decltype(tag)::type;
    OF_GLOO_TRY(opname, {
      gloo::AllgatherOptions opts(context_);
      opts.setInput(Input<T>(in), static_cast<size_t>(count));
      opts.setOutput(static_cast<T*>(out), static_cast<size_t>(count) * size_);
      opts.setTimeout(Timeout());
      gloo::allgather(opts);
    });
  });
}

void GlooGroup::AllGatherV(const void* in, void* out, const std::vector<int64_t>& counts,
                           DType dtype, const char* opname) {
  std::vector<size_t> elements;
  for (int64_t c : counts) elements.push_back(static_cast<size_t>(c));
  DispatchCommDType(dtype, opname, [&](auto tag) {
    using T = typename decltype(tag)::type;
    OF_GLOO_TRY(opname, {
      gloo::AllgathervOptions opts(context_);
      opts.setInput(Input<T>(in), elements[group_rank_]);
      opts.setOutput(static_cast<T*>(out), elements);
      opts.setTimeout(Timeout());
      gloo::allgatherv(opts);
    });
  });
}

void GlooGroup::AllToAllV(const void* in, void* out, const std::vector<int64_t>& in_counts,
                          const std::vector<int64_t>& out_counts, DType dtype, const char* opname) {
  const int64_t in_total = std::accumulate(in_counts.begin(), in_counts.end(), int64_t{0});
  const int64_t out_total = std::accumulate(out_counts.begin(), out_counts.end(), int64_t{0});
  // Gloo refuses null buffers; an empty side gets a one-element scratch buffer. A rank with
  // nothing to send or receive still takes part (the others may be mid-operation with it).
  DispatchCommDType(dtype, opname, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T scratch_in{}, scratch_out{};
    T* pin = in_total ? Input<T>(in) : &scratch_in;
    T* pout = out_total ? static_cast<T*>(out) : &scratch_out;
    OF_GLOO_TRY(opname, {
      gloo::AlltoallvOptions opts(context_);
      opts.setInput(pin, in_counts);
      opts.setOutput(pout, out_counts);
      opts.setTimeout(Timeout());
      gloo::alltoallv(opts);
    });
  });
}

void GlooGroup::Send(const void* data, size_t bytes, int peer, uint32_t tag, const char* opname) {
  OF_GLOO_TRY(opname, {
    auto buf = context_->createUnboundBuffer(const_cast<void*>(data), bytes);
    buf->send(peer, kP2PSlotBase | tag);
    buf->waitSend(Timeout());
  });
}

void GlooGroup::Recv(void* data, size_t bytes, int peer, uint32_t tag, const char* opname) {
  OF_GLOO_TRY(opname, {
    auto buf = context_->createUnboundBuffer(data, bytes);
    buf->recv(peer, kP2PSlotBase | tag);
    buf->waitRecv(Timeout());
  });
}

void GlooGroup::Barrier(const char* opname) {
  OF_GLOO_TRY(opname, {
    gloo::BarrierOptions opts(context_);
    opts.setTimeout(Timeout());
    gloo::barrier(opts);
  });
}

}  // namespace runtime
}  // namespace oneflow
