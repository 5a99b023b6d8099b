#include "oneflow/global/global_tensor.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "boxing/execute.h"
#include "core/autograd.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "core/functional.h"
#include "core/shard_window.h"
#include "core/trace.h"
#include "oneflow/global/shard.h"
#include "runtime/env.h"

namespace oneflow {
namespace global {

NdSbp WithoutPartial(NdSbp nd) {
  for (Sbp& s : nd) {
    if (s.is_partial()) s = Sbp::Broadcast();
  }
  return nd;
}

// True when this rank's coordinate is 0 on every dimension holding P (it keeps the value).
bool KeepsPartial(const Placement& pl, const NdSbp& nd, int rank) {
  std::vector<int64_t> c = pl.Coord(rank);
  for (size_t d = 0; d < nd.size(); ++d) {
    if (nd[d].is_partial() && c[d] != 0) return false;
  }
  return true;
}

Device ShardDevice(const Placement& pl) {
  return pl.device() == DeviceType::kCUDA ? Device::CUDA(CurrentCudaIndex()) : Device::CPU();
}

Tensor EmptyShard(const Shape& logical, const Placement& pl, const NdSbp& nd, DType dtype) {
  return fn::empty(sbp::LocalShape(logical, pl, nd, MyRank()), dtype, ShardDevice(pl));
}

bool IsMetaGlobal(const Tensor& t) {
  return t.is_global() && Meta(t).local.device().type == DeviceType::kMeta;
}

Tensor MetaGlobal(const Shape& logical, DType dtype, const Placement& pl, const NdSbp& nd) {
  sbp::CheckNdSbp(nd, pl, logical.ndim(), "to_global");
  return MakeGlobal(
      Tensor::Empty(sbp::LocalShape(logical, pl, nd, MyRank()), dtype, Device::Meta()), logical, pl,
      nd);
}

namespace {

// Layout changes without autograd (the differentiable ToGlobal / ToLocal wrap them).
Tensor ToGlobalImpl(const Tensor& global, const Placement& placement, const NdSbp& nd_sbp);

void CheckRanksInWorld(const Placement& pl, const char* op) {
  const int world = runtime::WorldFromEnv().world_size;
  for (int r : pl.ranks()) {
    if (r >= world) {
      throw Error(StrCat(op, ": placement ", pl.ToString(), " names rank ", r,
                         " but the world has ", world, " rank", world == 1 ? "" : "s"));
    }
  }
}

}  // namespace

int MyRank() {
  static const int rank = runtime::WorldFromEnv().rank;
  return rank;
}

const GlobalMeta& Meta(const Tensor& t) {
  auto* m = dynamic_cast<GlobalMeta*>(t.impl()->extension.get());
  if (!m) throw Error("global: expected a global tensor, got a local one");
  return *m;
}

Tensor MakeGlobal(const Tensor& local, const Shape& logical, const Placement& placement,
                  const NdSbp& nd_sbp) {
  Install();
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::Allocate(local.device(), 0);
  impl->shape = logical;
  impl->strides = ContiguousStrides(logical);
  impl->dtype = local.dtype();
  auto meta = std::make_shared<GlobalMeta>();
  meta->placement = placement;
  meta->nd_sbp = nd_sbp;
  meta->local = local;
  impl->extension = std::move(meta);
  return Tensor(std::move(impl));
}

namespace {

// After to_global's gathering: entries (kMax int64 each, one per member of comm) hold at
// kLayout a placement hash, the number of sbp dims and each one's code (split axis, -2: B,
// -3: P). Every rank compares them with the first member's, so all of them refuse together.
void CheckSameLayout(const int64_t* all, int k_max, int k_layout, const runtime::Communicator& comm,
                     const Placement& placement) {
  auto sbp_of = [&](const int64_t* e) {
    std::string out = "(";
    for (int64_t d = 0; d < std::min<int64_t>(e[k_layout + 1], 4); ++d) {
      const int64_t c = e[k_layout + 2 + d];
      out += StrCat(d ? ", " : "", c >= 0 ? StrCat("S(", c, ")") : c == -2 ? "B" : "P");
    }
    return out + ")";
  };
  const int64_t* first = all;
  for (int j = 1; j < comm.size(); ++j) {
    const int64_t* e = all + static_cast<int64_t>(j) * k_max;
    if (std::equal(e + k_layout, e + k_max, first + k_layout)) continue;
    const int r0 = comm.ranks()[0], rj = comm.ranks()[j];
    if (e[k_layout] != first[k_layout]) {
      throw Error(StrCat("to_global: rank ", r0, " and rank ", rj, " passed different placements",
                         " (rank ", MyRank(), " passed ", placement.ToString(),
                         "); every rank must pass the same placement and sbp"));
    }
    throw Error(StrCat("to_global: rank ", r0, " passed sbp ", sbp_of(first), " but rank ", rj,
                       " passed sbp ", sbp_of(e),
                       "; every rank must pass the same placement and sbp"));
  }
}

Tensor LocalToGlobalImpl(const Tensor& local, const Placement& placement, const NdSbp& nd_sbp,
                         bool check_meta, const Shape* global_shape) {
  if (local.is_global()) return ToGlobalImpl(local, placement, nd_sbp);
  if (local.device().type == DeviceType::kMeta) {
    // No data, so no communication: the shard of an even split (the given global shape when
    // the caller knows it), on any placement, also one larger than this job's world.
    sbp::CheckNdSbp(nd_sbp, placement, local.ndim(), "to_global");
    std::vector<int64_t> dims = local.shape().dims();
    for (size_t d = 0; d < nd_sbp.size(); ++d) {
      if (nd_sbp[d].is_split()) dims[nd_sbp[d].axis()] *= placement.hierarchy()[d];
    }
    return MetaGlobal(global_shape ? *global_shape : Shape(dims), local.dtype(), placement, nd_sbp);
  }
  if (local.device() != ShardDevice(placement)) {
    // Another device type, or another GPU than this rank's (OneFlow moves it, as here).
    return LocalToGlobalImpl(fn::to_device(local, ShardDevice(placement)), placement, nd_sbp,
                             check_meta, global_shape);
  }
  sbp::CheckNdSbp(nd_sbp, placement, local.ndim(), "to_global");
  CheckRanksInWorld(placement, "to_global");
  const int rank = MyRank();
  std::vector<int64_t> dims = local.shape().dims();
  const bool member = placement.Contains(rank);
  bool has_split = false;
  for (const Sbp& s : nd_sbp) has_split |= s.is_split();
  // Every member's [ndim, dtype, dims... (8 at most), placement hash, sbp dims, sbp (4 at most)]:
  // the placement and sbp let every rank refuse a call the others made with another layout.
  constexpr int kDims = 8, kLayout = kDims + 2, kMax = kLayout + 6;
  if (global_shape != nullptr && !check_meta) {
    // The caller knows the global shape (to_local's backward): no communication.
    Shape want = member ? sbp::LocalShape(*global_shape, placement, nd_sbp, rank) : local.shape();
    ONEFLOW_CHECK(!member || want == local.shape(), "to_global: rank ", rank,
                  " holds a local tensor of shape ", local.shape(), " but ", sbp::ToString(nd_sbp),
                  " of the global shape ", *global_shape, " on ", placement.ToString(),
                  " gives it ", want);
    dims = global_shape->dims();
    has_split = false;  // nothing left to compute
  }
  runtime::Communicator* comm = nullptr;
  // check_meta (OneFlow's default): every rank of the job takes part, also those outside the
  // placement, which take the placement's shape and dtype; the members' meta must agree.
  const int world = runtime::WorldFromEnv().world_size;
  const bool over_world = check_meta && global_shape == nullptr && world > 1;
  // Split shards may be uneven: their sizes make the global shape, so they are always gathered.
  const bool gather = check_meta || (has_split && global_shape == nullptr);
  if (over_world) {
    comm = &runtime::Env::Get().WorldComm(DeviceType::kCPU);
  } else if (member && placement.size() > 1 && gather) {
    comm = &runtime::Env::Get().Comm(placement.ranks(), placement.device());
  }
  DType dtype = local.dtype();
  if (comm) {
    Tensor mine = fn::full(Shape({kMax}), -1.0, DType::kInt64);
    int64_t* p = mine.data<int64_t>();
    p[0] = local.ndim();
    p[1] = static_cast<int64_t>(local.dtype());
    for (int64_t i = 0; i < std::min<int64_t>(local.ndim(), kDims); ++i) p[2 + i] = dims[i];
    p[kLayout] = static_cast<int64_t>(std::hash<std::string>{}(placement.ToString()) >> 2);
    p[kLayout + 1] = static_cast<int64_t>(nd_sbp.size());
    for (size_t d = 0; d < nd_sbp.size() && d < 4; ++d) {
      p[kLayout + 2 + d] = nd_sbp[d].is_split()       ? nd_sbp[d].axis()
                           : nd_sbp[d].is_broadcast() ? -2
                                                      : -3;
    }
    Tensor all = fn::empty(Shape({comm->size() * kMax}), DType::kInt64);
    comm->AllGather(mine, all);
    CheckSameLayout(all.data<int64_t>(), kMax, kLayout, *comm, placement);
    const int n = placement.size();
    // Member i's entry (i: index in the placement).
    const int64_t* base = all.data<int64_t>();
    auto E = [&](int i) {
      return base + static_cast<int64_t>(over_world ? placement.ranks()[i] : i) * kMax;
    };
    auto shape_of = [&](int i) {
      std::vector<int64_t> d;
      for (int64_t k = 0; k < std::min<int64_t>(E(i)[0], kDims); ++k) d.push_back(E(i)[2 + k]);
      return Shape(d);
    };
    auto dtype_of = [&](int i) { return static_cast<DType>(E(i)[1]); };
    // Every rank decides from the same gathered data, so all of them throw together.
    for (int i = 1; i < n; ++i) {
      if (E(i)[0] == E(0)[0] && E(i)[1] == E(0)[1]) continue;
      throw Error(StrCat("to_global: rank ", placement.ranks()[i], " has a local tensor of shape ",
                         shape_of(i), " ", DTypeName(dtype_of(i)), " but rank ",
                         placement.ranks()[0], " has ", shape_of(0), " ", DTypeName(dtype_of(0)),
                         " (placement ", placement.ToString(), ")"));
    }
    const int64_t ndim = E(0)[0];
    dtype = dtype_of(0);
    dims = shape_of(0).dims();
    if (check_meta) {
      for (int i = 1; i < n; ++i) {
        bool same = true;
        for (int64_t k = 0; same && k < std::min<int64_t>(ndim, kDims); ++k) {
          bool split_axis = false;
          for (const Sbp& s : nd_sbp) split_axis |= s.is_split() && s.axis() == k;
          same = split_axis || E(i)[2 + k] == E(0)[2 + k];
        }
        if (!same) {
          throw Error(StrCat("to_global: rank ", placement.ranks()[i],
                             " has a local tensor of shape ", shape_of(i), " ",
                             DTypeName(dtype_of(i)), " but rank ", placement.ranks()[0], " has ",
                             shape_of(0), " ", DTypeName(dtype_of(0)), " (placement ",
                             placement.ToString(), ", sbp ", sbp::ToString(nd_sbp), ")"));
        }
      }
    }
    if (has_split) {
      // A split axis's global size sums the shards along the hierarchy dims that split it
      // (over the ranks at coordinate 0 on every other hierarchy dim).
      for (const Sbp& s : nd_sbp) {
        ONEFLOW_CHECK(!s.is_split() || s.axis() < kDims, "to_global: split(", s.axis(),
                      ") of a local tensor: only the first ", kDims, " dims can be split");
      }
      for (int64_t axis = 0; axis < ndim; ++axis) {
        bool split = false;
        for (const Sbp& s : nd_sbp) split |= s.is_split() && s.axis() == axis;
        if (!split) continue;
        int64_t total = 0;
        for (int i = 0; i < n; ++i) {
          std::vector<int64_t> coord = placement.Coord(placement.ranks()[i]);
          bool counted = true;
          for (size_t d = 0; d < nd_sbp.size(); ++d) {
            const bool splits_axis = nd_sbp[d].is_split() && nd_sbp[d].axis() == axis;
            counted &= splits_axis || coord[d] == 0;
          }
          if (counted) total += E(i)[2 + axis];
        }
        dims[axis] = total;
      }
      // Every shard must be the one the balanced split of that global shape gives its rank,
      // or later boxing would read the wrong rows.
      for (int i = 0; i < n; ++i) {
        const int peer = placement.ranks()[i];
        Shape want = sbp::LocalShape(Shape(dims), placement, nd_sbp, peer);
        Shape theirs = shape_of(i);
        if (theirs.dims() !=
            std::vector<int64_t>(want.dims().begin(), want.dims().begin() + theirs.ndim())) {
          throw Error(StrCat("to_global: rank ", peer, " holds a local tensor of shape ", theirs,
                             " but ", sbp::ToString(nd_sbp), " of the global shape ", Shape(dims),
                             " on ", placement.ToString(), " gives it ", want,
                             "; shards must follow the balanced split (sizes differ by at most "
                             "one, the larger ones first)"));
        }
      }
    }
  } else if (has_split) {
    for (size_t d = 0; d < nd_sbp.size(); ++d) {
      if (nd_sbp[d].is_split()) dims[nd_sbp[d].axis()] *= placement.hierarchy()[d];
    }
  }
  Tensor data = local;
  if (over_world && member) {
    // Synchronised data (OneFlow's sync_data): along each broadcast dimension, the rank at
    // coordinate 0 gives its data to the others, so a broadcast tensor holds one value.
    for (size_t d = 0; d < nd_sbp.size(); ++d) {
      if (!nd_sbp[d].is_broadcast() || placement.hierarchy()[d] < 2) continue;
      std::vector<int> group = placement.SubGroup(rank, static_cast<int>(d));
      if (data.impl() == local.impl() || !data.is_contiguous()) data = fn::contiguous_copy(data);
      runtime::Env::Get().Comm(group, placement.device()).Broadcast(data, group[0]);
    }
  }
  Tensor shard =
      member ? data : fn::empty(Shape(std::vector<int64_t>(dims.size(), 0)), dtype, local.device());
  return MakeGlobal(shard, Shape(dims), placement, nd_sbp);
}

Tensor ToGlobalImpl(const Tensor& global, const Placement& placement, const NdSbp& nd_sbp) {
  if (!global.is_global()) return LocalToGlobalImpl(global, placement, nd_sbp, false, nullptr);
  if (IsMetaGlobal(global)) return MetaGlobal(global.shape(), global.dtype(), placement, nd_sbp);
  sbp::CheckNdSbp(nd_sbp, placement, global.ndim(), "to_global");
  CheckRanksInWorld(placement, "to_global");
  const GlobalMeta& m = Meta(global);
  if (m.placement == placement && m.nd_sbp == nd_sbp) return global;
  if (m.placement.device() != placement.device()) {
    // Between device types: every rank moves its own shard, then boxing on the new device.
    Placement moved(placement.device(), m.placement.ranks(), m.placement.hierarchy());
    Tensor local = m.placement.Contains(MyRank())
                       ? fn::to_device(m.local, ShardDevice(moved))
                       : fn::empty(m.local.shape(), m.local.dtype(), ShardDevice(moved));
    return ToGlobalImpl(MakeGlobal(local, global.shape(), moved, m.nd_sbp), placement, nd_sbp);
  }
  auto plan =
      boxing::PlanBoxing(m.placement, m.nd_sbp, placement, nd_sbp, global.shape(), global.dtype());
  Tensor local = boxing::ExecuteBoxing(plan, m.local, global.shape(), MyRank());
  return MakeGlobal(local, global.shape(), placement, nd_sbp);
}

// The gradient of a layout change, which is the identity on the logical tensor: the output's
// gradient laid out as the input was (partial sums read as broadcast); for a local input, this
// rank's piece of it; for to_local, this rank's gradient as its shard of the input's layout.
class LayoutGrad : public Node {
 public:
  enum Kind { kToGlobal, kFromLocal, kToLocal };
  // placement / nd_sbp: the input's layout (kToGlobal, kToLocal) or the output's (kFromLocal).
  LayoutGrad(Kind kind, Placement placement, NdSbp nd_sbp, Shape shape)
      : kind_(kind),
        placement_(std::move(placement)),
        nd_sbp_(std::move(nd_sbp)),
        shape_(std::move(shape)) {}

