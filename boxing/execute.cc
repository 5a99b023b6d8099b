#include "boxing/execute.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "core/error.h"
#include "core/functional.h"
#include "core/profiler.h"
#include "runtime/env.h"

namespace oneflow {
namespace boxing {
namespace {

using Kind = Step::Kind;

bool DebugBoxing() {
  static const bool on = [] {
    const char* v = std::getenv("ONEFLOW_DEBUG_BOXING");
    return v && *v && std::string(v) != "0";
  }();
  return on;
}

// Per member of rank's sub-group along d: its [begin, end) ranges under `state`.
std::vector<std::vector<std::pair<int64_t, int64_t>>> MemberRanges(const Placement& pl,
                                                                   const NdSbp& state,
                                                                   const Shape& logical, int rank,
                                                                   int d) {
  std::vector<int64_t> coord = pl.Coord(rank);
  std::vector<std::vector<std::pair<int64_t, int64_t>>> out;
  for (int64_t k = 0; k < pl.hierarchy()[d]; ++k) {
    coord[d] = k;
    out.push_back(sbp::LocalRanges(logical, pl.hierarchy(), state, coord));
  }
  return out;
}

// x with axis moved to the front, contiguous; and back. Axis 0 of a contiguous x is x itself:
// no copy of a (possibly whole-sized, under P) shard.
Tensor AxisFirst(const Tensor& x, int axis) {
  if (axis == 0 && x.is_contiguous()) return x;
  std::vector<int64_t> perm{axis};
  for (int64_t i = 0; i < x.ndim(); ++i) {
    if (i != axis) perm.push_back(i);
  }
  return fn::contiguous_copy(fn::permute(x, perm));
}
Tensor AxisBack(const Tensor& x, int axis) {
  if (axis == 0) return x;  // x is the collective's fresh, contiguous output
  std::vector<int64_t> perm;
  for (int64_t i = 1; i <= axis; ++i) perm.push_back(i);
  perm.push_back(0);
  for (int64_t i = axis + 1; i < x.ndim(); ++i) perm.push_back(i);
  return fn::contiguous_copy(fn::permute(x, perm));
}

Tensor Zeros(const std::vector<int64_t>& dims, const Tensor& like) {
  Tensor z = fn::empty(Shape(dims), like.dtype(), like.device());
  fn::fill_(z, 0.0);
  return z;
}

// One step of one hierarchy dimension on this rank: where the members of its sub-group stand
// before and after, and their communicator for the collective kinds.
struct DimStep {
  const Step& s;
  int me;  // this rank's coordinate along s.dim
  std::vector<std::vector<std::pair<int64_t, int64_t>>> before, after;
  runtime::Communicator* comm;
};

Tensor AllReduce(const DimStep& d, const Tensor& x) { return d.comm->AllReduced(x); }

// Each member's length along axis a.
std::vector<int64_t> Lengths(const std::vector<std::vector<std::pair<int64_t, int64_t>>>& members,
                             int a) {
  std::vector<int64_t> out;
  for (auto& r : members) out.push_back(r[a].second - r[a].first);
  return out;
}

// A collective along axis a of x: `run(x with a first, out)` fills out, of `length` along a.
template <typename F>
Tensor AlongAxis(const Tensor& x, int a, int64_t length, F&& run) {
  Tensor xt = AxisFirst(x, a);
  std::vector<int64_t> dims = xt.shape().dims();
  dims[0] = length;
  Tensor out = fn::empty(Shape(dims), x.dtype(), x.device());
  run(xt, out);
  return AxisBack(out, a);
}

Tensor AllGather(const DimStep& d, const Tensor& x) {
  const std::vector<int64_t> counts = Lengths(d.before, d.s.from.axis());
  return AlongAxis(x, d.s.from.axis(), std::accumulate(counts.begin(), counts.end(), int64_t{0}),
                   [&](const Tensor& in, Tensor& out) { d.comm->AllGatherV(in, out, counts); });
}

Tensor ReduceScatter(const DimStep& d, const Tensor& x) {
  const std::vector<int64_t> counts = Lengths(d.after, d.s.to.axis());
  return AlongAxis(x, d.s.to.axis(), counts[d.me],
                   [&](const Tensor& in, Tensor& out) { d.comm->ReduceScatterV(in, out, counts); });
}

// Two buffers of this rank's shard size at most: the send buffer (x itself when the pieces are
// its rows) and the receive buffer (the result itself when the pieces stack along axis 0).
Tensor AllToAll(const DimStep& d, const Tensor& x) {
  const int i = d.s.from.axis(), j = d.s.to.axis();
  const int64_t j0 = d.before[d.me][j].first;  // where my current piece starts along j
  const bool rows = j == 0 && x.is_contiguous();
  Tensor in =
      rows ? fn::reshape(x, {x.numel()}) : fn::empty(Shape({x.numel()}), x.dtype(), x.device());
  std::vector<int64_t> in_counts, out_counts;
  int64_t at = 0;
  for (size_t m = 0; m < d.after.size(); ++m) {
    Tensor piece = fn::slice(x, j, d.after[m][j].first - j0, d.after[m][j].second - j0);
    const int64_t n = piece.numel();
    if (!rows && n > 0)
      fn::copy_(fn::reshape(fn::slice(in, 0, at, at + n), piece.shape().dims()), piece);
    in_counts.push_back(n);
    at += n;
  }
  std::vector<std::vector<int64_t>> recv_dims;
  for (size_t k = 0; k < d.before.size(); ++k) {
    std::vector<int64_t> dims = x.shape().dims();
    dims[i] = d.before[k][i].second - d.before[k][i].first;
    dims[j] = d.after[d.me][j].second - d.after[d.me][j].first;
    int64_t n = 1;
    for (int64_t v : dims) n *= v;
    out_counts.push_back(n);
    recv_dims.push_back(dims);
  }
  Tensor out = fn::empty(Shape({std::accumulate(out_counts.begin(), out_counts.end(), int64_t{0})}),
                         x.dtype(), x.device());
  d.comm->AllToAllV(in, out, in_counts, out_counts);
  std::vector<int64_t> result = x.shape().dims();
  result[i] = 0;
  for (const auto& r : d.before) result[i] += r[i].second - r[i].first;
  result[j] = d.after[d.me][j].second - d.after[d.me][j].first;
  if (i == 0) return fn::reshape(out, result);  // the received pieces stack along axis 0
  std::vector<Tensor> parts;
  int64_t off = 0;
  for (size_t k = 0; k < recv_dims.size(); ++k) {
    parts.push_back(fn::reshape(fn::slice(out, 0, off, off + out_counts[k]), recv_dims[k]));
    off += out_counts[k];
  }
  return fn::contiguous_copy(fn::cat(parts, i));
}

Tensor Slice(const DimStep& d, const Tensor& x) {
  const int a = d.s.to.axis();
  const int64_t a0 = d.before[d.me][a].first;
  return fn::contiguous_copy(
      fn::slice(x, a, d.after[d.me][a].first - a0, d.after[d.me][a].second - a0));
}

Tensor KeepOnFirst(const DimStep& d, const Tensor& x) {
  return d.me == 0 ? x : Zeros(x.shape().dims(), x);
}

Tensor ZeroPad(const DimStep& d, const Tensor& x) {
  const int a = d.s.from.axis();
  std::vector<int64_t> dims = x.shape().dims();
  dims[a] = d.after[d.me][a].second - d.after[d.me][a].first;
  Tensor z = Zeros(dims, x);
  const int64_t start = d.before[d.me][a].first - d.after[d.me][a].first;
  fn::copy_(fn::slice(z, a, start, start + x.size(a)), x);
  return z;
}

// The kRoute step, run by the ranks of either placement: each walks the transfers in the one
// order Route gives, sending what it holds and adding what it receives into zeros of its new
// local shape. Only a 1-D route has partial layouts (before or after).
Tensor RunRoute(const Plan& plan, const Step& s, const Tensor& x, const Shape& logical, int rank) {
  const bool in_src = plan.src.Contains(rank), in_dst = plan.dst.Contains(rank);
  if (!in_src && !in_dst) return x;
  std::vector<Transfer> transfers = Route(plan.src, s.before, plan.dst, s.after, logical);
  // Where my source piece and my destination piece lie in the logical tensor (a 1-D partial
  // piece is the whole).
  std::vector<std::pair<int64_t, int64_t>> mine_src, mine_dst;
  if (in_src) mine_src = RankRegion(plan.src, s.before, logical, rank);
  Tensor out;
  if (in_dst) {
    mine_dst = RankRegion(plan.dst, s.after, logical, rank);
    std::vector<int64_t> dims;
    for (auto [b, e] : mine_dst) dims.push_back(e - b);
    out = Zeros(dims, x);
  }
  auto cut = [](Tensor t, const std::vector<std::pair<int64_t, int64_t>>& region,
                const std::vector<std::pair<int64_t, int64_t>>& origin) {
    for (size_t a = 0; a < region.size(); ++a) {
      const int64_t b = region[a].first - origin[a].first, e = region[a].second - origin[a].first;
      if (b != 0 || e != t.size(static_cast<int64_t>(a))) t = fn::slice(t, a, b, e);
    }
    return t;
  };
  std::vector<int> members = plan.src.ranks();
  for (int r : plan.dst.ranks()) {
    if (!plan.src.Contains(r)) members.push_back(r);
  }
  std::sort(members.begin(), members.end());
  runtime::Communicator* comm = nullptr;
  bool needs_comm = false;
  for (const Transfer& t : transfers) needs_comm |= t.src != t.dst;
  if (needs_comm && members.size() > 1) {
    comm = &runtime::Env::Get().Comm(members, plan.src.device());
    // Only some pairs of the group exchange pieces: every member settles the group's CUDA path
    // first, so the first transfer does not wait for members that have nothing to move.
    comm->PrepareCuda(x.device());
  }
  for (const Transfer& t : transfers) {
    if (t.src != rank && t.dst != rank) continue;
    if (t.src == rank && t.dst == rank) {
      Tensor dst = cut(out, t.region, mine_dst);
      fn::copy_(dst, fn::add(dst, cut(x, t.region, mine_src)));
    } else if (t.src == rank) {
      comm->Send(fn::contiguous_copy(cut(x, t.region, mine_src)), t.dst, 0x52);
    } else {
      std::vector<int64_t> dims;
      for (auto [b, e] : t.region) dims.push_back(e - b);
      Tensor buf = fn::empty(Shape(dims), x.dtype(), x.device());
      comm->Recv(buf, t.src, 0x52);
      Tensor dst = cut(out, t.region, mine_dst);
      fn::copy_(dst, fn::add(dst, buf));
    }
  }
  return in_dst ? out : x;
}

// A step of one hierarchy dimension, run by the ranks of its placement.
template <Tensor (*F)(const DimStep&, const Tensor&)>
Tensor OnDim(const Plan& plan, const Step& s, const Tensor& x, const Shape& logical, int rank) {
  const Placement& pl = s.on_destination ? plan.dst : plan.src;
  if (!pl.Contains(rank)) return x;
  runtime::Communicator* comm = nullptr;
  if (sbp::Step(s.kind).collective)
    comm = &runtime::Env::Get().Comm(pl.SubGroup(rank, s.dim), pl.device());
  const DimStep d{s, static_cast<int>(pl.Coord(rank)[s.dim]),
                  MemberRanges(pl, s.before, logical, rank, s.dim),
                  MemberRanges(pl, s.after, logical, rank, s.dim), comm};
  return F(d, x);
}

// How each kind of sbp/boxing_steps.h runs, indexed by kind.
using RunFn = Tensor (*)(const Plan&, const Step&, const Tensor&, const Shape&, int);
constexpr RunFn kRun[] = {
    OnDim<AllReduce>, OnDim<AllGather>,   OnDim<ReduceScatter>, OnDim<AllToAll>,
    OnDim<Slice>,     OnDim<KeepOnFirst>, OnDim<ZeroPad>,       RunRoute,
};
static_assert(sizeof(kRun) / sizeof(kRun[0]) == static_cast<size_t>(Kind::kCount),
              "one run function per boxing step kind");

}  // namespace

Tensor ExecuteBoxing(const Plan& plan, const Tensor& local, const Shape& logical, int my_rank) {
  if (DebugBoxing() && !plan.steps.empty() && my_rank == plan.src.ranks()[0]) {
    std::fprintf(stderr, "[boxing] %s -> %s of %s:\n%s\n", sbp::ToString(plan.from).c_str(),
                 sbp::ToString(plan.to).c_str(), logical.ToString().c_str(),
                 plan.ToString().c_str());
  }
  Tensor x = local;
  for (const Step& s : plan.steps) {
    profiler::Range prof(profiler::Kind::kBoxing, "boxing");
    if (prof.active()) {
      prof.set_name(s.ToString(s.on_destination ? plan.dst : plan.src));
      prof.set_bytes(static_cast<int64_t>(s.cost));
    }
    x = kRun[static_cast<int>(s.kind)](plan, s, x, logical, my_rank);
  }
  if (!plan.dst.Contains(my_rank)) {
    return fn::empty(sbp::LocalShape(logical, plan.dst, plan.to, my_rank), local.dtype(),
                     local.device());
  }
  return x;
}

}  // namespace boxing
}  // namespace oneflow
