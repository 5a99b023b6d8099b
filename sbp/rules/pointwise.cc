// Elementwise ops: a common split along any output axis, and P through the linear ones
// (add/sub of P and P, P * B, B * P, P / B for floats, -P, copy of P and the casts that keep
// sums), never for bool tensors.
#include "core/dispatch.h"
#include "core/functional.h"
#include "core/ops/unary_functors.h"
#include "sbp/rules.h"

namespace oneflow {
namespace sbp {

namespace {

using namespace shorthand;  // NOLINT: S(axis), B, P, Wrap (sbp/rules.h)

// The mask takes its input's layout (a partial sum's is B): the input's values are unused, so
// nothing is boxed.
std::vector<Signature> DropoutMaskRule(const RuleContext& c) {
  static const RuleFn pointwise = Pointwise();
  std::vector<Signature> out = pointwise(c);
  out.push_back({{P}, {B}});
  return out;
}
// The mask is drawn from (seed, offset) over the logical tensor's elements: each rank draws
// only its slice, at its elements' logical positions (the kernel's shard window attrs), so it
// is the mask one process would draw. The input only gives the shard's shape (the mask's: a
// signature keeps the input's layout, or reads P as B, which has the same shard shape).
std::vector<Tensor> WholeMaskSliced(const OpDef& op, const ShardCall& call,
                                    const std::vector<Tensor>& locals) {
  const auto ranges = LocalRanges(call.in[0].shape, call.placement.hierarchy(), call.out_sbps[0],
                                  call.placement.Coord(call.rank));
  std::vector<int64_t> start;
  for (const auto& r : ranges) start.push_back(r.first);
  Attrs a = call.attrs;
  a.Set("logical_shape", call.in[0].shape.dims()).Set("shard_start", start);
  return RunLocalKernel(op, {locals[0]}, a);
}

// P / B is P only for true division: integer division truncates each part.
std::vector<Signature> DivRule(const RuleContext& c) {
  if (IsFloating(c.out[0].dtype)) return Pointwise({{0}})(c);
  return Pointwise()(c);
}

// A cast keeps a partial sum only where the cast of a sum is the sum of the casts: between
// number types, and not from floating to integer (each part would be truncated). Pointwise
// already refuses bool, whose partial sum is an OR.
std::vector<Signature> CastRule(const RuleContext& c) {
  if (IsFloating(c.in[0].dtype) && !IsFloating(c.out[0].dtype)) return Pointwise()(c);
  return Pointwise({{0}})(c);
}

// An optimizer update: one common split of the parameter-shaped inputs, the 0-dim ones B.
std::vector<Signature> UpdateRule(const RuleContext& c) {
  std::vector<Signature> out{AllBroadcast(c)};
  for (int64_t a = 0; a < c.in[0].shape.ndim(); ++a) {
    Signature s{{}, std::vector<Sbp>(c.out.size(), S(a))};
    for (const TensorMeta& m : c.in) s.in.push_back(m.shape.ndim() == 0 ? B : S(a));
    out.push_back(std::move(s));
  }
  return out;
}
// Every input keeps its Sbp (the longest update takes 13 tensors).
const std::vector<int> kUpdateInputs = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
// The multi-tensor updates take any number of records: every input keeps its Sbp.
const std::vector<int> kMultiUpdateInputs = [] {
  std::vector<int> all(4096);
  for (int i = 0; i < 4096; ++i) all[i] = i;
  return all;
}();

}  // namespace

ONEFLOW_REGISTER_SBP_RULE(add, Pointwise({{0, 1}}));
ONEFLOW_REGISTER_SBP_RULE(sub, Pointwise({{0, 1}}));
ONEFLOW_REGISTER_SBP_RULE(mul, Pointwise({{0}, {1}}));
ONEFLOW_REGISTER_SBP_RULE(div, DivRule);
ONEFLOW_REGISTER_SBP_RULE(neg, Pointwise({{0}}));
ONEFLOW_REGISTER_SBP_RULE(copy, Pointwise({{0}}));
ONEFLOW_REGISTER_SBP_RULE(cast, CastRule);
// relu_grad(dy, x) and gelu_grad(dy, x) are linear in dy.
ONEFLOW_REGISTER_SBP_RULE(relu_grad, Pointwise({{0}}));
ONEFLOW_REGISTER_SBP_RULE(gelu_grad, Pointwise({{0}}));

// Not linear: a partial sum must be reduced first.
ONEFLOW_REGISTER_SBP_RULE(abs, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(clamp, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(exp, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(log, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(gelu, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(relu, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(rsqrt, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(sigmoid, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(sign, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(sqrt, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(square, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(tanh, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(pow, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(maximum, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(minimum, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(remainder, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(where, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(eq, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(ne, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(lt, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(le, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(gt, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(ge, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(logical_and, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(logical_or, Pointwise());
ONEFLOW_REGISTER_SBP_RULE(logical_not, Pointwise());
// The unary table (core/ops/unary_functors.h): f(x) needs a whole value, its gradient
// dy * f'(x) is linear in dy.
#define ONEFLOW_REGISTER_TABLE_RULES(name, F, lo, hi) \
  ONEFLOW_REGISTER_SBP_RULE(name, Pointwise());       \
  ONEFLOW_REGISTER_SBP_RULE(name##_grad, Pointwise({{0}}));
ONEFLOW_UNARY_TABLE_OPS(ONEFLOW_REGISTER_TABLE_RULES)
#undef ONEFLOW_REGISTER_TABLE_RULES
ONEFLOW_REGISTER_SBP_RULE(dropout_mask, (SbpRule{DropoutMaskRule, {}, "", {}, WholeMaskSliced}));

// Creation ops take no tensor: the global API builds them whole and slices.
ONEFLOW_REGISTER_SBP_RULE(full, BroadcastOnly);
ONEFLOW_REGISTER_SBP_RULE(arange, BroadcastOnly);
ONEFLOW_REGISTER_SBP_RULE(eye, BroadcastOnly);
ONEFLOW_REGISTER_SBP_RULE(normal, BroadcastOnly);
ONEFLOW_REGISTER_SBP_RULE(uniform, BroadcastOnly);
ONEFLOW_REGISTER_SBP_RULE(randint, BroadcastOnly);
ONEFLOW_REGISTER_SBP_RULE(randperm, BroadcastOnly);

// Optimizer updates (core/optim.h) write parameter and state in place: all share the
// parameter's Sbp; their 0-dim hyper-parameters and step counts are B. LAMB's trust ratio
// needs the whole parameter's norms: B only.
ONEFLOW_REGISTER_SBP_RULE(sgd_update, (SbpRule{UpdateRule, kUpdateInputs}));
ONEFLOW_REGISTER_SBP_RULE(adam_update, (SbpRule{UpdateRule, kUpdateInputs}));
ONEFLOW_REGISTER_SBP_RULE(adagrad_update, (SbpRule{UpdateRule, kUpdateInputs}));
ONEFLOW_REGISTER_SBP_RULE(rmsprop_update, (SbpRule{UpdateRule, kUpdateInputs}));
ONEFLOW_REGISTER_SBP_RULE(adadelta_update, (SbpRule{UpdateRule, kUpdateInputs}));
ONEFLOW_REGISTER_SBP_RULE(ftrl_update, (SbpRule{UpdateRule, kUpdateInputs}));
ONEFLOW_REGISTER_SBP_RULE(lamb_update, (SbpRule{BroadcastOnly, kUpdateInputs}));
ONEFLOW_REGISTER_SBP_RULE(multi_tensor_sgd_update, (SbpRule{UpdateRule, kMultiUpdateInputs}));
ONEFLOW_REGISTER_SBP_RULE(multi_tensor_adam_update, (SbpRule{UpdateRule, kMultiUpdateInputs}));

}  // namespace sbp
}  // namespace oneflow
