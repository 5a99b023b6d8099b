// Convolution, pooling, batch norm, softmax and the losses.
#include "core/dispatch.h"
#include "core/functional.h"
#include "sbp/rules.h"

namespace oneflow {
namespace sbp {
namespace {

using namespace shorthand;  // NOLINT: S(axis), B, P, Wrap (sbp/rules.h)

Signature Uniform(const RuleContext& c, Sbp in, Sbp out) {
  return Signature{std::vector<Sbp>(c.in.size(), in), std::vector<Sbp>(c.out.size(), out)};
}

// Output channels split only without groups: with groups, a rank's slice of the weight would
// need the matching group's input channels, and its local kernel would regroup what it holds.
bool Ungrouped(const RuleContext& c) { return c.attrs.Get<int64_t>("groups") == 1; }

// conv2d(x, w, b?): split the batch (weights broadcast) or the output channels (weights split).
std::vector<Signature> Conv2dRule(const RuleContext& c) {
  const bool bias = c.in.size() == 3;
  Signature batch{{S(0), B}, {S(0)}}, channels{{B, S(0)}, {S(1)}};
  if (bias) batch.in.push_back(B), channels.in.push_back(S(0));
  if (!Ungrouped(c)) return {AllBroadcast(c), batch};
  return {AllBroadcast(c), batch, channels};
}
// conv2d_grad_input(dy, w) -> dx; conv2d_grad_weight(dy, x) -> dw.
std::vector<Signature> Conv2dGradInputRule(const RuleContext& c) {
  std::vector<Signature> out{AllBroadcast(c), {{S(0), B}, {S(0)}}};
  if (Ungrouped(c)) out.push_back({{S(1), S(0)}, {P}});
  return out;
}
std::vector<Signature> Conv2dGradWeightRule(const RuleContext& c) {
  std::vector<Signature> out{AllBroadcast(c), {{S(0), S(0)}, {P}}};
  if (Ungrouped(c)) out.push_back({{S(1), B}, {S(0)}});
  return out;
}

// Pools and their gradients work per (sample, channel) plane: split N or C.
std::vector<Signature> PlaneRule(const RuleContext& c) {
  return {AllBroadcast(c), Uniform(c, S(0), S(0)), Uniform(c, S(1), S(1))};
}

// softmax/log_softmax along dim: split any other axis.
std::vector<Signature> SoftmaxRule(const RuleContext& c) {
  std::vector<Signature> out{AllBroadcast(c)};
  int64_t n = c.in[0].shape.ndim(), dim = c.attrs.Get<int64_t>("dim");
  if (dim < 0) dim += n;
  for (int64_t a = 0; a < n; ++a) {
    if (a != dim) out.push_back(Uniform(c, S(a), S(a)));
  }
  return out;
}

// softmax_grad/log_softmax_grad(y, dy): as softmax; and linear in dy, so (B, P) -> P.
std::vector<Signature> SoftmaxGradRule(const RuleContext& c) {
  std::vector<Signature> out = SoftmaxRule(c);
  out.push_back({{B, P}, {P}});
  return out;
}

// nll_loss(log_probs [N, C, ...], target [N, ...]): split the batch. 'none' keeps it split,
// 'sum' leaves partial sums; 'mean' is rewritten into a sum and a global count (MeanAsSum).
std::vector<Signature> NllLossRule(const RuleContext& c) {
  std::vector<Signature> out{AllBroadcast(c)};
  if (c.in[0].shape.ndim() < 2) return out;
  const std::string& reduction = c.attrs.Get<std::string>("reduction");
  if (reduction == "none") out.push_back({{S(0), S(0)}, {S(0)}});
  if (reduction == "sum") out.push_back({{S(0), S(0)}, {P}});
  return out;
}
// nll_loss_grad(dy, target) -> d log_probs.
std::vector<Signature> NllLossGradRule(const RuleContext& c) {
  std::vector<Signature> out{AllBroadcast(c)};
  if (c.out[0].shape.ndim() < 2) return out;
  const std::string& reduction = c.attrs.Get<std::string>("reduction");
  if (reduction == "none") out.push_back({{S(0), S(0)}, {S(0)}});
  if (reduction == "sum") out.push_back({{B, S(0)}, {S(0)}});
  return out;
}

// nll_loss(_grad) 'mean' on inputs that are not all broadcast: the local kernel would divide by
// the local count, so the call is the 'sum' over the shards divided by the number of counted
// targets of the whole batch (a global sum: its partial sums are reduced for the division).
bool MeanAsSum(const GlobalCall& c, std::vector<Tensor>* out) {
  if (c.attrs.Get<std::string>("reduction") != "mean") return false;
  bool all_b = true;
  for (const NdSbp& nd : c.in_sbps) {
    for (const Sbp& s : nd) all_b &= s.is_broadcast();
  }
  if (all_b) return false;
  Attrs a = c.attrs;
  a.Set("reduction", std::string("sum"));
  Tensor sum = CallOp1(c.op, c.in, a);
  const double ignore = static_cast<double>(c.attrs.Get<int64_t>("ignore_index"));
  Tensor valid = fn::ne(c.in[1], fn::constant_like(c.in[1], Shape(), ignore, DType::kInt64));
  *out = {fn::div(sum, fn::sum(fn::to_dtype(valid, sum.dtype())))};
  return true;
}

SbpRule MeanAsSumRule(RuleFn candidates) {
  SbpRule r;
  r.candidates = std::move(candidates);
  r.rewrite = MeanAsSum;
  return r;
}

// cross_entropy(logits [N, C], target [N]) -> (loss, lse [N]): split the batch as nll_loss;
// cross_entropy_grad(dy, logits, target, lse) -> dlogits likewise. 'mean' on split inputs is
// the 'sum' divided by the global count of kept targets (CrossEntropyMeanAsSum).
std::vector<Signature> CrossEntropyRule(const RuleContext& c) {
  std::vector<Signature> out{AllBroadcast(c)};
  if (c.in[0].shape.ndim() < 2) return out;
  const std::string& reduction = c.attrs.Get<std::string>("reduction");
  if (reduction == "none") out.push_back({{S(0), S(0)}, {S(0), S(0)}});
  if (reduction == "sum") out.push_back({{S(0), S(0)}, {P, S(0)}});
  return out;
}
std::vector<Signature> CrossEntropyGradRule(const RuleContext& c) {
  std::vector<Signature> out{AllBroadcast(c)};
  if (c.in[1].shape.ndim() < 2) return out;
  const std::string& reduction = c.attrs.Get<std::string>("reduction");
  if (reduction == "none") out.push_back({{S(0), S(0), S(0), S(0)}, {S(0)}});
  if (reduction == "sum") out.push_back({{B, S(0), S(0), S(0)}, {S(0)}});
  return out;
}

// As MeanAsSum for ops whose target is input `target_input` and whose other outputs (lse) do
// not depend on the reduction: output 0 is the 'sum' divided by the global count.
bool CrossEntropyMeanAsSum(const GlobalCall& c, std::vector<Tensor>* out, size_t target_input) {
  if (c.attrs.Get<std::string>("reduction") != "mean") return false;
  bool all_b = true;
  for (const NdSbp& nd : c.in_sbps) {
    for (const Sbp& s : nd) all_b &= s.is_broadcast();
  }
  if (all_b) return false;
  Attrs a = c.attrs;
  a.Set("reduction", std::string("sum"));
  std::vector<Tensor> in = c.in;
  if (target_input == 2) {
    // The gradient is linear in dy: dy / count with 'sum' is the 'mean' gradient.
    const double ignore = static_cast<double>(c.attrs.Get<int64_t>("ignore_index"));
    Tensor valid = fn::ne(c.in[2], fn::constant_like(c.in[2], Shape(), ignore, DType::kInt64));
    in[0] = fn::div(in[0], fn::sum(fn::to_dtype(valid, in[0].dtype())));
    *out = CallOp(c.op, in, a);
    return true;
  }
  std::vector<Tensor> r = CallOp(c.op, in, a);
  const double ignore = static_cast<double>(c.attrs.Get<int64_t>("ignore_index"));
  Tensor valid = fn::ne(c.in[1], fn::constant_like(c.in[1], Shape(), ignore, DType::kInt64));
  r[0] = fn::div(r[0], fn::sum(fn::to_dtype(valid, r[0].dtype())));
  *out = r;
  return true;
}

SbpRule CrossEntropySbpRule() {
  SbpRule r;
  r.candidates = CrossEntropyRule;
  r.rewrite = [](const GlobalCall& c, std::vector<Tensor>* out) {
    return CrossEntropyMeanAsSum(c, out, 1);
  };
  return r;
}
SbpRule CrossEntropyGradSbpRule() {
  SbpRule r;
  r.candidates = CrossEntropyGradRule;
  r.rewrite = [](const GlobalCall& c, std::vector<Tensor>* out) {
    return CrossEntropyMeanAsSum(c, out, 2);
  };
  return r;
}

// batch_norm_elemt(x, mean, invstd, w, b) normalizes with given statistics: split the batch.
std::vector<Signature> BatchNormElemtRule(const RuleContext& c) {
  Signature batch = Uniform(c, B, S(0));
  batch.in[0] = S(0);
  return {AllBroadcast(c), batch};
}

// layer_norm(x, w, b) -> (y, mean, rstd): split any leading (not normalized) axis of x, with
// the weights whole. Its backward (dy, x, mean, rstd, w) -> (dx, dw, db) sums dw and db over
// the rows: partial sums where the rows are split; all of it is linear in dy.
std::vector<Signature> LayerNormRule(const RuleContext& c) {
  const int64_t lead = c.in[0].shape.ndim() - c.attrs.Get<int64_t>("normalized_ndim");
  std::vector<Signature> out{AllBroadcast(c)};
  for (int64_t a = 0; a < lead; ++a) out.push_back({{S(a), B, B}, {S(a), S(a), S(a)}});
  return out;
}
std::vector<Signature> LayerNormGradRule(const RuleContext& c) {
  const int64_t lead = c.in[1].shape.ndim() - c.attrs.Get<int64_t>("normalized_ndim");
  std::vector<Signature> out{AllBroadcast(c), {{P, B, B, B, B}, {P, P, P}}};
  for (int64_t a = 0; a < lead; ++a) out.push_back({{S(a), S(a), S(a), S(a), B}, {S(a), P, P}});
  return out;
}

// rms_norm(x, w) -> (y, rstd) and rms_norm_grad(dy, x, rstd, w) -> (dx, dw): as layer_norm.
std::vector<Signature> RmsNormRule(const RuleContext& c) {
  const int64_t lead = c.in[0].shape.ndim() - c.attrs.Get<int64_t>("normalized_ndim");
  std::vector<Signature> out{AllBroadcast(c)};
  for (int64_t a = 0; a < lead; ++a) out.push_back({{S(a), B}, {S(a), S(a)}});
  return out;
}
std::vector<Signature> RmsNormGradRule(const RuleContext& c) {
  const int64_t lead = c.in[1].shape.ndim() - c.attrs.Get<int64_t>("normalized_ndim");
  std::vector<Signature> out{AllBroadcast(c), {{P, B, B, B}, {P, P}}};
  for (int64_t a = 0; a < lead; ++a) out.push_back({{S(a), S(a), S(a), B}, {S(a), P}});
  return out;
}
// scaled_dot_product_attention(q, k, v[, mask]) -> (out, lse): split a batch axis of q, k and v
// (the mask split along it where it has it at full size, B where it broadcasts). With dropout
// only axis 0: each rank draws its rows' part of the logical weights' mask (AttentionShard
// gives its kernel the flat batch index its rows start at). The backward
// (dout, q, k, v, out, lse[, mask]) -> (dq, dk, dv) splits the same way and is linear in dout.
Sbp AttentionMaskSbp(const RuleContext& c, size_t mask_at, int64_t n, int64_t a) {
  const Shape& m = c.in[mask_at].shape;
  const int64_t ma = a - (n - m.ndim());
  return ma >= 0 && m[ma] != 1 ? S(ma) : B;
}
std::vector<Signature> AttentionSplits(const RuleContext& c, size_t q_at) {
  const int64_t n = c.in[q_at].shape.ndim();
  const bool dropout = c.attrs.Get<double>("dropout_p") > 0;
  const size_t mask_at = q_at + (q_at == 0 ? 3 : 5);
  std::vector<Signature> out;
  for (int64_t a = 0; a < n - 2 && (!dropout || a == 0); ++a) {
    Signature s{std::vector<Sbp>(mask_at, S(a)), std::vector<Sbp>(c.out.size(), S(a))};
    if (c.in.size() > mask_at) s.in.push_back(AttentionMaskSbp(c, mask_at, n, a));
    out.push_back(std::move(s));
  }
  return out;
}
std::vector<Signature> AttentionRule(const RuleContext& c) {
  std::vector<Signature> out{AllBroadcast(c)};
  for (Signature& s : AttentionSplits(c, 0)) out.push_back(std::move(s));
  return out;
}
std::vector<Signature> AttentionGradRule(const RuleContext& c) {
  std::vector<Signature> out{AllBroadcast(c)};
  Signature linear{std::vector<Sbp>(c.in.size(), B), {P, P, P}};
  linear.in[0] = P;
  out.push_back(std::move(linear));
  for (Signature& s : AttentionSplits(c, 1)) out.push_back(std::move(s));
  return out;
}
// The rank's kernel with attr batch_offset: where its batch rows start in the logical batch.
LocalAttrsFn AttentionShard(size_t q_at) {
  return [q_at](const ShardCall& call, Attrs* local) {
    if (call.attrs.Get<double>("dropout_p") <= 0) return false;
    const Shape& q = call.in[q_at].shape;
    if (q.ndim() <= 2) return false;
    const auto ranges = LocalRanges(q, call.placement.hierarchy(), call.in_sbps[q_at],
                                    call.placement.Coord(call.rank));
    int64_t inner = 1;
    for (int64_t a = 1; a < q.ndim() - 2; ++a) inner *= q[a];
    *local = call.attrs;
    local->Set("batch_offset", call.attrs.Get<int64_t>("batch_offset") + ranges[0].first * inner);
    return true;
  };
}
SbpRule AttentionSbpRule(RuleFn candidates, size_t q_at) {
  SbpRule r;
  r.candidates = std::move(candidates);
  r.local_attrs = AttentionShard(q_at);
  return r;
}

}  // namespace

ONEFLOW_REGISTER_SBP_RULE(layer_norm, LayerNormRule);
ONEFLOW_REGISTER_SBP_RULE(rms_norm, RmsNormRule);
ONEFLOW_REGISTER_SBP_RULE(rms_norm_grad, RmsNormGradRule);
ONEFLOW_REGISTER_SBP_RULE(layer_norm_grad, LayerNormGradRule);
ONEFLOW_REGISTER_SBP_RULE(scaled_dot_product_attention, AttentionSbpRule(AttentionRule, 0));
ONEFLOW_REGISTER_SBP_RULE(scaled_dot_product_attention_grad,
                          AttentionSbpRule(AttentionGradRule, 1));
ONEFLOW_REGISTER_SBP_RULE(conv2d, Conv2dRule);
ONEFLOW_REGISTER_SBP_RULE(conv2d_grad_input, Conv2dGradInputRule);
ONEFLOW_REGISTER_SBP_RULE(conv2d_grad_weight, Conv2dGradWeightRule);
ONEFLOW_REGISTER_SBP_RULE(max_pool2d, PlaneRule);
ONEFLOW_REGISTER_SBP_RULE(max_pool2d_grad, PlaneRule);
ONEFLOW_REGISTER_SBP_RULE(avg_pool2d, PlaneRule);
ONEFLOW_REGISTER_SBP_RULE(avg_pool2d_grad, PlaneRule);
ONEFLOW_REGISTER_SBP_RULE(adaptive_avg_pool2d, PlaneRule);
ONEFLOW_REGISTER_SBP_RULE(adaptive_avg_pool2d_grad, PlaneRule);
ONEFLOW_REGISTER_SBP_RULE(softmax, SoftmaxRule);
ONEFLOW_REGISTER_SBP_RULE(log_softmax, SoftmaxRule);
ONEFLOW_REGISTER_SBP_RULE(softmax_grad, SoftmaxGradRule);
ONEFLOW_REGISTER_SBP_RULE(log_softmax_grad, SoftmaxGradRule);
ONEFLOW_REGISTER_SBP_RULE(nll_loss, MeanAsSumRule(NllLossRule));
ONEFLOW_REGISTER_SBP_RULE(nll_loss_grad, MeanAsSumRule(NllLossGradRule));
ONEFLOW_REGISTER_SBP_RULE(cross_entropy, CrossEntropySbpRule());
ONEFLOW_REGISTER_SBP_RULE(cross_entropy_grad, CrossEntropyGradSbpRule());
// The fused training kernel needs statistics over the whole batch: broadcast. nn.BatchNorm on a
// split global batch does not come here: it computes the statistics with global reductions and
// normalises with batch_norm_elemt, which splits (oneflow/nn/modules/batchnorm.py).
ONEFLOW_REGISTER_SBP_RULE(batch_norm_train, BroadcastOnly);
ONEFLOW_REGISTER_SBP_RULE(batch_norm_train_grad, BroadcastOnly);
ONEFLOW_REGISTER_SBP_RULE(batch_norm_elemt, BatchNormElemtRule);
ONEFLOW_REGISTER_SBP_RULE(batch_norm_elemt_grad, BroadcastOnly);

}  // namespace sbp
}  // namespace oneflow
