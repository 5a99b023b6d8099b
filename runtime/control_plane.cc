#include "runtime/control_plane.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "runtime/control.grpc.pb.h"

namespace oneflow {
namespace runtime {
namespace {

using Clock = std::chrono::steady_clock;

std::string FormatSeconds(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

std::string JoinRanks(const std::vector<int>& ranks) {
  if (ranks.empty()) return "none";
  std::ostringstream os;
  for (size_t i = 0; i < ranks.size(); ++i) os << (i ? ", " : "") << ranks[i];
  return os.str();
}

// "key=value" lines -> map.
std::map<std::string, std::string> JobFields(const std::string& job) {
  std::map<std::string, std::string> out;
  std::istringstream in(job);
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

// What differs between a refused rank's job and the master's, in words.
std::string JobDifference(const std::string& theirs, const std::string& ours) {
  auto a = JobFields(theirs), b = JobFields(ours);
  std::string out;
  for (const auto& [key, value] : b) {
    auto it = a.find(key);
    if (it == a.end() || it->second == value) continue;
    out += StrCat(out.empty() ? "" : "; ", "its ", key, " is '", it->second,
                  "' but this job's is '", value, "'");
  }
  if (out.empty()) {
    out = theirs.empty() || ours.empty()
              ? "its job token differs"
              : "its ONEFLOW_JOB_TOKEN differs (set the same value on every node, or none)";
  }
  return out;
}

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

Clock::time_point DeadlineAfterMs(int64_t ms) {
  ms = std::max<int64_t>(0, std::min<int64_t>(ms, int64_t{365} * 24 * 3600 * 1000));
  return Clock::now() + std::chrono::milliseconds(ms);
}

}  // namespace

std::string RanksWithNodes(const std::vector<int>& ranks, int ranks_per_node) {
  std::string out = JoinRanks(ranks);
  if (ranks_per_node <= 0 || ranks.empty()) return out;
  std::set<int> nodes;
  for (int r : ranks) nodes.insert(r / ranks_per_node);
  std::vector<int> list(nodes.begin(), nodes.end());
  return StrCat(out, list.size() > 1 ? " (nodes " : " (node ", JoinRanks(list), ")");
}

// ---------------------------------------------------------------- server

class ControlServiceImpl final : public Control::Service {
 public:
  ControlServiceImpl(std::string token, double heartbeat_timeout_s, JobShape shape)
      : token_(std::move(token)),
        heartbeat_timeout_s_(heartbeat_timeout_s),
        shape_(std::move(shape)) {
    if (heartbeat_timeout_s_ > 0) watchdog_ = std::thread([this] { Watch(); });
  }
  ~ControlServiceImpl() { Stop(); }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      cv_.notify_all();
    }
    if (watchdog_.joinable()) watchdog_.join();
  }

  // Aborts the job when a rank that has sent heartbeats (and has not said it is leaving) stays
  // silent for heartbeat_timeout_s: a killed process cannot say goodbye. Ranks of a lost node
  // fall silent together: every rank silent for more than a few heartbeats is named with it.
  void Watch() {
    std::unique_lock<std::mutex> lock(mu_);
    const auto limit = std::chrono::milliseconds(ToMsInt(heartbeat_timeout_s_));
    const auto quiet = std::min(limit / 2, std::chrono::milliseconds(3000));
    while (!stopping_) {
      cv_.wait_for(lock, std::chrono::milliseconds(250));
      if (aborted_ || stopping_) continue;
      const auto now = Clock::now();
      std::vector<int> lost, silent;
      for (const auto& [rank, seen] : last_seen_) {
        if (now - seen > limit) lost.push_back(rank);
        if (now - seen > quiet) silent.push_back(rank);
      }
      if (lost.empty()) continue;
      aborted_ = true;
      abort_rank_ = lost.front();
      abort_reason_ = StrCat(silent.size() > 1 ? "ranks " : "rank ",
                             RanksWithNodes(silent, shape_.ranks_per_node),
                             " sent no heartbeat for ", FormatSeconds(heartbeat_timeout_s_),
                             " s (the process died, its node was lost, or it is stuck)");
      cv_.notify_all();
    }
  }

  grpc::Status Set(grpc::ServerContext*, const SetRequest* req, SetResponse*) override {
    if (req->token() != token_) return Denied();
    std::lock_guard<std::mutex> lock(mu_);
    kv_[req->key()] = req->value();
    cv_.notify_all();
    return grpc::Status::OK;
  }

