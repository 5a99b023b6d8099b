#include "boxing/plan.h"

#include <algorithm>

#include "core/error.h"

namespace oneflow {
namespace boxing {
namespace {

using Kind = Step::Kind;

bool SplitsAxis(const Sbp& s, int axis) { return s.is_split() && s.axis() == axis; }

// Changing dimension d is safe when no inner dimension (already in its final state) splits an
// axis this change touches.
bool Safe(const NdSbp& state, int d, const Sbp& from, const Sbp& to) {
  for (size_t e = d + 1; e < state.size(); ++e) {
    if ((from.is_split() && SplitsAxis(state[e], from.axis())) ||
        (to.is_split() && SplitsAxis(state[e], to.axis()))) {
      return false;
    }
  }
  return true;
}

void Add(Plan& p, NdSbp& state, int d, const Sbp& to, double bytes, const Placement& pl,
         bool on_dst) {
  if (state[d] == to) return;
  Step s;
  const sbp::BoxingStep& kind = sbp::StepFor(state[d], to);
  s.kind = kind.kind;
  s.dim = d;
  s.from = state[d];
  s.to = to;
  s.before = state;
  state[d] = to;
  s.after = state;
  s.on_destination = on_dst;
  s.cost = kind.cost(bytes, pl.hierarchy()[d]);
  p.cost += s.cost;
  p.steps.push_back(std::move(s));
}

using Region = std::vector<std::pair<int64_t, int64_t>>;

// a and b overlapped; empty when they do not meet.
Region Intersect(Region a, const Region& b) {
  for (size_t k = 0; k < a.size(); ++k) {
    a[k].first = std::max(a[k].first, b[k].first);
    a[k].second = std::min(a[k].second, b[k].second);
    if (a[k].second <= a[k].first) return Region();
  }
  return a;
}

// Appends the transfer of `region` from s to d unless it holds nothing (an empty region of a
// tensor with axes: no overlap).
void AddTransfer(std::vector<Transfer>& out, int s, int d, Region region, const Shape& logical) {
  if (region.empty() && logical.ndim() > 0) return;
  Transfer t;
  t.src = s, t.dst = d, t.region = std::move(region);
  if (t.numel() > 0) out.push_back(std::move(t));
}

// One order on every rank: by (src, dst), which also makes blocking send/recv deadlock-free.
void SortTransfers(std::vector<Transfer>& out) {
  std::stable_sort(out.begin(), out.end(), [](const Transfer& a, const Transfer& b) {
    return std::make_pair(a.src, a.dst) < std::make_pair(b.src, b.dst);
  });
}

}  // namespace

int64_t Transfer::numel() const {
  int64_t n = 1;
  for (auto [b, e] : region) n *= e - b;
  return n;
}

Region RankRegion(const Placement& pl, NdSbp nd, const Shape& logical, int rank) {
  for (Sbp& x : nd) {
    if (x.is_partial()) x = Sbp::Broadcast();
  }
  return sbp::LocalRanges(logical, pl.hierarchy(), nd, pl.Coord(rank));
}

std::vector<Transfer> Route(const Placement& src, const Sbp& from, const Placement& dst,
                            const Sbp& to, const Shape& logical) {
  const int m = src.size(), n = dst.size();
  auto ranges = [&](const Placement& pl, const Sbp& s, int i) {
    return RankRegion(pl, NdSbp{s}, logical, pl.ranks()[i]);
  };
  Region whole;
  for (int64_t a = 0; a < logical.ndim(); ++a) whole.emplace_back(0, logical[a]);
  std::vector<Transfer> out;
  if (!to.is_partial()) {
    for (int j = 0; j < n; ++j) {
      const int d = dst.ranks()[j];
      auto need = ranges(dst, to, j);
      if (from.is_broadcast()) {
        AddTransfer(out, src.Contains(d) ? d : src.ranks()[j % m], d, need, logical);
      } else {
        for (int i = 0; i < m; ++i) {
          AddTransfer(out, src.ranks()[i], d, Intersect(ranges(src, from, i), need), logical);
        }
      }
    }
  } else if (from.is_broadcast()) {
    int s = src.ranks()[0], d = dst.ranks()[0];
    for (int r : src.ranks()) {
      if (dst.Contains(r)) {
        s = d = r;
        break;
      }
    }
    AddTransfer(out, s, d, whole, logical);
  } else {
    for (int i = 0; i < m; ++i) {
      const int s = src.ranks()[i];
      AddTransfer(out, s, dst.Contains(s) ? s : dst.ranks()[i % n], ranges(src, from, i), logical);
    }
  }
  SortTransfers(out);
  return out;
}

std::vector<Transfer> Route(const Placement& src, const NdSbp& from, const Placement& dst,
                            const NdSbp& to, const Shape& logical) {
  if (src.ndim() == 1 && dst.ndim() == 1) return Route(src, from[0], dst, to[0], logical);
  // The distinct pieces of the source and the ranks holding each (broadcast dimensions repeat
  // a piece on every rank along them).
  std::vector<std::pair<Region, std::vector<int>>> pieces;
  for (int r : src.ranks()) {
    Region g = RankRegion(src, from, logical, r);
    auto it =
        std::find_if(pieces.begin(), pieces.end(), [&](const auto& p) { return p.first == g; });
    if (it == pieces.end()) {
      pieces.push_back({std::move(g), {r}});
    } else {
      it->second.push_back(r);
    }
  }
  std::vector<Transfer> out;
  for (size_t j = 0; j < dst.ranks().size(); ++j) {
    const int d = dst.ranks()[j];
    const Region need = RankRegion(dst, to, logical, d);
    for (const auto& [have, holders] : pieces) {
      const bool holds = std::find(holders.begin(), holders.end(), d) != holders.end();
      AddTransfer(out, holds ? d : holders[j % holders.size()], d, Intersect(have, need), logical);
    }
  }
  SortTransfers(out);
  return out;
}

std::string Step::ToString(const Placement& placement) const {
  if (kind == Kind::kRoute) {
    const std::string change = before.size() == 1 && after.size() == 1
                                   ? StrCat(from.ToString(), "->", to.ToString())
                                   : StrCat(sbp::ToString(before), "->", sbp::ToString(after));
    return StrCat(change, ": ", sbp::Step(kind).name, " to the ranks of ", placement.ToString(),
                  " (", static_cast<int64_t>(cost), " bytes)");
  }
  std::string where = placement.ToString();
  if (placement.ndim() > 1) where += StrCat(" (hierarchy dim ", dim, ")");
  return StrCat(from.ToString(), "->", to.ToString(), ": ", sbp::Step(kind).name, " over ", where);
}

std::string Plan::ToString() const {
  if (steps.empty()) return "(nothing to do)";
  std::string s;
  for (size_t i = 0; i < steps.size(); ++i) {
    s += (i ? "\n" : "") + steps[i].ToString(steps[i].on_destination ? dst : src);
  }
  return s;
}

Plan PlanBoxing(const Placement& src, const NdSbp& from, const Placement& dst, const NdSbp& to,
                const Shape& logical, DType dtype) {
  sbp::CheckNdSbp(from, src, logical.ndim(), "boxing");
  sbp::CheckNdSbp(to, dst, logical.ndim(), "boxing");
  Plan p{src, dst, from, to, {}, 0};
  const double bytes = static_cast<double>(logical.numel()) * SizeOf(dtype);
  const int n_src = src.ndim(), n_dst = dst.ndim();
  if (src == dst) {
    // Direct, innermost dimension first, when every change is safe.
    NdSbp state = from;
    bool safe = true;
    for (int d = n_src - 1; d >= 0 && safe; --d) {
      if (state[d] != to[d] && !Safe(state, d, state[d], to[d])) safe = false;
      state[d] = to[d];
    }
    if (safe) {
      state = from;
      for (int d = n_src - 1; d >= 0; --d) Add(p, state, d, to[d], bytes, src, false);
      return p;
    }
    // Otherwise, as between placements below: each rank gets the pieces it lacks point to
    // point (gathering to B and slicing back would hold the whole tensor on every rank).
  } else if (src.device() != dst.device()) {
    throw Error(StrCat("boxing: moving between ", src.ToString(), " and ", dst.ToString(),
                       " needs the CUDA build"));
  }
  if (n_src == 1 && n_dst == 1) {
    Step r;
    r.kind = Kind::kRoute;
    r.from = from[0], r.to = to[0];
    r.before = from, r.after = to;
    r.on_destination = true;
    for (const Transfer& t : Route(src, from[0], dst, to[0], logical)) {
      if (t.src != t.dst) r.cost += static_cast<double>(t.numel()) * SizeOf(dtype);
    }
    p.cost = r.cost;
    p.steps.push_back(std::move(r));
    return p;
  }
  // An N-D placement on either side: reduce the source's partial dimensions, move only the
  // pieces each destination needs point to point, then make the destination's partial
  // dimensions locally (the first rank along each keeps the value, the others zeros).
  NdSbp state = from;
  for (int d = n_src - 1; d >= 0; --d) {
    if (state[d].is_partial()) Add(p, state, d, Sbp::Broadcast(), bytes, src, false);
  }
  NdSbp whole_to = to;
  for (Sbp& s : whole_to) {
    if (s.is_partial()) s = Sbp::Broadcast();
  }
  Step r;
  r.kind = Kind::kRoute;
  r.before = state, r.after = whole_to;
  r.on_destination = true;
  for (const Transfer& t : Route(src, state, dst, whole_to, logical)) {
    if (t.src != t.dst) r.cost += static_cast<double>(t.numel()) * SizeOf(dtype);
  }
  p.cost += r.cost;
  p.steps.push_back(std::move(r));
  for (int d = 0; d < n_dst; ++d) Add(p, whole_to, d, to[d], bytes, dst, true);
  return p;
}

}  // namespace boxing
}  // namespace oneflow
