// Every signature of every SBP rule, validated without processes.
//
// For each sample call of every registered op and each simulated placement (1-D over 2 and 3
// ranks, and a 2x2 mesh), the op's SBP rule lists its candidate signatures. For each signature
// the test splits the full inputs as the signature says, runs the global interpreter's per-rank
// core (global::RunShard) once per simulated rank, assembles the outputs as the output Sbp says
// and compares them with the op run on the full inputs. A wrong rule fails by name, e.g.
// softmax split along its own dim: "op 'softmax' [[5, 6, 4] dim 1], signature (S(1)) -> S(1),
// world size 2: output 0 differs from the full computation, max difference 0.599".
//
// The simulation runs the interpreter's own code (oneflow/global/interpret.h):
//   * local inputs are what boxing hands each rank: S(k) the SplitRange slice along k, B the
//     whole tensor, P some per-rank parts that sum to the whole (random here, so that a rule
//     that only works for the zero-padding decomposition is caught too). On an n-D mesh each
//     hierarchy dimension splits what the previous ones left (sbp::LocalRanges' nesting).
//   * on the 2x2 mesh every pair of the rule's 1-D candidates runs, one per hierarchy
//     dimension, as sbp::Deduce combines them (for every sample: it takes well under a second).
//   * each simulated rank's outputs come from global::RunShard, the per-rank core of every
//     global op call: the rule's lower hook (dropout_mask: the whole mask drawn, the rank's
//     slice kept) or the local kernel with the rule's local attrs (shape attrs of output 0 as
//     the rank's shard).
//   * ops whose rule rewrites the call into other global op calls (nll_loss 'mean': a sum and a
//     global count) run through global::Interpret itself on a simulated world (deduction,
//     boxing by Distribute / Assemble, RunShard per rank), from every layout of the inputs with
//     one Sbp on every hierarchy dimension.
//   * dropout_mask's assembled mask equals the full computation by construction (both draw the
//     same mask), so every rank's mask is also checked for a property of its own: each element 0
//     or exactly 1 / (1 - p), and about 1 - p of a large shard kept; and a larger sample shows
//     that the comparison does fail when each rank draws a mask for its own shard.
//   * 0-dim local inputs (Python scalars) join as B; boxing may then turn them into any Sbp a
//     signature asks for, so samples with 0-dim inputs are distributed like any other input.
//   * ops that update inputs in place (the rule's inplace_inputs) are also checked on those
//     inputs after the call, assembled with their input Sbp.
// Assembly: S(k) concatenates along k, P sums (a sum of bool parts is their OR, as in the
// collectives), B requires every rank's local to equal the others'. Each rank's local output
// must also have the shape LocalShape gives for the signature, since the interpreter wraps it
// as such without checking.
//
// Random and creation ops are deterministic functions of their attrs (seed and offset), so
// they are validated like the others; creation ops have no inputs and only the all-broadcast
// signature (the global API builds them whole and slices).
//
// The sample calls are tests/op_samples.cc's. A new op must add one there; "every registered op
// has a sample" fails, naming it, until it does.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/dispatch.h"
#include "core/op_registry.h"
#include "oneflow/global/interpret.h"
#include "sbp/deduce.h"
#include "sbp/rules.h"
#include "sbp/sbp.h"
#include "tests/op_samples.h"
#include "tests/test_util.h"