  std::vector<Tensor> Apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    Kind kind = kind_;
    Placement placement = placement_;
    NdSbp nd_sbp = nd_sbp_;
    Shape shape = shape_;
    return TracedStep("to_global_grad", {grads[0]}, [=](const std::vector<Tensor>& in) {
      const Tensor& g = in[0];
      switch (kind) {
        case kToGlobal:
          return std::vector<Tensor>{ToGlobalImpl(g, placement, WithoutPartial(nd_sbp))};
        case kFromLocal:
          return std::vector<Tensor>{
              Meta(ToGlobalImpl(g, placement, WithoutPartial(nd_sbp))).local};
        default:
          return std::vector<Tensor>{LocalToGlobalImpl(g, placement, nd_sbp, false, &shape)};
      }
    });
  }
  std::string name() const override {
    return kind_ == kToLocal ? "ToLocalBackward" : "ToGlobalBackward";
  }

 private:
  Kind kind_;
  Placement placement_;
  NdSbp nd_sbp_;
  Shape shape_;
};

// out with a LayoutGrad node over in, when autograd records (in requires grad, grad mode on).
Tensor Differentiable(Tensor out, const Tensor& in, LayoutGrad::Kind kind,
                      const Placement& placement, const NdSbp& nd_sbp) {
  if (!GradModeEnabled() || !in.requires_grad() || !IsFloating(out.dtype())) return out;
  if (out.impl() == in.impl()) return out;  // no layout change: in's own history stands
  auto node = std::make_shared<LayoutGrad>(kind, placement, nd_sbp, in.shape());
  node->next_edges.push_back(GradientEdge(in));
  node->output_metas.push_back(out.meta());
  AutogradMeta& am = out.impl()->mutable_autograd();
  am.requires_grad = true;
  am.grad_fn = node;
  am.output_nr = 0;
  return out;
}

}  // namespace

Tensor ChangeLayout(const Tensor& global, const Placement& placement, const NdSbp& nd_sbp) {
  return ToGlobalImpl(global, placement, nd_sbp);
}

Tensor LocalToGlobal(const Tensor& local, const Placement& placement, const NdSbp& nd_sbp,
                     bool check_meta, const Shape* global_shape) {
  ShardWindowPause pause;  // a layout change inside a creation under a placement
  if (CurrentTracer()) {   // a layout change is no op call: nn.Graph's replay redoes it as a step
    const bool known = global_shape != nullptr;
    const Shape shape = known ? *global_shape : Shape();
    return TracedStep("to_global", {local}, [=](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{
          LocalToGlobal(in[0], placement, nd_sbp, check_meta, known ? &shape : nullptr)};
    })[0];
  }
  Tensor out = LocalToGlobalImpl(local, placement, nd_sbp, check_meta, global_shape);
  if (local.is_global()) {
    const GlobalMeta& m = Meta(local);
    return Differentiable(out, local, LayoutGrad::kToGlobal, m.placement, m.nd_sbp);
  }
  return Differentiable(out, local, LayoutGrad::kFromLocal, placement, nd_sbp);
}

Tensor ToGlobal(const Tensor& global, const Placement& placement, const NdSbp& nd_sbp) {
  return LocalToGlobal(global, placement, nd_sbp);
}

Tensor ToLocal(const Tensor& global) {
  if (CurrentTracer()) {
    return TracedStep("to_local", {global}, [](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{ToLocal(in[0])};
    })[0];
  }
  const GlobalMeta& m = Meta(global);
  if (!GradModeEnabled() || !global.requires_grad()) return m.local;
  // An alias of the shard (its storage) that carries the node; the shard keeps no history.
  return Differentiable(m.local.detach(), global, LayoutGrad::kToLocal, m.placement, m.nd_sbp);
}

Tensor Whole(const Tensor& t) {
  if (!t.is_global()) return t;
  ShardWindowPause pause;  // reading a global value inside a creation under a placement
  std::vector<int> world(runtime::WorldFromEnv().world_size);
  for (size_t r = 0; r < world.size(); ++r) world[r] = static_cast<int>(r);
  Placement everywhere(Meta(t).placement.device(), world);
  return Meta(ToGlobalImpl(t.detach(), everywhere, NdSbp{Sbp::Broadcast()})).local;
}

Tensor FromWhole(const Tensor& whole, const Placement& placement, const NdSbp& nd_sbp) {
  if (CurrentTracer()) {
    return TracedStep("from_whole", {whole}, [=](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{FromWhole(in[0], placement, nd_sbp)};
    })[0];
  }
  sbp::CheckNdSbp(nd_sbp, placement, whole.ndim(), "to_global");
  const int rank = MyRank();
  if (!placement.Contains(rank)) {
    return MakeGlobal(EmptyShard(whole.shape(), placement, nd_sbp, whole.dtype()), whole.shape(),
                      placement, nd_sbp);
  }
  auto ranges =
      sbp::LocalRanges(whole.shape(), placement.hierarchy(), nd_sbp, placement.Coord(rank));
  Tensor x = whole;
  for (size_t a = 0; a < ranges.size(); ++a) {
    if (ranges[a].first != 0 || ranges[a].second != whole.size(a)) {
      x = fn::slice(x, a, ranges[a].first, ranges[a].second);
    }
  }
  x = x.device().type == placement.device() ? fn::contiguous_copy(x)
                                            : fn::to_device(x, ShardDevice(placement));
  if (!KeepsPartial(placement, nd_sbp, rank)) fn::fill_(x, 0.0);
  return MakeGlobal(x, whole.shape(), placement, nd_sbp);
}

Tensor BuildGlobal(const std::function<Tensor()>& build, const Placement& placement,
                   const NdSbp& nd_sbp) {
  if (CurrentTracer()) return FromWhole(build(), placement, nd_sbp);  // nn.Graph replays steps
  const int rank = MyRank();
  const bool member = placement.Contains(rank);
  Shape window;
  ShardWindowScope scope([&](const Shape& logical) {
    sbp::CheckNdSbp(nd_sbp, placement, logical.ndim(), "to_global");
    ShardWindow w;
    w.start.assign(logical.ndim(), 0);
    if (!member) {
      w.local = Shape(std::vector<int64_t>(logical.ndim(), 0));
    } else {
      auto ranges = sbp::LocalRanges(logical, placement.hierarchy(), nd_sbp, placement.Coord(rank));
      std::vector<int64_t> dims;
      for (size_t a = 0; a < ranges.size(); ++a) {
        w.start[a] = ranges[a].first;
        dims.push_back(ranges[a].second - ranges[a].first);
      }
      w.local = Shape(dims);
    }
    window = w.local;
    return w;
  });
  Tensor out = build();
  if (out.device().type == DeviceType::kMeta) {  // shapes only: any placement, no data
    return MetaGlobal(scope.taken() ? scope.logical() : out.shape(), out.dtype(), placement,
                      nd_sbp);
  }
  CheckRanksInWorld(placement, "to_global");
  if (!scope.taken()) return FromWhole(out, placement, nd_sbp);
  ONEFLOW_CHECK(out.shape() == window, "to_global: a creation under a placement built a shard of ",
                "shape ", out.shape(), " but its window of ", scope.logical(), " is ", window);
  if (member && out.device() != ShardDevice(placement)) {
    out = fn::to_device(out, ShardDevice(placement));
  }
  if (member && !KeepsPartial(placement, nd_sbp, rank)) fn::fill_(out, 0.0);
  return MakeGlobal(out.detach(), scope.logical(), placement, nd_sbp);
}

std::string Describe(const Tensor& t) {
  const GlobalMeta& m = Meta(t);
  return StrCat("placement=", m.placement.ToString(), ", sbp=", sbp::ToString(m.nd_sbp));
}

}  // namespace global
}  // namespace oneflow
