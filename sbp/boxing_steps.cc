#include "sbp/boxing_steps.h"

#include <array>

#include "core/error.h"

namespace oneflow {
namespace sbp {
namespace {

double Fraction(int64_t n) { return static_cast<double>(n - 1) / static_cast<double>(n); }
double Free(double, int64_t) { return 0; }

constexpr int kKinds = static_cast<int>(BoxingKind::kCount);

constexpr std::array<BoxingStep, kKinds> kSteps = {{
    {BoxingKind::kAllReduce, "all_reduce",
     [](const Sbp& f, const Sbp& t) { return f.is_partial() && t.is_broadcast(); },
     [](double bytes, int64_t n) { return 2 * bytes * Fraction(n); }, true},
    {BoxingKind::kAllGather, "all_gather",
     [](const Sbp& f, const Sbp& t) { return f.is_split() && t.is_broadcast(); },
     [](double bytes, int64_t n) { return bytes * Fraction(n); }, true},
    {BoxingKind::kReduceScatter, "reduce_scatter",
     [](const Sbp& f, const Sbp& t) { return f.is_partial() && t.is_split(); },
     [](double bytes, int64_t n) { return bytes * Fraction(n); }, true},
    {BoxingKind::kAllToAll, "all_to_all",
     [](const Sbp& f, const Sbp& t) { return f.is_split() && t.is_split(); },
     [](double bytes, int64_t n) { return bytes * Fraction(n) / static_cast<double>(n); }, true},
    {BoxingKind::kSlice, "local slice",
     [](const Sbp& f, const Sbp& t) { return f.is_broadcast() && t.is_split(); }, Free, false},
    {BoxingKind::kKeepOnFirst, "local: first rank keeps, others zero",
     [](const Sbp& f, const Sbp& t) { return f.is_broadcast() && t.is_partial(); }, Free, false},
    {BoxingKind::kZeroPad, "local zero pad",
     [](const Sbp& f, const Sbp& t) { return f.is_split() && t.is_partial(); }, Free, false},
    {BoxingKind::kRoute, "point-to-point pieces", nullptr, Free, false},
}};

// The table is indexed by kind.
constexpr bool InKindOrder() {
  for (int i = 0; i < kKinds; ++i) {
    if (static_cast<int>(kSteps[i].kind) != i) return false;
  }
  return true;
}
static_assert(InKindOrder(), "kSteps must list the kinds in BoxingKind's order");

}  // namespace

const BoxingStep& Step(BoxingKind kind) { return kSteps[static_cast<int>(kind)]; }

const BoxingStep& StepFor(const Sbp& from, const Sbp& to) {
  for (const BoxingStep& s : kSteps) {
    if (s.turns && s.turns(from, to)) return s;
  }
  throw Error(StrCat("boxing: no step turns ", from.ToString(), " into ", to.ToString()));
}

double BoxingCost(const Sbp& from, const Sbp& to, double bytes, int64_t n) {
  if (from == to || n == 1) return 0;
  return StepFor(from, to).cost(bytes, n);
}

}  // namespace sbp
}  // namespace oneflow
