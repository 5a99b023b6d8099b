#include "runtime/env.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>

#include "core/error.h"
#include "core/functional.h"
#include "runtime/call_watch.h"

namespace oneflow {
namespace runtime {
namespace {

std::atomic<Env*> g_env{nullptr};
std::mutex g_env_mu;

std::string FormatSeconds(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

[[noreturn]] void Die(int rank, const std::string& why) {
  std::fprintf(stderr, "[rank %d] oneflow: stopping: %s\n", rank, why.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  _exit(1);
}

std::terminate_handler g_previous_terminate = nullptr;

// A C++ program that dies of an uncaught exception tells the others before it goes.
void AbortOnTerminate() {
  Env* env = g_env.load();
  if (env) {
    std::string what = "uncaught exception";
    if (auto e = std::current_exception()) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        what = ex.what();
      } catch (...) {
      }
    }
    env->Abort(what);
  }
  if (g_previous_terminate) g_previous_terminate();
  std::abort();
}

}  // namespace

Env& Env::Get() {
  Env* env = g_env.load(std::memory_order_acquire);
  if (env) return *env;
  std::lock_guard<std::mutex> lock(g_env_mu);
  env = g_env.load();
  if (!env) {
    env = new Env();  // never deleted: threads and sockets end in Shutdown(), at exit
    g_env.store(env, std::memory_order_release);
    std::atexit([] { g_env.load()->Shutdown(); });
    g_previous_terminate = std::set_terminate(AbortOnTerminate);
  }
  return *env;
}

bool Env::Started() { return g_env.load() != nullptr; }

// Seconds between rank 0's lines about ranks that have not joined (ONEFLOW_WAIT_REPORT_SECONDS).
double WaitReportSeconds() {
  const char* v = std::getenv("ONEFLOW_WAIT_REPORT_SECONDS");
  double s = v ? std::atof(v) : 0;
  return s > 0 ? s : 30.0;
}

Env::Env() : world_(WorldFromEnv()) {
  if (world_.world_size == 1) return;
  const std::string job = JobDescription(world_);
  // Without ONEFLOW_JOB_TOKEN, what the ranks of one job share is its token.
  const std::string token = world_.token.empty() ? job : world_.token;
  if (world_.rank == 0) {
    server_ = std::make_unique<ControlServer>(
        world_.master_addr, world_.master_port, token, HeartbeatTimeoutSeconds(),
        JobShape{world_.world_size, world_.local_world_size, job});
  }
  client_ = std::make_unique<ControlClient>(world_.master_addr, world_.master_port, world_.rank,
                                            token, world_.timeout_seconds, job);
  heartbeat_ = std::thread([this] { HeartbeatLoop(); });
  try {
    Join();
  } catch (...) {
    StopHeartbeat();
    throw;
  }
}

void Env::StopHeartbeat() {
  {
    std::lock_guard<std::mutex> hb(hb_mu_);
    stopping_ = true;
    hb_cv_.notify_all();
  }
  if (heartbeat_.joinable()) heartbeat_.join();
}

// Every rank meets the others before the job starts. Rank 0 says every ~30 s whom it still
// waits for (and on which node), where, and for how long it will wait.
void Env::Join() {
  const double total = world_.timeout_seconds;
  const double step = world_.rank == 0 ? WaitReportSeconds() : total;
  double waited = 0;
  for (;;) {
    const double slice = std::min(step, total - waited);
    std::vector<int> missing = client_->TryBarrier("oneflow/join", world_.world_size, slice);
    if (missing.empty()) return;
    waited += slice;
    const std::string line = StrCat(
        missing.size() > 1 ? "ranks " : "rank ", RanksWithNodes(missing, world_.local_world_size),
        missing.size() > 1 ? " have" : " has", " not joined the job at ", world_.master_addr, ":",
        world_.master_port);
    if (waited >= total) {
      throw Error(StrCat("oneflow: rank ", world_.rank, ": ", line, " after ", FormatSeconds(total),
                         " s (ONEFLOW_TIMEOUT_SECONDS); were they started "
                         "with the same --master_addr, --master_port and sizes?"));
    }
    std::fprintf(stderr, "[rank %d] oneflow: waiting: %s; giving up in %s s\n", world_.rank,
                 line.c_str(), FormatSeconds(total - waited).c_str());
    std::fflush(stderr);
  }
}

Env::~Env() { Shutdown(); }

void Env::HeartbeatLoop() {
  int failures = 0;
  std::unique_lock<std::mutex> lock(hb_mu_);
  while (!stopping_) {
    hb_cv_.wait_for(lock, std::chrono::seconds(1));
    if (stopping_) return;
    lock.unlock();
    try {
      client_->Heartbeat();
      failures = 0;
      // A collective waiting for a member known to be elsewhere ends the job now, not at the
      // timeout (call_watch.h).
      const std::string desync = WatchTick(*client_, world_.rank);
      if (!desync.empty()) {
        Abort(desync);
        // The master lives in this process on rank 0: it serves the verdict a moment longer,
        // so that every rank's next heartbeat reads it.
        if (server_) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        lock.lock();
        if (stopping_) return;
        Die(world_.rank, desync);
      }
    } catch (const Error& e) {
      std::string msg = e.what();
      lock.lock();
      if (stopping_) return;
      if (msg.find("aborted the job") != std::string::npos) Die(world_.rank, msg);
      if (++failures >= 3) {
        Die(world_.rank, msg + " (did rank 0 exit or die?)");
      }
      continue;
    }
    lock.lock();
  }
}

Communicator& Env::Comm(const std::vector<int>& ranks, DeviceType device) {
#ifndef ONEFLOW_WITH_CUDA
  if (device != DeviceType::kCPU) {
    throw Error("communicator: CUDA groups need the CUDA build (NCCL), which this build lacks");
  }
#else
  (void)device;  // one communicator serves both (Communicator: NCCL for CUDA tensors)
#endif
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) throw Error("communicator: the runtime was shut down");
  for (int r : ranks) {
    if (r < 0 || r >= world_.world_size) {
      throw Error(StrCat("communicator: rank ", r, " is outside the world of ", world_.world_size,
                         " ranks"));
    }
  }
  auto it = comms_.find(ranks);
  if (it != comms_.end()) return *it->second;
  std::unique_ptr<Communicator> c;
  if (ranks.size() == 1 && ranks[0] == world_.rank) {
    c = std::make_unique<Communicator>(world_.rank);
  } else {
    c = std::make_unique<Communicator>(*client_, ranks, world_.rank, world_.timeout_seconds);
  }
  return *comms_.emplace(ranks, std::move(c)).first->second;
}

Communicator& Env::WorldComm(DeviceType device) {
  std::vector<int> all(world_.world_size);
  for (int r = 0; r < world_.world_size; ++r) all[r] = r;
  return Comm(all, device);
}

void Env::Abort(const std::string& reason) {
  if (!client_) return;
  aborted_ = true;
  try {
    client_->Abort(reason);
  } catch (const Error&) {
    // The master is gone too: nobody is left to tell.
  }
}

void Env::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) return;
  shut_down_ = true;
  if (!client_) return;
  try {
    // After this rank aborted the job nobody meets at the exit barrier: skip it quietly.
    if (!aborted_) {
      WatchPostExit(*client_, world_.rank);  // a member's collective waiting for this one ends
      client_->Barrier("oneflow/exit", world_.world_size, world_.timeout_seconds);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "[rank %d] oneflow: at exit: %s\n", world_.rank, e.what());
  }
  comms_.clear();
  StopHeartbeat();
  try {
    client_->Heartbeat(/*leaving=*/true);
  } catch (const Error&) {
  }
  if (server_) server_->Shutdown();
}

}  // namespace runtime

