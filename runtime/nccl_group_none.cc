// NcclGroup in a build without CUDA: no group is ever created (there are no CUDA tensors to
// reduce), so the communicator's CUDA paths are unreachable here.
#include "runtime/nccl_group.h"

namespace oneflow {
namespace runtime {

namespace {
[[noreturn]] void NoCuda(const char* name) {
  throw Error(StrCat(name, ": this build has no CUDA support"));
}
}  // namespace

struct NcclGroup::State {};

std::unique_ptr<NcclGroup> NcclGroup::Create(ControlClient&, const std::string&, int, int, int,
                                             const Device&, double, std::string* why) {
  *why = "this build has no CUDA support";
  return nullptr;
}
NcclGroup::~NcclGroup() = default;
void NcclGroup::AllReduce(const Tensor&, const Tensor&, ReduceOp, const char* name) {
  NoCuda(name);
}
void NcclGroup::Broadcast(const Tensor&, int, const char* name) { NoCuda(name); }
void NcclGroup::AllGatherV(const Tensor&, const Tensor&, const std::vector<int64_t>&,
                           const char* name) {
  NoCuda(name);
}
void NcclGroup::ReduceScatterV(const Tensor&, const Tensor&, const std::vector<int64_t>&, ReduceOp,
                               const char* name) {
  NoCuda(name);
}
void NcclGroup::AllToAllV(const Tensor&, const Tensor&, const std::vector<int64_t>&,
                          const std::vector<int64_t>&, const char* name) {
  NoCuda(name);
}
void NcclGroup::Send(const Tensor&, int, const char* name) { NoCuda(name); }
void NcclGroup::Recv(const Tensor&, int, const char* name) { NoCuda(name); }

}  // namespace runtime
}  // namespace oneflow
