// Linear regression with the C++ API: fits y = 2 x1 + 3 x2 with SGD, the C++ twin of the
// OneFlow tutorial's first example.
//
//   bazel run //examples:linear_regression
#include <cstdio>

#include "core/functional.h"
#include "core/optim.h"

using oneflow::Shape;
using oneflow::Tensor;
namespace fn = oneflow::fn;
namespace optim = oneflow::optim;

int main() {
  fn::manual_seed(0);
  Tensor x = fn::rand({64, 2});
  Tensor true_w = fn::reshape(fn::arange(2, 4, 1, oneflow::DType::kFloat32), {2, 1});  // [[2], [3]]
  Tensor y = fn::matmul(x, true_w);

  Tensor w = fn::zeros({2, 1});
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
      std::printf("step %d loss %.3e\n", step, fn::contiguous(loss).data<float>()[0]);
    }
  }
  const float* p = fn::contiguous(w).data<float>();
  std::printf("w = [[%.4f], [%.4f]]\n", p[0], p[1]);
  return (p[0] > 1.99f && p[0] < 2.01f && p[1] > 2.99f && p[1] < 3.01f) ? 0 : 1;
}