  grpc::Status Get(grpc::ServerContext*, const GetRequest* req, GetResponse* resp) override {
    if (req->token() != token_) return Denied();
    std::lock_guard<std::mutex> lock(mu_);
    auto it = kv_.find(req->key());
    resp->set_found(it != kv_.end());
    if (it != kv_.end()) resp->set_value(it->second);
    return grpc::Status::OK;
  }

  grpc::Status Wait(grpc::ServerContext*, const WaitRequest* req, WaitResponse* resp) override {
    if (req->token() != token_) return Denied();
    const auto deadline = DeadlineAfterMs(req->timeout_ms());
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (aborted_) {
        FillAbort(resp);
        return grpc::Status::OK;
      }
      if (stopping_) return ShuttingDown();
      const std::string* missing = nullptr;
      for (const auto& k : req->keys()) {
        if (!kv_.count(k)) {
          missing = &k;
          break;
        }
      }
      if (missing == nullptr) {
        resp->set_ok(true);
        return grpc::Status::OK;
      }
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && Clock::now() >= deadline) {
        // One last look: the key may have arrived together with the deadline.
        bool all = std::all_of(req->keys().begin(), req->keys().end(),
                               [&](const std::string& k) { return kv_.count(k) > 0; });
        if (all && !aborted_) {
          resp->set_ok(true);
          return grpc::Status::OK;
        }
        if (aborted_) continue;
        for (const auto& k : req->keys()) {
          if (!kv_.count(k)) {
            resp->set_missing_key(k);
            break;
          }
        }
        resp->set_ok(false);
        return grpc::Status::OK;
      }
    }
  }

