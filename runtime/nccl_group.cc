#include "runtime/nccl_group.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

#include "core/kernels/cuda/cuda_libs.h"
#include "core/kernels/cuda/cuda_util.h"

namespace oneflow {
namespace runtime {

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// "<result string>: <NCCL's last error message>", for the error lines.
std::string NcclError(ncclResult_t r, ncclComm_t comm) {
  std::string out = NCCL(ncclGetErrorString)(r);
  const char* last = NCCL(ncclGetLastError)(comm);
  if (last && *last) {
    std::string detail = last;
    for (char& c : detail) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    out += ": " + detail;
  }
  return out;
}

}  // namespace

// The communicator, its stream and its collectives in flight. Calls run under the
// communicator's lock, but host waits poll the group (cuda::Watch) from any thread: `mu`
// guards comm and ops.
struct NcclGroup::State : cuda::Watch {
  std::mutex mu;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cuda::Event ready;  // compute stream -> NCCL stream (created on the group's device)
  struct Op {
    std::shared_ptr<cuda::Event> done;  // recorded on the NCCL stream after the collective
    std::string what;                   // "all_reduce: rank 1 in group cuda:[0,1]"
    Clock::time_point since;            // when it was queued, or its predecessor seen done
  };
  std::deque<Op> ops;  // queued and not yet seen finished, oldest first
  double timeout_s = 0;

  bool Poll() override {
    std::lock_guard<std::mutex> lock(mu);
    return CheckLocked();
  }

  // Under mu: forgets the finished collectives; throws, having aborted the communicator, when
  // NCCL reports an error or the oldest unfinished one has not finished within the timeout.
  // Whether some are still in flight.
  bool CheckLocked() {
    while (!ops.empty() && ops.front().done->Query()) {
      ops.pop_front();
      if (!ops.empty()) ops.front().since = std::max(ops.front().since, Clock::now());
    }
    if (ops.empty() || !comm) return false;
    ncclResult_t async = ncclSuccess;
    NCCL(ncclCommGetAsyncError)(comm, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      Abort(StrCat(ops.front().what, " failed: ", NcclError(async, comm)));
    }
    if (Since(ops.front().since) > timeout_s) {
      Abort(StrCat(ops.front().what, " timed out after ", timeout_s,
                   " s (is another rank dead or stuck?)"));
    }
    return true;
  }

