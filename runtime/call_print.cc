#include "runtime/call_print.h"

#include <cstring>

#include "core/error.h"

namespace oneflow {
namespace runtime {

namespace {

const char* OpName(CallOp op) {
  switch (op) {
    case CallOp::kAllReduce:
      return "all_reduce";
    case CallOp::kBroadcast:
      return "broadcast";
    case CallOp::kAllGather:
      return "all_gather";
    case CallOp::kReduceScatter:
      return "reduce_scatter";
    case CallOp::kAllToAll:
      return "all_to_all";
    case CallOp::kBarrier:
      return "barrier";
    case CallOp::kSend:
      return "send";
    case CallOp::kRecv:
      return "recv";
    default:
      return "nothing";
  }
}

// ReduceOp's order (shm_group.h): kSum, kMax, kMin, kAvg.
const char* ReduceName(uint8_t r) {
  static const char* const kNames[] = {"sum", "max", "min", "avg"};
  return r < 4 ? kNames[r] : "?";
}

}  // namespace

CallPrint CallPrint::Of(CallOp op, DType dtype, int64_t count, int reduce, int root, int variant) {
  CallPrint p;
  p.op = op;
  p.dtype = static_cast<uint8_t>(dtype);
  p.reduce = static_cast<uint8_t>(reduce);
  p.variant = static_cast<uint8_t>(variant);
  p.root = root;
  p.count = count;
  return p;
}

bool CallPrint::operator==(const CallPrint& o) const {
  return std::memcmp(this, &o, sizeof(CallPrint)) == 0;
}

std::string CallPrint::Describe() const {
  if (op == CallOp::kSetUp) return "the set-up of its communicator";
  std::string s = StrCat(OpName(op), "(");
  if (dtype < kNumDTypes) s += DTypeName(static_cast<DType>(dtype));
  if (count >= 0) s += StrCat(", ", count, count == 1 ? " element" : " elements");
  if (op == CallOp::kAllReduce || op == CallOp::kReduceScatter) {
    if (reduce != 0) s += StrCat(", ", ReduceName(reduce));
    if (variant == kVariantShared) s += ", in shared memory";
    if (variant == kVariantScratch) s += ", out of place";
  }
  if (op == CallOp::kBroadcast) s += StrCat(", root ", root);
  if (op == CallOp::kSend) s += StrCat(", to rank ", root);
  if (op == CallOp::kRecv) s += StrCat(", from rank ", root);
  return s + ")";
}

std::string MismatchLine(const char* op, const std::string& group, const std::vector<int>& ranks,
                         const std::vector<CallPrint>& prints) {
  std::string line = StrCat(op, ": ");
  std::vector<bool> done(prints.size(), false);
  bool first = true;
  for (size_t i = 0; i < prints.size(); ++i) {
    if (done[i]) continue;
    std::vector<int> same;
    for (size_t j = i; j < prints.size(); ++j) {
      if (!done[j] && prints[j] == prints[i]) {
        done[j] = true;
        same.push_back(j < ranks.size() ? ranks[j] : static_cast<int>(j));
      }
    }
    std::string who = same.size() > 1 ? "ranks " : "rank ";
    for (size_t k = 0; k < same.size(); ++k) who += StrCat(k ? ", " : "", same[k]);
    line += StrCat(first ? "" : ", ", who, " called ", prints[i].Describe());
    first = false;
  }
  return StrCat(line, " (group ", group, "; every member must make the same call)");
}

}  // namespace runtime
}  // namespace oneflow