  grpc::Status Add(grpc::ServerContext*, const AddRequest* req, AddResponse* resp) override {
    if (req->token() != token_) return Denied();
    std::lock_guard<std::mutex> lock(mu_);
    int64_t current = 0;
    auto it = kv_.find(req->key());
    if (it != kv_.end()) {
      try {
        size_t used = 0;
        current = std::stoll(it->second, &used);
        if (used != it->second.size()) throw std::invalid_argument("trailing");
      } catch (const std::exception&) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "key '" + req->key() + "' does not hold an integer");
      }
    }
    current += req->delta();
    kv_[req->key()] = std::to_string(current);
    resp->set_value(current);
    cv_.notify_all();
    return grpc::Status::OK;
  }

  grpc::Status Barrier(grpc::ServerContext*, const BarrierRequest* req,
                       BarrierResponse* resp) override {
    if (req->token() != token_) return Denied();
    const auto deadline = DeadlineAfterMs(req->timeout_ms());
    std::unique_lock<std::mutex> lock(mu_);
    if (aborted_) {
      FillAbort(resp);
      return grpc::Status::OK;
    }
    BarrierState& b = barriers_[req->name()];
    if (b.arrived.empty()) b.world_size = req->world_size();
    if (b.world_size != req->world_size()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "world size " + std::to_string(req->world_size()) + " differs from the " +
                              std::to_string(b.world_size) + " given by the ranks already waiting");
    }
    b.arrived.insert(req->rank());
    b.seen.insert(req->rank());
    const uint64_t generation = b.generation;
    if (static_cast<int>(b.arrived.size()) >= b.world_size) {
      b.arrived.clear();
      b.seen.clear();
      ++b.generation;
      cv_.notify_all();
      resp->set_ok(true);
      return grpc::Status::OK;
    }
    for (;;) {
      if (b.generation != generation) {
        resp->set_ok(true);
        return grpc::Status::OK;
      }
      if (aborted_) {
        b.arrived.erase(req->rank());
        FillAbort(resp);
        return grpc::Status::OK;
      }
      if (stopping_) return ShuttingDown();
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && b.generation == generation &&
          !aborted_) {
        for (int r : b.seen) resp->add_arrived(r);
        b.arrived.erase(req->rank());
        resp->set_ok(false);
        return grpc::Status::OK;
      }
    }
  }

  grpc::Status Heartbeat(grpc::ServerContext* ctx, const HeartbeatRequest* req,
                         HeartbeatResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (req->token() != token_) return Refuse(ctx, *req);
    if (req->leaving()) {
      last_seen_.erase(req->rank());
    } else {
      last_seen_[req->rank()] = Clock::now();
      joined_.insert(req->rank());
    }
    if (aborted_) FillAbort(resp);
    return grpc::Status::OK;
  }

  grpc::Status ReadClock(grpc::ServerContext*, const ClockRequest* req,
                         ClockResponse* resp) override {
    if (req->token() != token_) return Denied();
    resp->set_steady_ns(SteadyNs());
    return grpc::Status::OK;
  }

  grpc::Status Abort(grpc::ServerContext*, const AbortRequest* req, AbortResponse*) override {
    if (req->token() != token_) return Denied();
    std::lock_guard<std::mutex> lock(mu_);
    if (!aborted_) {  // the first abort is the cause; later ones are consequences
      aborted_ = true;
      abort_rank_ = req->rank();
      abort_reason_ = req->reason();
    }
    cv_.notify_all();
    return grpc::Status::OK;
  }

 private:
  struct BarrierState {
    int world_size = 0;
    std::set<int> arrived;  // waiting now; the barrier opens when this reaches world_size
    std::set<int> seen;     // arrived in this round, including ranks that gave up since
    uint64_t generation = 0;
  };

  static grpc::Status Denied() {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "job token mismatch");
  }

  // A rank of another job (or of this one, started with other settings) presented its token:
  // say what differs, on the master's stderr and to the rank. While this job still misses
  // ranks, stop it: the refused node's ranks will not come. (Called with mu_ held.)
  grpc::Status Refuse(grpc::ServerContext* ctx, const HeartbeatRequest& req) {
    const std::string diff = JobDifference(req.job(), shape_.job);
    const bool gathering =
        shape_.world_size > 0 && static_cast<int>(joined_.size()) < shape_.world_size;
    std::fprintf(stderr, "oneflow: the master refused a rank %d from %s: %s; %s\n", req.rank(),
                 ctx->peer().c_str(), diff.c_str(),
                 gathering ? "stopping this job, which cannot gather its ranks (start every node "
                             "with the same command and settings)"
                           : "ignoring it (another job on this port?)");
    std::fflush(stderr);
    if (gathering && !aborted_) {
      aborted_ = true;
      abort_rank_ = 0;
      abort_reason_ = StrCat("the master refused a rank ", req.rank(), " from ", ctx->peer(), ": ",
                             diff, " (start every node with the same command and settings)");
      cv_.notify_all();
    }
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, diff);
  }
  static grpc::Status ShuttingDown() {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the master is shutting down");
  }
  template <typename Resp>
  void FillAbort(Resp* resp) {
    resp->set_aborted(true);
    resp->set_abort_rank(abort_rank_);
    resp->set_abort_reason(abort_reason_);
  }

  static int64_t ToMsInt(double s) { return static_cast<int64_t>(s * 1000.0); }

  const std::string token_;
  const double heartbeat_timeout_s_;
  const JobShape shape_;
  std::set<int> joined_;  // ranks whose handshake was accepted
  std::thread watchdog_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::string, std::string> kv_;
  std::map<std::string, BarrierState> barriers_;
  std::map<int, Clock::time_point> last_seen_;
  bool aborted_ = false;
  int abort_rank_ = -1;
  std::string abort_reason_;
};

struct ControlServer::Impl {
  std::unique_ptr<ControlServiceImpl> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  bool stopped = false;
};

ControlServer::ControlServer(const std::string& addr, int port, std::string token,
                             double heartbeat_timeout_s, JobShape shape)
    : impl_(new Impl) {
  impl_->service =
      std::make_unique<ControlServiceImpl>(std::move(token), heartbeat_timeout_s, std::move(shape));
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default, which would let a second server share the port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int selected = 0;
  builder.AddListeningPort(addr + ":" + std::to_string(port), grpc::InsecureServerCredentials(),
                           &selected);
  builder.RegisterService(impl_->service.get());
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || selected == 0) {
    if (impl_->server) impl_->server->Shutdown();
    throw Error(StrCat("control plane: cannot listen on ", addr, ":", port,
                       " (address already in use?) as rank 0"));
  }
  impl_->port = selected;
}

ControlServer::~ControlServer() { Shutdown(); }

int ControlServer::port() const { return impl_->port; }

void ControlServer::Shutdown() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->service->Stop();
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  impl_->server->Wait();
}

// ---------------------------------------------------------------- client

struct ControlClient::Impl {
  std::string target;
  std::string token;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<Control::Stub> stub;
};

