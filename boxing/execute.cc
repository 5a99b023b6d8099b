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

// x with axis moved to the front, contiguous. Axis 0 of a contiguous x is x itself: no copy.
Tensor AxisFirst(const Tensor& x, int axis) {
  if (axis == 0 && x.is_contiguous()) return x;
  std::vector<int64_t> perm{axis};
  for (int64_t i = 0; i < x.ndim(); ++i) {
    if (i != axis) perm.push_back(i);
  }
  return fn::contiguous_copy(fn::permute(x, perm));
}
// A view of x (axis first) with that axis back in its place.
Tensor AxisBack(const Tensor& x, int axis) {
  if (axis == 0) return x;
  std::vector<int64_t> perm;
  for (int64_t i = 1; i <= axis; ++i) perm.push_back(i);
  perm.push_back(0);
  for (int64_t i = axis + 1; i < x.ndim(); ++i) perm.push_back(i);
  return fn::permute(x, perm);
}

Tensor Zeros(const std::vector<int64_t>& dims, const Tensor& like) {
  Tensor z = fn::empty(Shape(dims), like.dtype(), like.device());
  fn::fill_(z, 0.0);
  return z;
}

int64_t Numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t v : dims) n *= v;
  return n;
}

// Staging. A step moves a large tensor in rounds, so that a rank holds its result and about a
// sixteenth of it in flight (never the whole logical tensor, nor two copies of its shard):
// `Rounds(staged, result, extent)` is how many rounds keep `staged` bytes of copies within
// max(64 KiB, result / 16) each, at most `extent` (the length of the axis cut into rounds).
// Every member of a step computes it from figures they share, so they run as many rounds.
int64_t Rounds(int64_t staged_bytes, int64_t result_bytes, int64_t extent) {
  const int64_t budget = std::max<int64_t>(int64_t{64} << 10, result_bytes / 16);
  const int64_t k = (staged_bytes + budget - 1) / budget;
  return std::clamp<int64_t>(k, 1, std::max<int64_t>(extent, 1));
}
// Round r of k over [0, n): its [begin, end).
std::pair<int64_t, int64_t> RoundPart(int64_t n, int64_t k, int64_t r) {
  return {n * r / k, n * (r + 1) / k};
}
// The axis cut into rounds: the first one other than `not_axis` longer than one; -1 if none.
int RoundAxis(const std::vector<int64_t>& dims, int not_axis) {
  for (size_t a = 0; a < dims.size(); ++a) {
    if (static_cast<int>(a) != not_axis && dims[a] > 1) return static_cast<int>(a);
  }
  return -1;
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

// A collective along axis a (all-gather or reduce-scatter) from x into `out`, of `length` along
// a: `run(in, staged)` runs it on in (x's part, a first, contiguous) into staged (a first).
// Along axis 0 of contiguous tensors it runs once, in x and out themselves; otherwise in rounds
// over another axis, with a copy of x's part and the staged result of each round only.
template <typename F>
Tensor AlongAxis(const Tensor& x, int a, int64_t length, F&& run) {
  std::vector<int64_t> dims = x.shape().dims();
  dims[a] = length;
  Tensor out = fn::empty(Shape(dims), x.dtype(), x.device());
  const int c = RoundAxis(dims, a);
  const int64_t es = static_cast<int64_t>(SizeOf(x.dtype()));
  // Every member must run as many rounds: the whole side (all-gather's result, reduce-scatter's
  // input) is the same on all of them, while the pieces of an uneven split are not.
  const int64_t shared = std::max(x.numel(), out.numel());
  const int64_t k =
      (a == 0 && x.is_contiguous()) || c < 0 ? 1 : Rounds(2 * shared * es, shared * es, dims[c]);
  for (int64_t r = 0; r < k; ++r) {
    auto [b, e] = RoundPart(k == 1 ? 0 : dims[c], k, r);
    Tensor xs = k == 1 ? x : fn::slice(x, c, b, e);
    Tensor os = k == 1 ? out : fn::slice(out, c, b, e);
    Tensor in = AxisFirst(xs, a);
    if (a == 0 && os.is_contiguous()) {
      run(in, os);
      continue;
    }
    std::vector<int64_t> sd = in.shape().dims();
    sd[0] = length;
    Tensor staged = fn::empty(Shape(sd), x.dtype(), x.device());
    run(in, staged);
    fn::copy_(os, AxisBack(staged, a));
  }
  return out;
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

// S(i) -> S(j) in rounds over axis i: in round r each member sends the r-th part of its rows
// along i, cut along j into the members' new pieces, and places what it receives in its result.
// Per round a send and a receive buffer of about a k-th of the shard.
Tensor AllToAll(const DimStep& d, const Tensor& x) {
  const int i = d.s.from.axis(), j = d.s.to.axis();
  const int64_t j0 = d.before[d.me][j].first;  // where my current piece starts along j
  const int64_t i0 = d.before[0][i].first;     // where the group's block starts along i
  const std::vector<int64_t> lens = Lengths(d.before, i);
  std::vector<int64_t> result = x.shape().dims();
  result[i] = std::accumulate(lens.begin(), lens.end(), int64_t{0});
  result[j] = d.after[d.me][j].second - d.after[d.me][j].first;
  Tensor out = fn::empty(Shape(result), x.dtype(), x.device());
  // The group's block, the same figure on every member: result with the whole of j.
  std::vector<int64_t> block = result;
  block[j] = d.after.back()[j].second - d.after.front()[j].first;
  const int64_t es = static_cast<int64_t>(SizeOf(x.dtype()));
  const int64_t per_member = Numel(block) / static_cast<int64_t>(d.before.size()) * es;
  const int64_t k = Rounds(2 * per_member, per_member, *std::max_element(lens.begin(), lens.end()));
  for (int64_t r = 0; r < k; ++r) {
    auto [b, e] = RoundPart(lens[d.me], k, r);
    Tensor xs = fn::slice(x, i, b, e);
    Tensor in = fn::empty(Shape({xs.numel()}), x.dtype(), x.device());
    std::vector<int64_t> in_counts, out_counts;
    int64_t at = 0;
    for (size_t m = 0; m < d.after.size(); ++m) {
      Tensor piece = fn::slice(xs, j, d.after[m][j].first - j0, d.after[m][j].second - j0);
      const int64_t n = piece.numel();
      if (n > 0) fn::copy_(fn::reshape(fn::slice(in, 0, at, at + n), piece.shape().dims()), piece);
      in_counts.push_back(n);
      at += n;
    }
    std::vector<std::vector<int64_t>> recv_dims;
    for (size_t m = 0; m < d.before.size(); ++m) {
      auto [bm, em] = RoundPart(lens[m], k, r);
      std::vector<int64_t> dims = result;
      dims[i] = em - bm;
      out_counts.push_back(Numel(dims));
      recv_dims.push_back(dims);
    }
    Tensor got =
        fn::empty(Shape({std::accumulate(out_counts.begin(), out_counts.end(), int64_t{0})}),
                  x.dtype(), x.device());
    d.comm->AllToAllV(in, got, in_counts, out_counts);
    int64_t off = 0;
    for (size_t m = 0; m < recv_dims.size(); ++m) {
      if (out_counts[m] > 0) {
        const int64_t at_i = d.before[m][i].first - i0 + RoundPart(lens[m], k, r).first;
        fn::copy_(fn::slice(out, i, at_i, at_i + recv_dims[m][i]),
                  fn::reshape(fn::slice(got, 0, off, off + out_counts[m]), recv_dims[m]));
      }
      off += out_counts[m];
    }
  }
  return out;
}

// A view: ExecuteBoxing copies once at the end of a run of slices ((B, B) -> (S(1), S(0)) holds
// no (B, S(0)) block in between).
Tensor Slice(const DimStep& d, const Tensor& x) {
  const int a = d.s.to.axis();
  const int64_t a0 = d.before[d.me][a].first;
  return fn::slice(x, a, d.after[d.me][a].first - a0, d.after[d.me][a].second - a0);
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
  // Only pieces of a partial source overlap (each is the whole): they are summed, the others
  // written. Each transfer moves in rounds along its first axis longer than one, so a rank has
  // one round's piece in flight (Rounds).
  bool sum = false;
  for (const Sbp& b : s.before) sum |= b.is_partial();
  const int64_t es = static_cast<int64_t>(SizeOf(x.dtype()));
  for (const Transfer& t : transfers) {
    if (t.src != rank && t.dst != rank) continue;
    std::vector<int64_t> extent;
    for (auto [b, e] : t.region) extent.push_back(e - b);
    const int c = RoundAxis(extent, -1);
    const int64_t bytes = t.numel() * es;
    const int64_t k = c < 0 ? 1 : Rounds(bytes, bytes, extent[c]);
    for (int64_t r = 0; r < k; ++r) {
      std::vector<std::pair<int64_t, int64_t>> region = t.region;
      if (k > 1) {
        auto [b, e] = RoundPart(extent[c], k, r);
        region[c] = {t.region[c].first + b, t.region[c].first + e};
      }
      if (t.src == rank && t.dst == rank) {
        Tensor dst = cut(out, region, mine_dst), src = cut(x, region, mine_src);
        fn::copy_(dst, sum ? fn::add(dst, src) : src);
      } else if (t.src == rank) {
        Tensor piece = cut(x, region, mine_src);
        comm->Send(piece.is_contiguous() ? piece : fn::contiguous_copy(piece), t.dst, 0x52);
      } else {
        std::vector<int64_t> dims;
        for (auto [b, e] : region) dims.push_back(e - b);
        Tensor buf = fn::empty(Shape(dims), x.dtype(), x.device());
        comm->Recv(buf, t.src, 0x52);
        Tensor dst = cut(out, region, mine_dst);
        fn::copy_(dst, sum ? fn::add(dst, buf) : buf);
      }
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
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    const Step& s = plan.steps[k];
    profiler::Range prof(profiler::Kind::kBoxing, "boxing");
    if (prof.active()) {
      prof.set_name(s.ToString(s.on_destination ? plan.dst : plan.src));
      prof.set_bytes(static_cast<int64_t>(s.cost));
    }
    x = kRun[static_cast<int>(s.kind)](plan, s, x, logical, my_rank);
    const bool run_ends = k + 1 == plan.steps.size() || plan.steps[k + 1].kind != Kind::kSlice;
    const bool ran = (s.on_destination ? plan.dst : plan.src).Contains(my_rank);
    if (s.kind == Kind::kSlice && run_ends && ran) {
      x = fn::contiguous_copy(x);  // the slice is not left pinning the whole input
    }
  }
  if (!plan.dst.Contains(my_rank)) {
    return fn::empty(sbp::LocalShape(logical, plan.dst, plan.to, my_rank), local.dtype(),
                     local.device());
  }
  return x;
}

}  // namespace boxing
}  // namespace oneflow