namespace oneflow {
namespace {

using sbp::NdSbp;
using sbp::Placement;
using sbp::Sbp;
using IntList = std::vector<int64_t>;

using testing::Rng;
using testing::Sample;
using testing::Samples;

// ---------------------------------------------------------------- comparing tensors

bool IsExact(DType t) { return !IsFloating(t) && !IsComplex(t); }

// Max |got - want| and whether every element is within tolerance (exact for integers and
// bools; |d| <= tol (1 + |want|) for floats, tol 1e-5, or a few roundings of the half types:
// shards and partial sums round where the whole computation does not; NaN matches NaN).
struct Diff {
  bool ok = true;
  double max = 0;
};
Diff Compare(const Tensor& got, const Tensor& want) {
  // complex: both parts, as (..., 2) pairs
  if (IsComplex(want.dtype())) return Compare(fn::view_as_real(got), fn::view_as_real(want));
  std::vector<double> g = testing::ToVector(got), w = testing::ToVector(want);
  Diff d;
  const DType t = want.dtype();
  const double tol = IsExact(t)              ? 0.0
                     : t == DType::kBFloat16 ? 3e-2
                     : t == DType::kFloat16  ? 4e-3
                                             : 1e-5;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) && std::isnan(w[i])) continue;
    const double e = std::abs(g[i] - w[i]);
    if (!(e <= tol * (1.0 + std::abs(w[i])))) d.ok = false;
    if (!(e <= d.max)) d.max = e;  // NaN shows as NaN
  }
  return d;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// dropout_mask's local output on one rank: every element 0 or exactly 1 / (1 - p) (rounded to