namespace {

// Room for the server to answer a timed-out wait before the client gives up on the RPC.
constexpr double kRpcGraceSeconds = 10.0;
constexpr double kPlainRpcSeconds = 60.0;

void SetDeadline(grpc::ClientContext* ctx, double seconds) {
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
}

int64_t ToMs(double seconds) { return static_cast<int64_t>(std::max(0.0, seconds) * 1000.0); }

const char* RefusalAdvice() {
  return " (another job on this port? give each job its own --master_port; or start every node "
         "with the same command and settings)";
}

}  // namespace

#define ONEFLOW_CONTROL_CHECK_STATUS(status, what)                                              \
  do {                                                                                          \
    const grpc::Status& s_ = (status);                                                          \
    if (!s_.ok()) {                                                                             \
      if (s_.error_code() == grpc::StatusCode::PERMISSION_DENIED)                               \
        throw Error(StrCat("control plane: rank ", rank_, " was refused by the master at ",     \
                           impl_->target, ": ", s_.error_message(), RefusalAdvice()));          \
      throw Error(StrCat("control plane: rank ", rank_, " failed ", what, " on the master at ", \
                         impl_->target, ": ", s_.error_message()));                             \
    }                                                                                           \
  } while (0)

ControlClient::ControlClient(const std::string& master_addr, int master_port, int rank,
                             std::string token, double connect_timeout_s, const std::string& job)
    : rank_(rank), impl_(new Impl) {
  impl_->target = master_addr + ":" + std::to_string(master_port);
  impl_->token = std::move(token);
  impl_->channel = grpc::CreateChannel(impl_->target, grpc::InsecureChannelCredentials());
  const auto deadline =
      std::chrono::system_clock::now() + std::chrono::milliseconds(ToMs(connect_timeout_s));
  if (!impl_->channel->WaitForConnected(deadline)) {
    throw Error(StrCat("control plane: rank ", rank_, " could not reach the master at ",
                       impl_->target, " within ", FormatSeconds(connect_timeout_s), " s"));
  }
  impl_->stub = Control::NewStub(impl_->channel);
  // Present the token now, so a stranger learns at once rather than at its first wait.
  grpc::ClientContext ctx;
  SetDeadline(&ctx, std::max(1.0, connect_timeout_s));
  HeartbeatRequest req;
  req.set_token(impl_->token);
  req.set_rank(rank_);
  req.set_job(job);
  HeartbeatResponse resp;
  ONEFLOW_CONTROL_CHECK_STATUS(impl_->stub->Heartbeat(&ctx, req, &resp), "the handshake");
}

ControlClient::~ControlClient() = default;

void ControlClient::Set(const std::string& key, const std::string& value) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, kPlainRpcSeconds);
  SetRequest req;
  req.set_token(impl_->token);
  req.set_key(key);
  req.set_value(value);
  SetResponse resp;
  ONEFLOW_CONTROL_CHECK_STATUS(impl_->stub->Set(&ctx, req, &resp), "set of key '" + key + "'");
}

std::optional<std::string> ControlClient::Get(const std::string& key) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, kPlainRpcSeconds);
  GetRequest req;
  req.set_token(impl_->token);
  req.set_key(key);
  GetResponse resp;
  ONEFLOW_CONTROL_CHECK_STATUS(impl_->stub->Get(&ctx, req, &resp), "get of key '" + key + "'");
  if (!resp.found()) return std::nullopt;
  return resp.value();
}

void ControlClient::Wait(const std::vector<std::string>& keys, double timeout_s) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, std::max(0.0, timeout_s) + kRpcGraceSeconds);
  WaitRequest req;
  req.set_token(impl_->token);
  for (const auto& k : keys) req.add_keys(k);
  req.set_timeout_ms(ToMs(timeout_s));
  req.set_rank(rank_);
  WaitResponse resp;
  ONEFLOW_CONTROL_CHECK_STATUS(impl_->stub->Wait(&ctx, req, &resp), "a wait for keys");
  if (resp.aborted()) {
    throw Error(StrCat("control plane: rank ", rank_, " stopped waiting for keys because rank ",
                       resp.abort_rank(), " aborted the job: ", resp.abort_reason()));
  }
  if (!resp.ok()) {
    throw Error(StrCat("control plane: rank ", rank_, " timed out after ", FormatSeconds(timeout_s),
                       " s waiting for key '", resp.missing_key(), "'"));
  }
}

