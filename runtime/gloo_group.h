// Collectives over TCP through Gloo for the members of a communicator's group (CPU buffers).
//
// The members rendezvous through the control plane (GlooStore: Gloo's Store interface over a
// ControlClient, keys prefixed "gloo/<group>/"), connect a full mesh of TCP pairs, and then run
// Gloo's collectives on raw buffers in place. The TCP device listens on $ONEFLOW_IFNAME when
// set (an interface name), else on the address ReachableAddress gives ($ONEFLOW_HOSTNAME, else
// the address on the route to the master).
//
// Every operation has the group's timeout; a Gloo timeout or I/O error becomes a one-line
// oneflow::Error naming the rank, the operation and the group:
//   all_reduce: rank 1 timed out after 5 s in group cpu:[0,1] (is another rank dead or stuck?)
// A broken connection (a peer's process or node is probably gone) first waits for the master's
// verdict (its heartbeat watchdog), so that the line names the lost ranks instead of an address.
// Before each collective the members trade their calls (Agree: 16 bytes to every peer, the
// Communicator's first step), so members that disagree refuse in one line naming each one's
// call before any data moves (shm_group.h shows the line).
// Destroying the group closes its TCP pairs: peers still inside an operation with this rank then
// fail with a connection error.
//
// Gloo's headers stay in gloo_group.cc, out of every header (the C++ SDK's included).
// Not thread-safe: the Communicator serializes calls. Peers and roots are group ranks, counts
// are elements; dtypes as DispatchCommDType (shm_group.h).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "runtime/call_print.h"
#include "runtime/control_plane.h"
#include "runtime/shm_group.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace oneflow {
namespace runtime {

class GlooStore;  // Gloo's rendezvous store over the control plane (gloo_group.cc)

class GlooGroup {
 public:
  // Every member constructs it with the same desc (unique per group in the job: it prefixes the
  // rendezvous keys); my_rank is the global rank (for messages), group_rank the position in the
  // group, ranks the group's global ranks (for messages; empty: group ranks). Throws
  // oneflow::Error when the peers do not connect within timeout_s.
  GlooGroup(ControlClient& client, std::string desc, int my_rank, int group_rank, int size,
            double timeout_s, std::vector<int> ranks = {});
  ~GlooGroup();
  GlooGroup(const GlooGroup&) = delete;
  GlooGroup& operator=(const GlooGroup&) = delete;

  // Sends this rank's call to every member and receives theirs; throws the mismatch line
  // (call_print.h) on every member when they differ.
  void Agree(const CallPrint& mine, const char* opname);
  // In place; kAvg sums, then divides by the group size.
  void AllReduce(void* data, int64_t count, DType dtype, ReduceOp op, const char* opname);
  // The root's elements overwrite everyone's.
  void Broadcast(void* data, int64_t count, DType dtype, int root, const char* opname);
  // out = concatenation of every member's `count` elements of in.
  void AllGather(const void* in, void* out, int64_t count, DType dtype, const char* opname);
  // Uneven: counts[i] elements of member i.
  void AllGatherV(const void* in, void* out, const std::vector<int64_t>& counts, DType dtype,
                  const char* opname);
  // in_counts[i] elements go to member i, out_counts[j] come from member j (either side may be
  // empty: this rank still takes part).
  void AllToAllV(const void* in, void* out, const std::vector<int64_t>& in_counts,
                 const std::vector<int64_t>& out_counts, DType dtype, const char* opname);
  // Point to point; a Send matches the Recv with the same tag.
  void Send(const void* data, size_t bytes, int peer, uint32_t tag, const char* opname);
  void Recv(void* data, size_t bytes, int peer, uint32_t tag, const char* opname);
  void Barrier(const char* opname);
  // What a timeout's message adds (the Communicator's report of what every member is doing).
  void set_timeout_report(std::function<std::string()> report) { report_ = std::move(report); }

 private:
  // Gloo's exception from operation `op` as the one-line oneflow::Error above.
  [[noreturn]] void Rethrow(const char* op, const std::exception& e) const;
  std::chrono::milliseconds Timeout() const;

  ControlClient& client_;
  std::string desc_;
  int my_rank_, group_rank_, size_;
  double timeout_s_;
  std::function<std::string()> report_;
  std::vector<int> ranks_;
  std::unique_ptr<GlooStore> store_;
  std::shared_ptr<gloo::Context> context_;
};

// A library's error text on one line (Gloo's and NCCL's may hold line breaks).
std::string OneLine(std::string s);

}  // namespace runtime
}  // namespace oneflow