namespace comm {

using runtime::Env;

int GetRank() { return runtime::WorldFromEnv().rank; }
int GetWorldSize() { return runtime::WorldFromEnv().world_size; }
int GetLocalRank() { return runtime::WorldFromEnv().local_rank; }
int GetNodeSize() {
  runtime::WorldInfo w = runtime::WorldFromEnv();
  return (w.world_size + w.local_world_size - 1) / w.local_world_size;
}

void AllReduce(Tensor& t, runtime::ReduceOp op) { Env::Get().WorldComm().AllReduce(t, op); }
void Broadcast(Tensor& t, int src) { Env::Get().WorldComm().Broadcast(t, src); }

void AllGather(std::vector<Tensor>& outs, const Tensor& t) {
  runtime::Communicator& c = Env::Get().WorldComm();
  if (static_cast<int>(outs.size()) != c.size()) {
    throw Error(StrCat("all_gather: got ", outs.size(), " output tensors for a world of ", c.size(),
                       " ranks"));
  }
  Tensor in = t.is_contiguous() ? t : fn::contiguous_copy(t);
  Tensor flat = fn::empty(Shape({c.size() * in.numel()}), in.dtype());
  c.AllGather(fn::reshape(in, {in.numel()}), flat);
  for (int r = 0; r < c.size(); ++r) {
    if (outs[r].shape() != in.shape() || outs[r].dtype() != in.dtype()) {
      throw Error(StrCat("all_gather: output ", r, " is ", outs[r].shape(), " ",
                         DTypeName(outs[r].dtype()), ", expected ", in.shape(), " ",
                         DTypeName(in.dtype())));
    }
    fn::copy_(outs[r], fn::reshape(fn::slice(flat, 0, r * in.numel(), (r + 1) * in.numel()),
                                   in.shape().dims()));
  }
}

void ReduceScatter(Tensor& out, const std::vector<Tensor>& ins, runtime::ReduceOp op) {
  runtime::Communicator& c = Env::Get().WorldComm();
  if (static_cast<int>(ins.size()) != c.size()) {
    throw Error(StrCat("reduce_scatter: got ", ins.size(), " input tensors for a world of ",
                       c.size(), " ranks"));
  }
  std::vector<Tensor> flat;
  for (const Tensor& x : ins) {
    if (x.shape() != out.shape() || x.dtype() != out.dtype()) {
      throw Error(StrCat("reduce_scatter: input is ", x.shape(), " ", DTypeName(x.dtype()),
                         ", expected the output's ", out.shape(), " ", DTypeName(out.dtype())));
    }
    flat.push_back(fn::reshape(x, {x.numel()}));
  }
  Tensor in = fn::cat(flat, 0);
  Tensor res = fn::empty(Shape({out.numel()}), out.dtype());
  c.ReduceScatter(in, res, op);
  fn::copy_(out, fn::reshape(res, out.shape().dims()));
}

void Send(const Tensor& t, int dst, uint32_t tag) {
  Env::Get().WorldComm().Send(t.is_contiguous() ? t : fn::contiguous_copy(t), dst, tag);
}

void Recv(Tensor& t, int src, uint32_t tag) {
  if (t.is_contiguous()) return Env::Get().WorldComm().Recv(t, src, tag);
  Tensor tmp = fn::empty(t.shape(), t.dtype());
  Env::Get().WorldComm().Recv(tmp, src, tag);
  fn::copy_(t, tmp);
}

void Barrier() { Env::Get().WorldComm().Barrier(); }

}  // namespace comm
}  // namespace oneflow