int64_t ControlClient::Add(const std::string& key, int64_t delta) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, kPlainRpcSeconds);
  AddRequest req;
  req.set_token(impl_->token);
  req.set_key(key);
  req.set_delta(delta);
  AddResponse resp;
  ONEFLOW_CONTROL_CHECK_STATUS(impl_->stub->Add(&ctx, req, &resp), "add to key '" + key + "'");
  return resp.value();
}

std::pair<int64_t, int64_t> ControlClient::MasterClockOffset(int samples) {
  int64_t best_offset = 0, best_rtt = -1;
  for (int i = 0; i < samples; ++i) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, kPlainRpcSeconds);
    ClockRequest req;
    req.set_token(impl_->token);
    ClockResponse resp;
    const int64_t sent = SteadyNs();
    ONEFLOW_CONTROL_CHECK_STATUS(impl_->stub->ReadClock(&ctx, req, &resp), "a clock reading");
    const int64_t received = SteadyNs();
    // The master read its clock somewhere in the round trip: assume its middle.
    if (best_rtt < 0 || received - sent < best_rtt) {
      best_rtt = received - sent;
      best_offset = sent + best_rtt / 2 - resp.steady_ns();
    }
  }
  return {best_offset, best_rtt};
}

// One barrier call: true when it opened, else the ranks that had arrived.
bool ControlClient::BarrierCall(const std::string& name, int world_size, double timeout_s,
                                std::vector<int>* arrived) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, std::max(0.0, timeout_s) + kRpcGraceSeconds);
  BarrierRequest req;
  req.set_token(impl_->token);
  req.set_name(name);
  req.set_rank(rank_);
  req.set_world_size(world_size);
  req.set_timeout_ms(ToMs(timeout_s));
  BarrierResponse resp;
  ONEFLOW_CONTROL_CHECK_STATUS(impl_->stub->Barrier(&ctx, req, &resp), "barrier '" + name + "'");
  if (resp.aborted()) {
    throw Error(StrCat("control plane: rank ", rank_, " left barrier '", name, "' because rank ",
                       resp.abort_rank(), " aborted the job: ", resp.abort_reason()));
  }
  arrived->assign(resp.arrived().begin(), resp.arrived().end());
  return resp.ok();
}

namespace {
std::vector<int> Missing(const std::vector<int>& arrived, int world_size) {
  std::vector<int> missing;
  for (int r = 0; r < world_size; ++r) {
    if (std::find(arrived.begin(), arrived.end(), r) == arrived.end()) missing.push_back(r);
  }
  return missing;
}
}  // namespace

std::vector<int> ControlClient::TryBarrier(const std::string& name, int world_size,
                                           double timeout_s) {
  std::vector<int> arrived;
  if (BarrierCall(name, world_size, timeout_s, &arrived)) return {};
  return Missing(arrived, world_size);
}

void ControlClient::Barrier(const std::string& name, int world_size, double timeout_s) {
  std::vector<int> arrived;
  if (!BarrierCall(name, world_size, timeout_s, &arrived)) {
    throw Error(StrCat("control plane: rank ", rank_, " timed out after ", FormatSeconds(timeout_s),
                       " s in barrier '", name, "' of ", world_size, " ranks: arrived ranks ",
                       JoinRanks(arrived), "; missing ranks ",
                       JoinRanks(Missing(arrived, world_size))));
  }
}

void ControlClient::Heartbeat(bool leaving) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, leaving ? 2.0 : kPlainRpcSeconds);
  HeartbeatRequest req;
  req.set_token(impl_->token);
  req.set_rank(rank_);
  req.set_leaving(leaving);
  HeartbeatResponse resp;
  ONEFLOW_CONTROL_CHECK_STATUS(impl_->stub->Heartbeat(&ctx, req, &resp), "a heartbeat");
  if (resp.aborted()) {
    throw Error(StrCat("control plane: rank ", rank_, " learned that rank ", resp.abort_rank(),
                       " aborted the job: ", resp.abort_reason()));
  }
}

void ControlClient::Abort(const std::string& reason) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, kPlainRpcSeconds);
  AbortRequest req;
  req.set_token(impl_->token);
  req.set_rank(rank_);
  req.set_reason(reason);
  AbortResponse resp;
  ONEFLOW_CONTROL_CHECK_STATUS(impl_->stub->Abort(&ctx, req, &resp), "an abort");
}

#undef ONEFLOW_CONTROL_CHECK_STATUS

}  // namespace runtime
}  // namespace oneflow
