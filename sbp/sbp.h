// Distribution vocabulary, pure values (no I/O): Sbp, NdSbp, Placement, and which slice of a
// logical tensor each rank holds.
//
//   Placement p(DeviceType::kCPU, {0, 1, 2, 3}, {2, 2});   // a 2x2 mesh
//   NdSbp s = {Sbp::Split(0), Sbp::Broadcast()};
//   Shape local = LocalShape(Shape({5, 3}), p, s, /*rank=*/2);   // [2, 3]
//
// Slicing: along a split axis of length L over n parts, part k has L / n + (k < L % n) elements,
// in rank order. On an n-D placement the hierarchy dimensions split in order: dimension d splits
// what dimensions < d left (nested), so (S(0), S(0)) on 2x2 gives four consecutive quarters.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/shape.h"

namespace oneflow {
namespace sbp {

class Sbp {
 public:
  enum class Kind : int8_t { kSplit, kBroadcast, kPartialSum };

  static Sbp Split(int axis) { return Sbp(Kind::kSplit, axis); }
  static Sbp Broadcast() { return Sbp(Kind::kBroadcast, -1); }
  static Sbp PartialSum() { return Sbp(Kind::kPartialSum, -1); }

  Kind kind() const { return kind_; }
  bool is_split() const { return kind_ == Kind::kSplit; }
  bool is_broadcast() const { return kind_ == Kind::kBroadcast; }
  bool is_partial() const { return kind_ == Kind::kPartialSum; }
  int axis() const { return axis_; }  // -1 unless split
  std::string ToString() const;       // "S(0)", "B", "P"

  bool operator==(const Sbp& o) const { return kind_ == o.kind_ && axis_ == o.axis_; }
  bool operator!=(const Sbp& o) const { return !(*this == o); }
  bool operator<(const Sbp& o) const {
    return kind_ != o.kind_ ? kind_ < o.kind_ : axis_ < o.axis_;
  }
  size_t Hash() const { return static_cast<size_t>(kind_) * 131 + static_cast<size_t>(axis_ + 1); }

 private:
  Sbp(Kind kind, int axis) : kind_(kind), axis_(axis) {}
  Kind kind_;
  int axis_;
};

using NdSbp = std::vector<Sbp>;
std::string ToString(const NdSbp& nd);  // "(S(0), B)"

class Placement {
 public:
  Placement() = default;
  // ranks in row-major order of hierarchy; an empty hierarchy means 1-D {ranks.size()}.
  // Throws oneflow::Error for a repeated or negative rank or a hierarchy that does not match.
  Placement(DeviceType device, std::vector<int> ranks, std::vector<int64_t> hierarchy = {});

  DeviceType device() const { return device_; }
  const std::vector<int>& ranks() const { return ranks_; }
  const std::vector<int64_t>& hierarchy() const { return hierarchy_; }
  int ndim() const { return static_cast<int>(hierarchy_.size()); }
  int size() const { return static_cast<int>(ranks_.size()); }
  bool Contains(int rank) const { return IndexOf(rank) >= 0; }
  int IndexOf(int rank) const;                 // -1 when absent
  std::vector<int64_t> Coord(int rank) const;  // REQUIRES: Contains(rank)
  int RankAt(const std::vector<int64_t>& coord) const;
  // The ranks that share every coordinate of `rank` but dimension d, in order along d.
  std::vector<int> SubGroup(int rank, int d) const;
  std::string ToString() const;  // "cpu:[0, 1]" or "cpu:[[0, 1], [2, 3]]"

  bool operator==(const Placement& o) const {
    return device_ == o.device_ && ranks_ == o.ranks_ && hierarchy_ == o.hierarchy_;
  }
  bool operator!=(const Placement& o) const { return !(*this == o); }

 private:
  DeviceType device_ = DeviceType::kCPU;
  std::vector<int> ranks_;
  std::vector<int64_t> hierarchy_;
};

// [begin, end) of part k of a length split into n parts.
std::pair<int64_t, int64_t> SplitRange(int64_t length, int64_t parts, int64_t k);

// Per logical axis, the [begin, end) this coordinate holds under nd.
std::vector<std::pair<int64_t, int64_t>> LocalRanges(const Shape& logical,
                                                     const std::vector<int64_t>& hierarchy,
                                                     const NdSbp& nd,
                                                     const std::vector<int64_t>& coord);
// The local shard's shape on `rank` (an empty shape of zeros for a rank outside placement).
Shape LocalShape(const Shape& logical, const Placement& placement, const NdSbp& nd, int rank);

// Throws a one-line oneflow::Error when nd does not fit the placement (count of entries) or a
// split axis is outside the tensor's dims; `op` names the caller.
void CheckNdSbp(const NdSbp& nd, const Placement& placement, int64_t ndim, const char* op);

}  // namespace sbp
}  // namespace oneflow
