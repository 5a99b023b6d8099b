// Rewrites of a traced nn.Graph plan (oneflow/graph/plan.h) before its first replay, each a
// pass that checks every precondition on the traced tensors and keeps the replay's results
// (bit for bit, or within float rounding where a fused kernel orders its sums differently):
//
//   linear [-> relu]:  one oneDNN matmul primitive whose bias add (and relu) are applied as it
//                    writes the output, the relu when the linear's output has no reader but it
//                    (float32, local CPU tensors only; global steps go through the global
//                    interpreter as traced). A lone linear gains too, above a tiny product
//                    (32^3 multiply-adds): the primitive reads the weight transposed faster
//                    than sgemm and needs no bias rows copied first.
//   matmul or sum over dim 0 -> sgd_update with momentum:  the gradient's GEMM (a weight's
//                    a @ b, a bias's ones @ x) accumulates into the momentum buffer (alpha
//                    1 - dampening, beta momentum) and the update reads the buffer (p -= lr *
//                    buf), when the gradient has no other reader and the update has no weight
//                    decay, nesterov or maximize (checked on every replay: an attr changed by
//                    SetAttr runs the two steps as traced). Where nothing reads or writes the
//                    parameter between the GEMM and the update, the update follows the GEMM at
//                    once (the buffer still in cache); a 2-D permute that only feeds the GEMM
//                    (autograd's g.T) becomes the GEMM's own transposed read.
//
// A pass keeps every step at its index (the optimizer's updates are addressed by index): a
// step whose work moved into another becomes an empty step that Describe marks.
//
//   GraphPlan plan("G");  ...  plan.EndTrace({y});   // runs the passes
//   { graph::PlanPassesOff off;  ... }              // traces inside compile unrewritten (tests)
#pragma once

namespace oneflow {
namespace graph {

class GraphPlan;

// Friend of GraphPlan: the passes read and rewrite its steps.
struct PlanPasses {
  // REQUIRES: called by EndTrace, after the outputs' slots are known and before the frees are
  // placed; the trace's tensors are still held.
  static void Run(GraphPlan& plan);
  static void FuseLinearRelu(GraphPlan& plan);
  static void FuseMatmulMomentum(GraphPlan& plan);

  // Who reads and writes each slot, which slots something outside the steps sees (inputs,
  // outputs, captured state) and which share their memory with another slot (passes.cc).
  struct SlotUses;
  static SlotUses Uses(const GraphPlan& plan);
};

// While one lives, EndTrace on this thread leaves the plan as traced (to compare a rewritten
// replay against the plain one).
class PlanPassesOff {
 public:
  PlanPassesOff();
  ~PlanPassesOff();
  PlanPassesOff(const PlanPassesOff&) = delete;
  PlanPassesOff& operator=(const PlanPassesOff&) = delete;

 private:
  bool outer_;
};

}  // namespace graph
}  // namespace oneflow
