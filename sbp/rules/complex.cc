// view_as_real / view_as_complex (core/ops/complex.h): the (..., 2) pair axis is never split;
// every other axis splits alike on both sides, and a partial sum stays one (both are linear).
#include "sbp/rules.h"

namespace oneflow {
namespace sbp {

namespace {

using namespace shorthand;  // NOLINT: S(axis), B, P (sbp/rules.h)

std::vector<Signature> PairViewRule(const RuleContext& c) {
  const int64_t shared = std::min(c.in[0].shape.ndim(), c.out[0].shape.ndim());
  std::vector<Signature> out{AllBroadcast(c)};
  for (int64_t a = 0; a < shared; ++a) out.push_back({{S(a)}, {S(a)}});
  out.push_back({{P}, {P}});
  return out;
}

}  // namespace

ONEFLOW_REGISTER_SBP_RULE(view_as_real, PairViewRule);
ONEFLOW_REGISTER_SBP_RULE(view_as_complex, PairViewRule);

}  // namespace sbp
}  // namespace oneflow
