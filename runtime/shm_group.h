// Collectives between the ranks of one machine through a shared-memory segment, without TCP.
//
// Group rank 0 creates a POSIX shared-memory segment, publishes its name through the control
// plane, and unlinks it once every member has mapped it (so a killed job leaves nothing in
// /dev/shm). The segment holds one flag per rank (its own cache line), one staging slot per
// rank and one result slot. Data moves in chunks that stay in cache: for an all-reduce each
// rank copies a chunk of its input into its slot, all meet at a barrier, rank i reduces the
// i-th part of the chunk from every slot into the result slot, all meet again, and every rank
// copies the result out. A barrier is a per-rank sequence number and a spin (then yield) on
// the others', bounded by the timeout:
//   all_reduce: rank 1 timed out after 5 s in group cpu:[0,1] (is another rank dead or stuck?)
// The first meeting of every call also compares the members' calls (Expect: a CallPrint beside
// each rank's flag, on its own cache line already read), so members that disagree (another
// operation, count, dtype, root) all refuse at that meeting, before any data moves:
//   all_reduce: rank 0 called all_reduce(float32, 4 elements), rank 1 called
//   all_reduce(float32, 1004 elements) (group cpu:[0,1]; every member must make the same call)
//
// Not thread-safe: the Communicator serializes calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "runtime/call_print.h"
#include "runtime/control_plane.h"

namespace oneflow {
namespace runtime {

enum class ReduceOp { kSum, kMax, kMin, kAvg };

// Calls f(TypeTag<T>{}) for the dtypes the CPU collectives move and reduce (float32, float64,
// int32, int64, int8, uint8); others throw "<op>: dtype D is not supported by the CPU
// communicator".
template <typename F>
void DispatchCommDType(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::kFloat32:
      return f(TypeTag<float>{});
    case DType::kFloat64:
      return f(TypeTag<double>{});
    case DType::kInt32:
      return f(TypeTag<int32_t>{});
    case DType::kInt64:
      return f(TypeTag<int64_t>{});
    case DType::kInt8:
      return f(TypeTag<int8_t>{});
    case DType::kUInt8:
      return f(TypeTag<uint8_t>{});
    default:
      throw Error(
          StrCat(op, ": dtype ", DTypeName(dtype), " is not supported by the CPU communicator"));
  }
}

// One POSIX shared-memory segment mapped by every member of a group. Group rank 0 creates it and
// publishes its name under `key` through the control plane; it is unlinked once every member
// has mapped it (so a killed job leaves nothing in /dev/shm) and unmapped with the last owner.
class ShmSegment {
 public:
  // Collective: every member calls it with the same key and bytes.
  static std::shared_ptr<ShmSegment> Map(ControlClient& client, const std::string& key,
                                         size_t bytes, int my_rank, int group_rank, int size,
                                         double timeout_s, const std::string& desc);
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  uint8_t* data() const { return base_; }
  size_t bytes() const { return bytes_; }

 private:
  ShmSegment(uint8_t* base, size_t bytes) : base_(base), bytes_(bytes) {}
  uint8_t* base_;
  size_t bytes_;
};

// Memory every member reaches: one region of region_bytes per group rank, region r at
// data() + r * region_bytes (r's own, which the others read and write during collectives).
struct SharedRegions {
  std::shared_ptr<ShmSegment> segment;
  size_t region_bytes = 0;
  uint8_t* Region(int group_rank) const {
    return segment->data() + static_cast<size_t>(group_rank) * region_bytes;
  }
};

class ShmGroup {
 public:
  // Every member calls this with the same key (unique per group in the job). my_rank is the
  // global rank (for messages), group_rank the position in the group, ranks the group's global
  // ranks (for messages; empty: group ranks).
  ShmGroup(ControlClient& client, const std::string& key, int my_rank, int group_rank, int size,
           double timeout_s, std::string desc, std::vector<int> ranks = {});
  ~ShmGroup();
  ShmGroup(const ShmGroup&) = delete;
  ShmGroup& operator=(const ShmGroup&) = delete;

  // out[i] = reduce over ranks of in[i] for i in [keep_begin, keep_end), written at
  // out[i - keep_begin]; in may equal out (in place, keep = everything).
  void Reduce(const void* in, void* out, int64_t count, DType dtype, ReduceOp op,
              int64_t keep_begin, int64_t keep_end, const char* opname);
  // The root's bytes (a group rank) overwrite everyone's.
  void Broadcast(void* data, size_t bytes, int root, const char* opname);
  // out = concatenation of every rank's in; bytes[i] is rank i's size.
  void AllGather(const void* in, void* out, const std::vector<size_t>& bytes, const char* opname);
  void Barrier(const char* opname);
  // What a timeout's message adds (the Communicator's report of what every member is doing).
  void set_timeout_report(std::function<std::string()> report) { report_ = std::move(report); }
  // The next call (Reduce, Broadcast, AllGather, Barrier, ReduceRegions) is the call `print`
  // describes: its first meeting compares it with every member's (a call that moves nothing
  // still meets once for it); a member whose call differs, or who is in the middle of another
  // call, makes every member throw the one line naming each member's call.
  void Expect(const CallPrint& print);

  // Collective: regions of at least bytes_per_rank for every member (key unique in the job).
  SharedRegions MapRegions(ControlClient& client, const std::string& key, size_t bytes_per_rank);
  // The element range [first, second) of a `count`-element reduction that this rank reduces.
  std::pair<int64_t, int64_t> PartOf(int64_t count) const;
  // This rank's data where it is not in its region: `count` elements at `data` stand for the
  // elements [offset, offset + count) of the reduction (they must lie inside PartOf).
  struct LocalPiece {
    int64_t offset;
    int64_t count;
    const void* data;
  };
  // Reduces `count` elements at byte_offset of every member's region in place: afterwards every
  // region holds the reduction there. Rank i reduces the i-th part (PartOf), reading every
  // region (this rank's own data from `local` where given) and writing the result into all: no
  // staging copies, two meetings. With `out` (count elements), this rank's part of the result
  // goes there instead of into its own region (the other parts still arrive in the region).
  void ReduceRegions(const SharedRegions& regions, size_t byte_offset, int64_t count, DType dtype,
                     ReduceOp op, const char* opname, const std::vector<LocalPiece>& local = {},
                     void* out = nullptr);

 private:
  void Meet(const char* opname);
  // After a meeting: every member is at the first meeting of the same call (expecting) or none
  // is at the first meeting of any (not expecting); else throws the mismatch line.
  void CheckCalls(const char* opname, bool expecting);
  void MeetIfExpected(const char* opname) {
    if (expecting_) Meet(opname);
  }
  uint8_t* Slot(int r) const;
  uint8_t* Result() const;

  int my_rank_, group_rank_, size_;
  double timeout_s_;
  std::function<std::string()> report_;
  std::string desc_;
  size_t chunk_bytes_;
  std::shared_ptr<ShmSegment> segment_;
  uint8_t* base_ = nullptr;
  uint64_t seq_ = 0;
  std::vector<int> ranks_;
  CallPrint print_;         // this rank's current call
  bool expecting_ = false;  // its first meeting is still to come
};

// True when every listed host id equals the first (the group lives on one machine).
bool SameHost(const std::vector<std::string>& host_ids);
// This machine's identity: hostname and kernel boot id.
std::string HostId();

}  // namespace runtime
}  // namespace oneflow