  // Under mu. Aborting ends the collectives in flight, so the streams waiting for them go on.
  [[noreturn]] void Abort(const std::string& message) {
    NCCL(ncclCommAbort)(comm);
    comm = nullptr;
    ops.clear();
    throw Error(message);
  }
};

namespace {

ncclDataType_t NcclType(DType t, const char* name) {
  switch (t) {
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kFloat64:
      return ncclFloat64;
    case DType::kFloat16:
      return ncclFloat16;
    case DType::kBFloat16:
      return ncclBfloat16;
    case DType::kInt32:
      return ncclInt32;
    case DType::kInt64:
      return ncclInt64;
    case DType::kInt8:
      return ncclInt8;
    case DType::kUInt8:
    case DType::kBool:
      return ncclUint8;
  }
  throw Error(StrCat(name, ": NCCL cannot reduce ", DTypeName(t), " tensors"));
}

// A sum of bools is their OR (as in the CPU collectives): max over 0/1 bytes.
ncclRedOp_t NcclOp(ReduceOp op, DType t) {
  if (t == DType::kBool && op == ReduceOp::kSum) return ncclMax;
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kAvg:
      return ncclAvg;
  }
  return ncclSum;
}

std::string BusId(int device) {
  char id[64] = {0};
  cuda::Check(cudaDeviceGetPCIBusId(id, sizeof(id), device), "cudaDeviceGetPCIBusId");
  return id;
}

// Waits while NCCL reports the communicator busy with a non-blocking call; throws on error
// or after timeout_s (the caller then aborts the communicator).
void AwaitComm(ncclComm_t comm, ncclResult_t first, double timeout_s, const std::string& what) {
  ncclResult_t state = first;
  auto t0 = Clock::now();
  while (state == ncclInProgress) {
    if (Since(t0) > timeout_s) {
      throw Error(StrCat(what, " timed out after ", timeout_s,
                         " s (is another rank dead or "
                         "stuck?)"));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    NCCL(ncclCommGetAsyncError)(comm, &state);
  }
  if (state != ncclSuccess) throw Error(StrCat(what, " failed: ", NcclError(state, comm)));
}

}  // namespace

std::unique_ptr<NcclGroup> NcclGroup::Create(ControlClient& client, const std::string& desc,
                                             int my_rank, int group_rank, int size,
                                             const Device& device, double timeout_s,
                                             std::string* why) {
  cuda::RequireDevice(device.index, "nccl");
  // This thread (often the communicator's worker) may not have touched the device yet: every
  // CUDA object below (events, stream, communicator) belongs to the current device.
  cuda::SetDevice(device.index);
  const std::string prefix = "nccl/" + desc + "/";
  const char* env = std::getenv("ONEFLOW_NCCL");
  const bool allowed = !(env && std::string(env) == "0");
  // Every member learns every member's GPU, so all take the same decision.
  client.Set(prefix + "gpu/" + std::to_string(group_rank),
             StrCat(allowed ? "" : "off:", HostId(), "/", BusId(device.index)));
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(prefix + "gpu/" + std::to_string(r));
  client.Wait(keys, timeout_s);
  std::set<std::string> gpus;
  for (int r = 0; r < size; ++r) {
    std::string gpu = client.Get(keys[r]).value_or("");
    if (gpu.rfind("off:", 0) == 0) {
      *why = StrCat("ONEFLOW_NCCL=0 on rank group position ", r);
      return nullptr;
    }
    if (!gpus.insert(gpu).second) {
      *why = StrCat("two of its ranks share GPU ", gpu.substr(gpu.find('/') + 1),
                    "; NCCL needs one GPU per rank");
      return nullptr;
    }
  }

  ncclUniqueId id;
  if (group_rank == 0) {
    ncclResult_t r = NCCL(ncclGetUniqueId)(&id);
    if (r != ncclSuccess) {
      throw Error(StrCat("nccl: rank ", my_rank, " could not create the id of group ", desc, ": ",
                         NcclError(r, nullptr)));
    }
    client.Set(prefix + "id", std::string(reinterpret_cast<const char*>(&id), sizeof(id)));
  }
  client.Wait({prefix + "id"}, timeout_s);
  std::string bytes = client.Get(prefix + "id").value_or("");
  ONEFLOW_CHECK(bytes.size() == sizeof(id), "nccl: malformed unique id for group ", desc);
  std::memcpy(&id, bytes.data(), sizeof(id));

  auto state = std::make_unique<State>();  // its events: on the device made current above
  state->timeout_s = timeout_s;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t r = NCCL(ncclCommInitRankConfig)(&state->comm, size, id, group_rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    throw Error(StrCat("nccl: rank ", my_rank, " could not join group ", desc, ": ",
                       NcclError(r, state->comm)));
  }
  try {
    AwaitComm(state->comm, r, timeout_s, StrCat("nccl: rank ", my_rank, " joining group ", desc));
  } catch (...) {
    NCCL(ncclCommAbort)(state->comm);
    throw;
  }
  ONEFLOW_CUDA_CHECK(cudaStreamCreateWithFlags(&state->stream, cudaStreamNonBlocking));
  cuda::AddWatch(state.get());
  return std::unique_ptr<NcclGroup>(
      new NcclGroup(std::move(state), device, desc, my_rank, timeout_s));
}

NcclGroup::NcclGroup(std::unique_ptr<State> state, Device device, std::string desc, int my_rank,
                     double timeout_s)
    : state_(std::move(state)),
      device_(device),
      desc_(std::move(desc)),
      my_rank_(my_rank),
      timeout_s_(timeout_s) {}

NcclGroup::~NcclGroup() {
  cuda::RemoveWatch(state_.get());
  cudaSetDevice(device_.index);  // no throwing here; a failure shows in the calls below
  std::lock_guard<std::mutex> lock(state_->mu);
  // Collectives still in flight finish first (bounded by the timeout): destroying the
  // communicator under them would cut them off on the peers. One that failed or stalls is
  // aborted instead.
  bool clean = true;
  try {
    while (state_->CheckLocked()) std::this_thread::sleep_for(std::chrono::microseconds(20));
  } catch (...) {
    clean = false;
  }
  if (state_->comm) (clean ? NCCL(ncclCommDestroy) : NCCL(ncclCommAbort))(state_->comm);
  if (state_->stream) cudaStreamDestroy(state_->stream);
}

template <typename F>
void NcclGroup::Run(const char* name, const std::vector<Tensor>& tensors, F&& enqueue) {
  // First, on every thread that runs a collective: the events below belong to the device.
  cuda::SetDevice(device_.index);
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->CheckLocked();  // an earlier collective's failure or stall is reported here
  if (!state_->comm) {
    throw Error(StrCat(name, ": rank ", my_rank_, " cannot use group ", desc_,
                       ": its NCCL communicator failed earlier"));
  }
  cudaStream_t compute = cuda::StreamFor(device_);
  state_->ready.RecordOn(compute);
  state_->ready.WaitOn(state_->stream);
  const std::string what = StrCat(name, ": rank ", my_rank_, " in group ", desc_);
  ncclResult_t r = NCCL(ncclGroupStart)();
  if (r == ncclSuccess) {
    r = enqueue(state_->comm, state_->stream);
    ncclResult_t end = NCCL(ncclGroupEnd)();
    if (r == ncclSuccess || r == ncclInProgress) r = end;
  }
  if (r != ncclSuccess && r != ncclInProgress) {
    throw Error(StrCat(what, " failed: ", NcclError(r, state_->comm)));
  }
  try {
    // Non-blocking communicator: the group call may still be queueing; bounded as any wait.
    AwaitComm(state_->comm, r, timeout_s_, what);
  } catch (...) {
    NCCL(ncclCommAbort)(state_->comm);
    state_->comm = nullptr;
    state_->ops.clear();
    throw;
  }
  auto done = std::make_shared<cuda::Event>();
  done->RecordOn(state_->stream);
  state_->ops.push_back({done, what, Clock::now()});
  // The compute stream waits for the collective on the GPU; the host goes on. Blocks the
  // collective uses may be freed once this returns: the caching allocator hands them only to
  // later compute-stream work, which comes after this wait.
  if (deferred_) {
    deferred_->push_back([done, tensors, compute] { done->WaitOn(compute); });
  } else {
    done->WaitOn(compute);
  }
}

namespace {

// Byte offset of element `elems` of t.
void* At(const Tensor& t, int64_t elems) {
  return static_cast<char*>(t.raw_data()) + elems * static_cast<int64_t>(SizeOf(t.dtype()));
}

}  // namespace

void NcclGroup::AllReduce(const Tensor& in, const Tensor& out, ReduceOp op, const char* name) {
  ncclDataType_t type = NcclType(out.dtype(), name);
  ncclRedOp_t red = NcclOp(op, out.dtype());
  Run(name, {in, out}, [&](ncclComm_t comm, cudaStream_t s) {
    return NCCL(ncclAllReduce)(in.raw_data(), out.raw_data(), out.numel(), type, red, comm, s);
  });
}

void NcclGroup::Broadcast(const Tensor& t, int root, const char* name) {
  ncclDataType_t type = NcclType(t.dtype(), name);
  Run(name, {t}, [&](ncclComm_t comm, cudaStream_t s) {
    return NCCL(ncclBroadcast)(t.raw_data(), t.raw_data(), t.numel(), type, root, comm, s);
  });
}

void NcclGroup::AllGatherV(const Tensor& in, const Tensor& out, const std::vector<int64_t>& counts,
                           const char* name) {
  ncclDataType_t type = NcclType(out.dtype(), name);
  bool even = true;
  for (int64_t c : counts) even &= c == counts[0];
  Run(name, {in, out}, [&](ncclComm_t comm, cudaStream_t s) {
    if (even) return NCCL(ncclAllGather)(in.raw_data(), out.raw_data(), counts[0], type, comm, s);
    // Uneven: one broadcast per rank into its slice, fused by the group call.
    int64_t off = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
      ncclResult_t res = NCCL(ncclBroadcast)(in.raw_data(), At(out, off), counts[r], type,
                                             static_cast<int>(r), comm, s);
      if (res != ncclSuccess && res != ncclInProgress) return res;
      off += counts[r];
    }
    return ncclSuccess;
  });
}

