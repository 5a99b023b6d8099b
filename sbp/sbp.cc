#include "sbp/sbp.h"

#include <algorithm>
#include <functional>
#include <set>
#include <sstream>

#include "core/error.h"

namespace oneflow {
namespace sbp {

std::string Sbp::ToString() const {
  switch (kind_) {
    case Kind::kSplit:
      return StrCat("S(", axis_, ")");
    case Kind::kBroadcast:
      return "B";
    default:
      return "P";
  }
}

std::string ToString(const NdSbp& nd) {
  std::string s = "(";
  for (size_t i = 0; i < nd.size(); ++i) s += (i ? ", " : "") + nd[i].ToString();
  return s + ")";
}

Placement::Placement(DeviceType device, std::vector<int> ranks, std::vector<int64_t> hierarchy)
    : device_(device), ranks_(std::move(ranks)), hierarchy_(std::move(hierarchy)) {
  if (ranks_.empty()) throw Error("placement: needs at least one rank");
  if (hierarchy_.empty()) hierarchy_ = {static_cast<int64_t>(ranks_.size())};
  int64_t n = 1;
  for (int64_t h : hierarchy_) n *= h;
  if (n != static_cast<int64_t>(ranks_.size())) {
    throw Error(StrCat("placement: hierarchy ", Shape(hierarchy_), " holds ", n, " ranks, got ",
                       ranks_.size()));
  }
  std::set<int> seen;
  for (int r : ranks_) {
    if (r < 0) throw Error(StrCat("placement: rank ", r, " is negative"));
    if (!seen.insert(r).second) throw Error(StrCat("placement: rank ", r, " appears twice"));
  }
}

int Placement::IndexOf(int rank) const {
  auto it = std::find(ranks_.begin(), ranks_.end(), rank);
  return it == ranks_.end() ? -1 : static_cast<int>(it - ranks_.begin());
}

std::vector<int64_t> Placement::Coord(int rank) const {
  int64_t idx = IndexOf(rank);
  std::vector<int64_t> c(hierarchy_.size());
  for (int d = ndim() - 1; d >= 0; --d) {
    c[d] = idx % hierarchy_[d];
    idx /= hierarchy_[d];
  }
  return c;
}

int Placement::RankAt(const std::vector<int64_t>& coord) const {
  int64_t idx = 0;
  for (int d = 0; d < ndim(); ++d) idx = idx * hierarchy_[d] + coord[d];
  return ranks_[idx];
}

std::vector<int> Placement::SubGroup(int rank, int d) const {
  std::vector<int64_t> c = Coord(rank);
  std::vector<int> out;
  for (int64_t k = 0; k < hierarchy_[d]; ++k) {
    c[d] = k;
    out.push_back(RankAt(c));
  }
  return out;
}

std::string Placement::ToString() const {
  std::ostringstream os;
  os << (device_ == DeviceType::kCPU ? "cpu" : "cuda") << ":";
  if (ndim() == 1) {
    os << "[";
    for (size_t i = 0; i < ranks_.size(); ++i) os << (i ? ", " : "") << ranks_[i];
    os << "]";
    return os.str();
  }
  // Nested lists, row-major.
  std::vector<int64_t> c(hierarchy_.size(), 0);
  std::function<void(int, int64_t&)> rec = [&](int d, int64_t& idx) {
    os << "[";
    for (int64_t k = 0; k < hierarchy_[d]; ++k) {
      if (k) os << ", ";
      if (d + 1 == ndim()) {
        os << ranks_[idx++];
      } else {
        rec(d + 1, idx);
      }
    }
    os << "]";
  };
  int64_t idx = 0;
  rec(0, idx);
  return os.str();
}

std::pair<int64_t, int64_t> SplitRange(int64_t length, int64_t parts, int64_t k) {
  const int64_t base = length / parts, extra = length % parts;
  const int64_t begin = k * base + std::min(k, extra);
  return {begin, begin + base + (k < extra ? 1 : 0)};
}

std::vector<std::pair<int64_t, int64_t>> LocalRanges(const Shape& logical,
                                                     const std::vector<int64_t>& hierarchy,
                                                     const NdSbp& nd,
                                                     const std::vector<int64_t>& coord) {
  std::vector<std::pair<int64_t, int64_t>> r;
  for (int64_t i = 0; i < logical.ndim(); ++i) r.emplace_back(0, logical[i]);
  for (size_t d = 0; d < nd.size(); ++d) {
    if (!nd[d].is_split()) continue;
    auto& range = r[nd[d].axis()];
    auto sub = SplitRange(range.second - range.first, hierarchy[d], coord[d]);
    range = {range.first + sub.first, range.first + sub.second};
  }
  return r;
}

Shape LocalShape(const Shape& logical, const Placement& placement, const NdSbp& nd, int rank) {
  if (!placement.Contains(rank)) return Shape(std::vector<int64_t>(logical.ndim(), 0));
  auto ranges = LocalRanges(logical, placement.hierarchy(), nd, placement.Coord(rank));
  std::vector<int64_t> dims;
  for (auto& [b, e] : ranges) dims.push_back(e - b);
  return Shape(dims);
}

void CheckNdSbp(const NdSbp& nd, const Placement& placement, int64_t ndim, const char* op) {
  if (static_cast<int>(nd.size()) != placement.ndim()) {
    throw Error(StrCat(op, ": sbp ", ToString(nd), " has ", nd.size(), " entries but placement ",
                       placement.ToString(), " has ", placement.ndim(), " dimension",
                       placement.ndim() == 1 ? "" : "s"));
  }
  for (const Sbp& s : nd) {
    if (s.is_split() && (s.axis() < 0 || s.axis() >= ndim)) {
      throw Error(StrCat(op, ": split axis ", s.axis(), " is out of range for a tensor with ", ndim,
                         " dim", ndim == 1 ? "" : "s"));
    }
  }
}

}  // namespace sbp
}  // namespace oneflow
