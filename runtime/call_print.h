// What one rank's collective call is, in 16 bytes, so that the members of a group can compare
// their calls on every call (cheaply: it travels with the first meeting of the call, see
// shm_group.h and gloo_group.h) and refuse, in one line naming each rank's call, a call the
// members do not agree on instead of moving mismatched data.
//
//   CallPrint p = CallPrint::Of(CallOp::kAllReduce, DType::kFloat32, 4);
//   p.Describe();                    // "all_reduce(float32, 4 elements)"
//   MismatchLine("all_reduce", "cpu:[0,1]", {0, 1}, {p, q});
//   // "all_reduce: rank 0 called all_reduce(float32, 4 elements), rank 1 called
//   //  all_reduce(float32, 1004 elements) (group cpu:[0,1]; every member must make the same call)"
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace oneflow {
namespace runtime {

enum class CallOp : uint8_t {
  kNone,
  kAllReduce,
  kBroadcast,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kBarrier,
  kSend,
  kRecv,
  kSetUp,  // a communicator's rendezvous (not compared: for call_watch.h)
};

// Operation, dtype, reduction, root and element count: what every member must agree on.
struct CallPrint {
  CallOp op = CallOp::kNone;
  uint8_t dtype = 0xff;  // a DType, 0xff: none (barrier)
  uint8_t reduce = 0;    // a ReduceOp (shm_group.h) for reductions
  uint8_t variant = 0;   // how the data moves where the members' paths must match (see kVariant*)
  int32_t root = -1;     // broadcast's root, send's / recv's peer (global ranks)
  int64_t count = -1;    // elements (per op: see Communicator), -1: not compared (all_to_all)

  static CallPrint Of(CallOp op, DType dtype, int64_t count, int reduce = 0, int root = -1,
                      int variant = 0);
  bool operator==(const CallPrint& o) const;
  bool operator!=(const CallPrint& o) const { return !(*this == o); }
  // "all_reduce(float32, 4 elements)", "broadcast(float32, 8 elements, root 0)", "barrier()".
  std::string Describe() const;
};
static_assert(sizeof(CallPrint) == 16, "CallPrint travels in 16 bytes");

// all_reduce variants (through shared memory the three take different paths).
constexpr uint8_t kVariantShared = 1;   // of an EmptyShared tensor, reduced in place
constexpr uint8_t kVariantScratch = 2;  // out of place (AllReduced)

// The one line naming each member's call (ranks: the group's global ranks, prints: by group
// rank); members with equal calls are named together ("ranks 0, 2 called ...").
std::string MismatchLine(const char* op, const std::string& group, const std::vector<int>& ranks,
                         const std::vector<CallPrint>& prints);

}  // namespace runtime
}  // namespace oneflow