void NcclGroup::ReduceScatterV(const Tensor& in, const Tensor& out,
                               const std::vector<int64_t>& counts, ReduceOp op, const char* name) {
  ncclDataType_t type = NcclType(out.dtype(), name);
  ncclRedOp_t red = NcclOp(op, out.dtype());
  bool even = true;
  for (int64_t c : counts) even &= c == counts[0];
  Run(name, {in, out}, [&](ncclComm_t comm, cudaStream_t s) {
    if (even) {
      return NCCL(ncclReduceScatter)(in.raw_data(), out.raw_data(), counts[0], type, red, comm, s);
    }
    // Uneven: one reduce per rank of its slice, to that rank.
    int64_t off = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
      ncclResult_t res = NCCL(ncclReduce)(At(in, off), out.raw_data(), counts[r], type, red,
                                          static_cast<int>(r), comm, s);
      if (res != ncclSuccess && res != ncclInProgress) return res;
      off += counts[r];
    }
    return ncclSuccess;
  });
}

void NcclGroup::AllToAllV(const Tensor& in, const Tensor& out,
                          const std::vector<int64_t>& in_counts,
                          const std::vector<int64_t>& out_counts, const char* name) {
  ncclDataType_t type = NcclType(out.dtype(), name);
  Run(name, {in, out}, [&](ncclComm_t comm, cudaStream_t s) {
    int64_t in_off = 0, out_off = 0;
    for (size_t r = 0; r < in_counts.size(); ++r) {
      ncclResult_t res =
          NCCL(ncclSend)(At(in, in_off), in_counts[r], type, static_cast<int>(r), comm, s);
      if (res != ncclSuccess && res != ncclInProgress) return res;
      res = NCCL(ncclRecv)(At(out, out_off), out_counts[r], type, static_cast<int>(r), comm, s);
      if (res != ncclSuccess && res != ncclInProgress) return res;
      in_off += in_counts[r];
      out_off += out_counts[r];
    }
    return ncclSuccess;
  });
}

void NcclGroup::Send(const Tensor& t, int peer, const char* name) {
  ncclDataType_t type = NcclType(t.dtype(), name);
  Run(name, {t}, [&](ncclComm_t comm, cudaStream_t s) {
    return NCCL(ncclSend)(t.raw_data(), t.numel(), type, peer, comm, s);
  });
}

void NcclGroup::Recv(const Tensor& t, int peer, const char* name) {
  ncclDataType_t type = NcclType(t.dtype(), name);
  Run(name, {t}, [&](ncclComm_t comm, cudaStream_t s) {
    return NCCL(ncclRecv)(t.raw_data(), t.numel(), type, peer, comm, s);
  });
}

}  // namespace runtime
}  // namespace oneflow
