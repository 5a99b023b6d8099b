// Gradients through the C++ API's layout changes, on 2 ranks under the launcher
// (tests/python/test_global.py runs it): ToGlobal / LocalToGlobal / ToLocal are differentiable,
// the gradient being the reverse layout change. Exits non-zero, naming the case, on a mismatch.
//   python3 -m oneflow.distributed.launch --nproc_per_node 2 --no_python \
//       bazel-bin/tests/global/layout_grad
#include <cmath>
#include <cstdio>
#include <string>

#include "oneflow/api/cpp/oneflow.h"

using namespace oneflow;  // NOLINT: a test program

namespace {

int failures = 0;

void Expect(const Tensor& got, const std::vector<float>& want, const std::string& what) {
  Tensor c = fn::contiguous(got);
  bool ok = c.defined() && c.numel() == static_cast<int64_t>(want.size());
  for (int64_t i = 0; ok && i < c.numel(); ++i) ok = std::fabs(c.data<float>()[i] - want[i]) < 1e-6;
  if (!ok) {
    std::printf("rank %d: %s: wrong gradient\n", runtime::Env::Get().rank(), what.c_str());
    ++failures;
  }
}

}  // namespace

int main() {
  oneflow::Init();
  const int rank = runtime::Env::Get().rank();
  sbp::Placement world(DeviceType::kCPU, {0, 1});
  const sbp::NdSbp B = {sbp::Sbp::Broadcast()}, S0 = {sbp::Sbp::Split(0)},
                   S1 = {sbp::Sbp::Split(1)};

  // 1. A local tensor per rank -> global S(0) -> a global loss: each rank gets the gradient of
  //    its own rows, sum(g * g)' = 2 g.
  Tensor x = fn::full(Shape({2, 3}), rank + 1.0);
  x.set_requires_grad(true);
  Tensor g = global::LocalToGlobal(x, world, S0);
  fn::sum(fn::mul(g, g)).backward();
  const float two_x = 2.0f * (rank + 1);
  Expect(x.grad(), std::vector<float>(6, two_x), "local -> S(0) -> global loss");

  // 2. A broadcast parameter -> S(1) -> this rank's columns -> a local loss weighted by rank + 1:
  //    the gradient all-gathers back to B, columns of rank 0 weighted 1, of rank 1 weighted 2.
  Tensor w = global::LocalToGlobal(fn::zeros({2, 4}), world, B);
  w.set_requires_grad(true);
  Tensor mine = global::ToLocal(global::ToGlobal(w, world, S1));
  fn::sum(fn::mul_scalar(mine, rank + 1.0)).backward();
  Expect(global::ToLocal(w.grad()), {1, 1, 2, 2, 1, 1, 2, 2}, "B -> S(1) -> local loss");

  // 3. A partial sum handed to B: each rank's part sees the whole gradient (P reads as B).
  Tensor p =
      global::LocalToGlobal(fn::full(Shape({3}), rank + 1.0), world, {sbp::Sbp::PartialSum()});
  p.set_requires_grad(true);
  Tensor whole = global::ToGlobal(p, world, B);  // (1 + 2) everywhere
  fn::sum(fn::mul(whole, whole)).backward();     // d/dp = 2 * 3
  // The leaf's gradient takes the leaf's layout (P): its logical value is 6 everywhere.
  Expect(global::ToLocal(global::ToGlobal(p.grad(), world, B)), {6, 6, 6}, "P -> B -> global loss");

  std::printf("rank %d layout gradients %s\n", rank, failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