// the dtype), and on a shard of at least 400 elements a kept fraction within 5 standard
// deviations of 1 - p.
std::optional<std::string> CheckDropoutShard(const Tensor& local, double p) {
  const double scale = local.dtype() == DType::kFloat32
                           ? static_cast<double>(static_cast<float>(1.0 / (1.0 - p)))
                           : 1.0 / (1.0 - p);
  std::vector<double> v = testing::ToVector(local);
  int64_t kept = 0;
  for (double x : v) {
    if (x == scale) {
      ++kept;
    } else if (x != 0.0) {
      return StrCat("dropout mask element ", Num(x),
                    " is neither 0 nor 1 / (1 - p) = ", Num(scale));
    }
  }
  const double n = static_cast<double>(v.size());
  if (n >= 400) {
    const double rate = kept / n, bound = 5 * std::sqrt(p * (1 - p) / n);
    if (!(std::abs(rate - (1 - p)) <= bound)) {
      return StrCat("dropout mask keeps ", Num(rate), " of ", v.size(), " elements, expected ",
                    Num(1 - p), " +- ", Num(bound));
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------- distributing and assembling

// Parts, one per rank, that sum to `whole` (for bool: whose OR is `whole`, each true element
// true on a random non-empty set of ranks).
std::vector<Tensor> RandomParts(const Tensor& whole, int64_t n, Rng& rng) {
  const Shape& s = whole.shape();
  std::vector<Tensor> parts;
  if (whole.dtype() == DType::kBool) {
    std::vector<double> w = testing::ToVector(whole);
    std::vector<std::vector<double>> v(n, std::vector<double>(w.size(), 0.0));
    for (size_t i = 0; i < w.size(); ++i) {
      if (w[i] == 0) continue;
      int64_t mask = rng.Int(1, int64_t{1} << n);
      for (int64_t k = 0; k < n; ++k) v[k][i] = (mask >> k) & 1;
    }
    for (int64_t k = 0; k < n; ++k) parts.push_back(testing::FromVector(v[k], s, DType::kBool));
    return parts;
  }
  Tensor rest = fn::contiguous_copy(whole);
  for (int64_t k = 0; k + 1 < n; ++k) {
    Tensor p = IsFloating(whole.dtype()) ? rng.Floats(s, -1, 1, whole.dtype())
                                         : rng.Ints(s, -20, 21, whole.dtype());
    parts.push_back(p);
    rest = fn::sub(rest, p);
  }
  parts.push_back(rest);
  return parts;
}

// The locals of `whole` laid out as nd over hierarchy dimensions d..: one per coordinate of
// those dimensions, row-major, as the interpreter's boxing leaves them on the ranks.
std::vector<Tensor> Distribute(const Tensor& whole, const NdSbp& nd, const IntList& h, size_t d,
                               Rng& rng) {
  if (d == h.size()) return {fn::contiguous_copy(whole)};
  const Sbp& s = nd[d];
  std::vector<Tensor> parts;
  if (s.is_partial()) parts = RandomParts(whole, h[d], rng);
  std::vector<Tensor> out;
  for (int64_t k = 0; k < h[d]; ++k) {
    Tensor sub = whole;
    if (s.is_split()) {
      auto range = sbp::SplitRange(whole.size(s.axis()), h[d], k);
      sub = fn::slice(whole, s.axis(), range.first, range.second);
    } else if (s.is_partial()) {
      sub = parts[k];
    }
    for (Tensor& t : Distribute(sub, nd, h, d + 1, rng)) out.push_back(t);
  }
  return out;
}

// The logical tensor locals[begin, begin + prod(h[d:])) describe under nd: S concatenates, P
// sums, B takes the first after checking that the others equal it (else *problem is set).
Tensor Assemble(const std::vector<Tensor>& locals, size_t begin, const NdSbp& nd, const IntList& h,
                size_t d, std::string* problem) {
  if (d == h.size()) return locals[begin];
  int64_t chunk = 1;
  for (size_t i = d + 1; i < h.size(); ++i) chunk *= h[i];
  std::vector<Tensor> subs;
  for (int64_t k = 0; k < h[d]; ++k)
    subs.push_back(Assemble(locals, begin + k * chunk, nd, h, d + 1, problem));
  const Sbp& s = nd[d];
  if (s.is_split()) return fn::cat(subs, s.axis());
  if (s.is_partial()) {
    Tensor acc = subs[0];
    for (size_t k = 1; k < subs.size(); ++k) acc = fn::add(acc, subs[k]);
    return acc;
  }
  for (size_t k = 1; k < subs.size(); ++k) {
    Diff diff = subs[k].shape() == subs[0].shape() ? Compare(subs[k], subs[0]) : Diff{false, NAN};
    if (!diff.ok && problem->empty()) {
      *problem = StrCat("the locals of B (hierarchy dim ", d,
                        ") differ between ranks, max difference ", Num(diff.max));
    }
  }
  return subs[0];
}

// ---------------------------------------------------------------- signatures on a mesh

struct NdSignature {
  std::vector<NdSbp> in, out;
};

std::string SbpString(const NdSbp& nd) {
  return nd.size() == 1 ? nd[0].ToString() : sbp::ToString(nd);
}

// "(S(0), B) -> S(0)" on a 1-D mesh (Signature::ToString), "((S(0), B), (B, B)) -> (S(0), B)" on
// a 2-D one.
std::string ToString(const NdSignature& s) {
  std::string r = "(";
  for (size_t i = 0; i < s.in.size(); ++i) r += (i ? ", " : "") + SbpString(s.in[i]);
  r += ") -> ";
  if (s.out.size() == 1) return r + SbpString(s.out[0]);
  r += "(";
  for (size_t i = 0; i < s.out.size(); ++i) r += (i ? ", " : "") + SbpString(s.out[i]);
  return r + ")";
}

// One 1-D candidate per hierarchy dimension, each judged on the shards the earlier ones leave,
// as sbp::Deduce picks them (sbp::CandidatesAt): every combination.
std::vector<NdSignature> Combine(const sbp::SbpRule& rule, const sbp::RuleContext& ctx,
                                 const IntList& hierarchy) {
  std::vector<NdSignature> out;
  std::vector<sbp::Signature> prefix;
  std::function<void()> extend = [&] {
    if (prefix.size() == hierarchy.size()) {
      NdSignature s;
      s.in.assign(ctx.in.size(), NdSbp());
      s.out.assign(ctx.out.size(), NdSbp());
      for (const sbp::Signature& c : prefix) {
        for (size_t i = 0; i < s.in.size() && i < c.in.size(); ++i) s.in[i].push_back(c.in[i]);
        for (size_t i = 0; i < s.out.size() && i < c.out.size(); ++i) s.out[i].push_back(c.out[i]);
      }
      out.push_back(std::move(s));
      return;
    }
    for (const sbp::Signature& c : sbp::CandidatesAt(rule, ctx, hierarchy, prefix)) {
      prefix.push_back(c);
      extend();
      prefix.pop_back();
    }
  };
  extend();
  return out;
}

bool AllBroadcast(const std::vector<NdSbp>& sbps) {
  for (const NdSbp& nd : sbps) {
    for (const Sbp& s : nd) {
      if (!s.is_broadcast()) return false;
    }
  }
  return true;
}

struct Mesh {
  IntList hierarchy;
  std::string name;
};

Placement MeshPlacement(const IntList& h) {
  int world = 1;
  for (int64_t x : h) world *= static_cast<int>(x);
  std::vector<int> ranks(world);
  for (int i = 0; i < world; ++i) ranks[i] = i;
  return Placement(DeviceType::kCPU, ranks, h);
}

// ---------------------------------------------------------------- a simulated world

// A global tensor of the simulation: the local of every rank of its placement, in rank order.
struct SimMeta : TensorExtension, global::Layout {
  std::vector<Tensor> locals;
  std::map<std::string, std::vector<Tensor>> boxed;  // by the NdSbp boxed to
};

SimMeta& Sim(const Tensor& t) { return *dynamic_cast<SimMeta*>(t.impl()->extension.get()); }

// Every rank of a placement in one process; boxing assembles the logical tensor and
// distributes it again (Assemble, Distribute).
class SimWorld : public global::World {
 public:
  explicit SimWorld(Rng& rng) : rng_(rng) {}
  const global::Layout& LayoutOf(const Tensor& t) const override { return Sim(t); }
  Tensor Lift(const Tensor& scalar, const Placement& pl) override {
    return Make(std::vector<Tensor>(pl.size(), scalar), scalar.meta(), pl,
                NdSbp(pl.ndim(), Sbp::Broadcast()));
  }
  std::pair<int, int> RankRange(const Placement& pl) override { return {0, pl.size()}; }
  Tensor Boxed(const Tensor& t, const NdSbp& to, const boxing::Plan*, int rank) override {
    SimMeta& m = Sim(t);
    const int index = m.placement.IndexOf(rank);
    if (to == m.nd_sbp) return m.locals[index];
    std::vector<Tensor>& parts = m.boxed[sbp::ToString(to)];
    if (parts.empty()) {
      std::string problem;
      Tensor whole = Assemble(m.locals, 0, m.nd_sbp, m.placement.hierarchy(), 0, &problem);
      if (!problem.empty()) throw Error(StrCat("simulated boxing: ", problem));
      parts = Distribute(whole, to, m.placement.hierarchy(), 0, rng_);
    }
    return parts[index];
  }
  Tensor Make(const std::vector<std::vector<Tensor>>& rank_outs, size_t k,
              const TensorMeta& logical, const Placement& pl, const NdSbp& nd_sbp) override {
    std::vector<Tensor> locals;
    for (const std::vector<Tensor>& outs : rank_outs) locals.push_back(outs.at(k));
    return Make(std::move(locals), logical, pl, nd_sbp);
  }
  // The global tensor whose locals, in rank order, are `locals`.
  Tensor Make(std::vector<Tensor> locals, const TensorMeta& logical, const Placement& pl,
              const NdSbp& nd_sbp) {
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = Storage::Allocate(Device::CPU(), 0);
    impl->shape = logical.shape;
    impl->strides = ContiguousStrides(logical.shape);
    impl->dtype = logical.dtype;
    auto meta = std::make_shared<SimMeta>();
    meta->placement = pl;
    meta->nd_sbp = nd_sbp;
    meta->locals = std::move(locals);
    impl->extension = std::move(meta);
    return Tensor(std::move(impl));
  }

 private:
  Rng& rng_;
};

// Op calls on the simulation's global tensors (those a rule's rewrite makes) come here.
SimWorld* g_sim_world = nullptr;
std::vector<Tensor> SimInterpret(const OpDef& op, const std::vector<Tensor>& inputs,
                                 const Attrs& attrs) {
  return global::Interpret(*g_sim_world, op, inputs, attrs);
}

// ---------------------------------------------------------------- running a call

struct Call {
  const Sample& sample;
  const OpDef& op;
  const sbp::SbpRule& rule;
  std::vector<TensorMeta> out_metas;
  std::vector<Tensor> full_out;  // the op on the full inputs
  std::vector<Tensor> full_in;   // the full inputs after that call (in-place ops update them)
};

// What is wrong with per-rank locals of `want` laid out as s on pl, if anything: a shape other
// than LocalShape's, ranks that disagree under B, an assembled tensor that differs.
std::optional<std::string> CheckLocals(const std::vector<Tensor>& locals, const NdSbp& s,
                                       const Tensor& want, const Placement& pl,
                                       const std::string& what) {
  for (int r = 0; r < pl.size(); ++r) {
    const Shape expect = sbp::LocalShape(want.shape(), pl, s, r);
    const Tensor& got = locals[r];
    if (got.shape() != expect || got.dtype() != want.dtype()) {
      return StrCat(what, " on rank ", r, " is ", got.shape(), " ", DTypeName(got.dtype()),
                    ", the shard of ", SbpString(s), " is ", expect, " ", DTypeName(want.dtype()));
    }
  }
  std::string problem;
  Tensor whole = Assemble(locals, 0, s, pl.hierarchy(), 0, &problem);
  if (!problem.empty()) return StrCat(what, ": ", problem);
  Diff diff = Compare(whole, want);
  if (!diff.ok) {
    return StrCat(what, " differs from the full computation, max difference ", Num(diff.max));
  }
  return std::nullopt;
}

std::optional<std::string> CheckDropoutLocals(const Call& call,
                                              const std::vector<std::vector<Tensor>>& local_out) {
  if (call.sample.op != "dropout_mask") return std::nullopt;
  for (size_t r = 0; r < local_out.size(); ++r) {
    if (auto e = CheckDropoutShard(local_out[r][0], call.sample.attrs.Get<double>("p"))) {
      return StrCat("rank ", r, ": ", *e);
    }
  }
  return std::nullopt;
}

// Runs `sig` on `mesh` as the interpreter does (global::RunShard on every rank; kernel_only:
// the local kernel instead, to show what a lowering is for); returns what went wrong, if
// anything.
std::optional<std::string> Simulate(const Call& call, const NdSignature& sig, const Mesh& mesh,
                                    bool kernel_only, Rng& rng) {
  const Sample& sample = call.sample;
  const IntList& h = mesh.hierarchy;
  const size_t nd = h.size();
  // Well-formed: one Sbp per tensor and per mesh dimension, split axes inside the tensor.
  if (sig.in.size() != sample.in.size() || sig.out.size() != call.out_metas.size()) {
    return StrCat("the signature has ", sig.in.size(), " inputs and ", sig.out.size(),
                  " outputs, the call ", sample.in.size(), " and ", call.out_metas.size());
  }
  auto check_axes = [&](const NdSbp& s, int64_t ndim, const char* what,
                        size_t i) -> std::optional<std::string> {
    for (const Sbp& x : s) {
      if (x.is_split() && (x.axis() < 0 || x.axis() >= ndim)) {
        return StrCat(what, " ", i, " (", ndim, " dims) is split along axis ", x.axis());
      }
    }
    if (s.size() != nd) return StrCat(what, " ", i, " has ", s.size(), " Sbp entries");
    return std::nullopt;
  };
  for (size_t i = 0; i < sig.in.size(); ++i) {
    if (auto e = check_axes(sig.in[i], sample.in[i].ndim(), "input", i)) return e;
  }
  for (size_t i = 0; i < sig.out.size(); ++i) {
    if (auto e = check_axes(sig.out[i], call.out_metas[i].shape.ndim(), "output", i)) return e;
  }

  const Placement pl = MeshPlacement(h);
  const int world = pl.size();
  // Each rank's inputs, as boxing leaves them.
  std::vector<std::vector<Tensor>> local_in(world, std::vector<Tensor>(sample.in.size()));
  for (size_t i = 0; i < sample.in.size(); ++i) {
    std::vector<Tensor> parts = Distribute(sample.in[i], sig.in[i], h, 0, rng);
    for (int r = 0; r < world; ++r) local_in[r][i] = parts[r];
  }
  std::vector<TensorMeta> in_metas;
  for (const Tensor& t : sample.in) in_metas.push_back(t.meta());

  std::vector<std::vector<Tensor>> local_out(world);
  for (int r = 0; r < world; ++r) {
    try {
      const sbp::ShardCall shard{in_metas, call.out_metas, sample.attrs, pl, sig.in, sig.out, r};
      local_out[r] = kernel_only ? RunLocalKernel(call.op, local_in[r], sample.attrs)
                                 : global::RunShard(call.op, call.rule, shard, local_in[r]);
    } catch (const std::exception& e) {
      return StrCat("rank ", r, ": ", e.what());
    }
  }
  if (auto e = CheckDropoutLocals(call, local_out)) return e;

  for (size_t k = 0; k < call.full_out.size(); ++k) {
    std::vector<Tensor> locals;
    for (int r = 0; r < world; ++r) {
      if (local_out[r].size() != call.full_out.size()) {
        return StrCat("rank ", r, " returned ", local_out[r].size(), " outputs");
      }
      locals.push_back(local_out[r][k]);
    }
    if (auto e = CheckLocals(locals, sig.out[k], call.full_out[k], pl, StrCat("output ", k))) {
      return e;
    }
  }
  for (int i : call.rule.inplace_inputs) {
    if (i >= static_cast<int>(sample.in.size())) continue;
    std::vector<Tensor> locals;
    for (int r = 0; r < world; ++r) locals.push_back(local_in[r][i]);
    if (auto e =
            CheckLocals(locals, sig.in[i], call.full_in[i], pl, StrCat("in-place input ", i))) {
      return e;
    }
  }
  return std::nullopt;
}

// Every layout of the inputs with one Sbp repeated on each hierarchy dimension: S along any
// axis, B, and P for number tensors.
std::vector<std::vector<NdSbp>> UniformLayouts(const Sample& sample, size_t nd) {
  std::vector<std::vector<NdSbp>> out{{}};
  for (const Tensor& t : sample.in) {
    std::vector<Sbp> options{Sbp::Broadcast()};
    for (int64_t a = 0; a < t.ndim(); ++a) options.push_back(Sbp::Split(static_cast<int>(a)));
    if (IsFloating(t.dtype())) options.push_back(Sbp::PartialSum());
    std::vector<std::vector<NdSbp>> next;
    for (const auto& prefix : out) {
      for (const Sbp& s : options) {
        next.push_back(prefix);
        next.back().push_back(NdSbp(nd, s));
      }
    }
    out = std::move(next);
  }
  return out;
}

// The whole call through global::Interpret on a simulated world, the inputs laid out as
// `layout`: what global ops do for ops whose rule rewrites the call.
std::optional<std::string> SimulateInterpreter(const Call& call, const std::vector<NdSbp>& layout,
                                               const Mesh& mesh, Rng& rng) {
  const Placement pl = MeshPlacement(mesh.hierarchy);
  SimWorld world(rng);
  g_sim_world = &world;
  GlobalHooks hooks = GetGlobalHooks();  // the simulated world's interpreter, the rest kept
  hooks.interpret = &SimInterpret;
  SetGlobalHooks(hooks);
  std::vector<Tensor> ins;
  for (size_t i = 0; i < call.sample.in.size(); ++i) {
    ins.push_back(world.Make(Distribute(call.sample.in[i], layout[i], mesh.hierarchy, 0, rng),
                             call.sample.in[i].meta(), pl, layout[i]));
  }
  std::vector<Tensor> outs;
  try {
    outs = global::Interpret(world, call.op, ins, call.sample.attrs);
  } catch (const std::exception& e) {
    return StrCat("threw: ", e.what());
  }
  for (size_t k = 0; k < outs.size() && k < call.full_out.size(); ++k) {
    if (auto e = CheckLocals(Sim(outs[k]).locals, Sim(outs[k]).nd_sbp, call.full_out[k], pl,
                             StrCat("output ", k, " (", SbpString(Sim(outs[k]).nd_sbp), ")"))) {
      return e;
    }
  }
  return std::nullopt;
}

// Failures that are known and not fixed yet, as "op | signature | mesh". Empty: every rule
// holds on every sample.
const std::set<std::string> kExpectedFailures = {};

const Mesh kMeshes[] = {{{2}, "world size 2"}, {{3}, "world size 3"}, {{2, 2}, "2x2 mesh"}};

TEST_CASE("every registered op has a sample and an SBP rule") {
  std::set<std::string> sampled;
  for (const Sample& s : Samples()) sampled.insert(s.op);
  const auto& ops = OpRegistry::Global().ops();
  for (const auto& kv : ops) {
    INFO("op '" << kv.first << "'");
    CHECK(sampled.count(kv.first) == 1);  // add one to MakeSamples()
    CHECK(sbp::FindSbpRule(kv.first) != nullptr);
  }
  for (const std::string& name : sbp::SbpRuleNames()) {
    INFO("SBP rule for '" << name << "'");
    CHECK(ops.count(name) == 1);  // a rule for an op that does not exist
  }
  for (const std::string& name : sampled) {
    INFO("sample of '" << name << "'");
    CHECK(ops.count(name) == 1);
  }
}

TEST_CASE("dropout_mask: each rank's mask is its slice of the one-process mask, kept at 1 - p") {
  // A mask large enough for the keep rate of every shard to mean something: 64 x 48 over up to
  // 4 ranks, p = 0.3 (op_samples' dropout_mask samples have 30 and 120 elements).
  Rng rng(11);
  Attrs attrs;
  attrs.Set("p", 0.3).Set("seed", int64_t{5}).Set("offset", int64_t{0});
  Sample sample{"dropout_mask", "[64, 48] f32", {rng.Floats({64, 48})}, attrs};
  const OpDef& op = OpRegistry::Global().Get("dropout_mask");
  const sbp::SbpRule* rule = sbp::FindSbpRule("dropout_mask");
  REQUIRE(rule != nullptr);
  Call call{sample, op, *rule, op.infer({sample.in[0].meta()}, attrs), {}, {sample.in[0]}};
  call.full_out = RunLocalKernel(op, call.full_in, attrs);
  {
    std::optional<std::string> e = CheckDropoutShard(call.full_out[0], 0.3);
    INFO("the one-process mask: " << e.value_or("ok"));
    REQUIRE(!e);
  }
  const std::vector<TensorMeta> in_metas{sample.in[0].meta()};
  sbp::RuleContext ctx{in_metas, call.out_metas, attrs};
  int64_t split_signatures = 0;
  for (const Mesh& mesh : kMeshes) {
    for (const NdSignature& sig : Combine(*rule, ctx, mesh.hierarchy)) {
      const bool all_b = AllBroadcast(sig.in);
      INFO(ToString(sig) << " on " << mesh.name);
      std::optional<std::string> err = Simulate(call, sig, mesh, /*kernel_only=*/false, rng);
      CHECK(err.value_or("") == "");
      if (all_b) continue;
      bool split = false;
      for (const Sbp& x : sig.in[0]) split = split || x.is_split();
      if (!split) continue;
      ++split_signatures;
      // Each rank drawing a mask for its own shard from the same seed and offset (the local
      // kernel without the rule's lowering) must be caught: the shards repeat the start of the
      // mask instead of holding their slices of it.
      std::optional<std::string> naive = Simulate(call, sig, mesh, /*kernel_only=*/true, rng);
      REQUIRE(naive.has_value());
      CHECK(naive->find("differs from the full computation") != std::string::npos);
    }
  }
  CHECK(split_signatures > 0);
}

TEST_CASE("every signature of every SBP rule matches the full computation") {
  const auto start = std::chrono::steady_clock::now();
  Rng rng(7);
  std::set<std::string> ops_seen;
  int64_t samples = 0, checks = 0, expected = 0;
  std::map<std::string, int64_t> per_mesh;
  int64_t lowered = 0, interpreted = 0;
  std::vector<std::string> failures;
  std::set<std::string> expected_failed;

  for (const Sample& sample : Samples()) {
    const std::string where = StrCat("op '", sample.op, "' [", sample.what, "]");
    const OpDef* op = nullptr;
    try {
      op = &OpRegistry::Global().Get(sample.op);
    } catch (const std::exception& e) {
      failures.push_back(StrCat(where, ": ", e.what()));
      continue;
    }
    const sbp::SbpRule* rule = sbp::FindSbpRule(sample.op);
    if (!rule) {
      failures.push_back(StrCat(where, ": has no SBP rule"));
      continue;
    }
    ops_seen.insert(sample.op);
    // The float16 / bfloat16 samples are there for the CUDA kernels' half paths; split into
    // partial sums they round at every rank, which is not the rule's doing. The rules do not
    // depend on the dtype: their float32 samples check them.
    if (std::any_of(sample.in.begin(), sample.in.end(),
                    [](const Tensor& t) { return IsHalf(t.dtype()); })) {
      continue;
    }
    ++samples;

    std::vector<TensorMeta> in_metas;
    for (const Tensor& t : sample.in) in_metas.push_back(t.meta());
    Call call{sample, *op, *rule, {}, {}, {}};
    try {
      call.out_metas = op->infer(in_metas, sample.attrs);
      for (const Tensor& t : sample.in) call.full_in.push_back(fn::contiguous_copy(t));
      call.full_out = RunLocalKernel(*op, call.full_in, sample.attrs);
    } catch (const std::exception& e) {
      failures.push_back(StrCat(where, ": the sample itself fails: ", e.what()));
      continue;
    }

    sbp::RuleContext ctx{in_metas, call.out_metas, sample.attrs};
    auto record = [&](const std::string& key, const std::string& what,
                      const std::optional<std::string>& err) {
      if (kExpectedFailures.count(key) && err) {
        expected_failed.insert(key);
        ++expected;
      } else if (err) {
        failures.push_back(StrCat(where, ", ", what, ": ", *err));
      }
    };
    for (const Mesh& mesh : kMeshes) {
      for (const NdSignature& sig : Combine(*rule, ctx, mesh.hierarchy)) {
        ++checks;
        ++per_mesh[mesh.name];
        lowered += rule->lower != nullptr;
        std::optional<std::string> err;
        try {
          err = Simulate(call, sig, mesh, /*kernel_only=*/false, rng);
        } catch (const std::exception& e) {
          err = StrCat("threw: ", e.what());
        }
        record(StrCat(sample.op, " | ", ToString(sig), " | ", mesh.name),
               StrCat("signature ", ToString(sig), ", ", mesh.name), err);
      }
      if (!rule->rewrite) continue;
      // The rule rewrites some calls into other global op calls: the whole interpreter, from
      // every uniform layout of the inputs.
      for (const std::vector<NdSbp>& layout : UniformLayouts(sample, mesh.hierarchy.size())) {
        ++checks;
        ++per_mesh[mesh.name];
        ++interpreted;
        NdSignature in_only{layout, {}};
        const std::string sig = ToString(in_only);
        record(StrCat(sample.op, " | ", sig, " | ", mesh.name),
               StrCat("inputs ", sig.substr(0, sig.find(" ->")), " through the interpreter, ",
                      mesh.name),
               SimulateInterpreter(call, layout, mesh, rng));
      }
    }
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "sbp rules validation: %zu ops, %lld samples, %lld signature checks (%lld expected "
      "failures) in %.2f s\n",
      ops_seen.size(), static_cast<long long>(samples), static_cast<long long>(checks),
      static_cast<long long>(expected), secs);
  for (const Mesh& mesh : kMeshes) {
    std::printf("  %s: %lld signatures\n", mesh.name.c_str(),
                static_cast<long long>(per_mesh[mesh.name]));
  }
  std::printf(
      "  of which lowered by the rule: %lld; whole calls through the interpreter (rewrites): "
      "%lld\n",
      static_cast<long long>(lowered), static_cast<long long>(interpreted));
  for (const std::string& f : failures) FAIL_CHECK(f);
  for (const std::string& key : kExpectedFailures) {
    INFO("expected failure '" << key << "'");
    CHECK(expected_failed.count(key) == 1);  // passes now or never ran: update the list
  }
  CHECK(failures.empty());
}

}  // namespace
}  // namespace oneflow
