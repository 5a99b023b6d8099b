// Data-parallel linear regression with global tensors from C++: every rank holds the weight
// broadcast (B) and its share of the batch (S(0)); the gradient of B arrives partial and is
// all-reduced by boxing, so the loop below is the one-process loop.
//
//   tools/python -m oneflow.distributed.launch --nproc_per_node 2 --no_python \
//       bazel-bin/examples/global_linear_regression
#include <cstdio>
#include <numeric>

#include "oneflow/api/cpp/oneflow.h"

using namespace oneflow;  // NOLINT: an example

int main() {
  runtime::Env& env = runtime::Env::Get();
  std::vector<int> ranks(env.world_size());
  std::iota(ranks.begin(), ranks.end(), 0);
  sbp::Placement world(DeviceType::kCPU, ranks);
  const sbp::NdSbp S0 = {sbp::Sbp::Split(0)}, B = {sbp::Sbp::Broadcast()};

  fn::manual_seed(0);  // the same data on every rank; each keeps its rows
  Tensor x = global::FromWhole(fn::rand({64, 2}), world, S0);
  Tensor true_w = fn::reshape(fn::arange(2, 4, 1, DType::kFloat32), {2, 1});  // [[2], [3]]
  Tensor y = fn::matmul(x, global::LocalToGlobal(true_w, world, B));

  Tensor w = global::LocalToGlobal(fn::zeros({2, 1}), world, B);
  w.set_requires_grad(true);
  optim::SGDOptions options;
  options.lr = 0.5;
  options.momentum = 0.9;
  optim::SGD opt({w}, options);

  for (int step = 1; step <= 200; ++step) {
    Tensor loss = fn::mse_loss(fn::matmul(x, w), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (step % 50 == 0) {
      Tensor whole = global::ToLocal(global::ToGlobal(loss, world, B));
      if (env.rank() == 0) std::printf("step %d loss %.3e\n", step, whole.data<float>()[0]);
    }
  }
  const float* p = fn::contiguous(global::ToLocal(w)).data<float>();
  std::printf("rank %d of %d: w = [[%.4f], [%.4f]]\n", env.rank(), env.world_size(), p[0], p[1]);
  return (p[0] > 1.99f && p[0] < 2.01f && p[1] > 2.99f && p[1] < 3.01f) ? 0 : 1;
}
