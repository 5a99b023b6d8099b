// Optimizers against their update rules written out by hand (OneFlow's formulas).
#include "core/optim.h"

#include "tests/test_util.h"

namespace oneflow {
namespace {

using testing::CheckClose;
using testing::FromVector;
using testing::ToVector;

// Gradient of sum(p^2 * c) is 2 c p: a fixed quadratic loss.
void Backward(const Tensor& p) {
  fn::sum(fn::mul(fn::mul(p, p), FromVector({1, 2, 3}, {3}, p.dtype()))).backward();
}

TEST_CASE("SGD with momentum, dampening, nesterov and weight decay") {
  for (bool nesterov : {false, true}) {
    Tensor p = FromVector({1, -2, 0.5}, {3}, DType::kFloat64).set_requires_grad(true);
    optim::SGDOptions o;
    o.lr = 0.1;
    o.momentum = 0.9;
    o.dampening = 0.2;  // OneFlow allows nesterov with dampening
    o.weight_decay = 0.01;
    o.nesterov = nesterov;
    optim::SGD opt({p}, o);
    std::vector<double> ref = {1, -2, 0.5}, buf(3);
    const double c[3] = {1, 2, 3};
    for (int step = 0; step < 4; ++step) {
      opt.zero_grad();
      Backward(p);
      opt.step();
      for (int i = 0; i < 3; ++i) {
        double d = 2 * c[i] * ref[i] + o.weight_decay * ref[i];
        buf[i] = o.momentum * buf[i] + (1 - o.dampening) * d;  // the buffer starts at 0
        ref[i] -= o.lr * (nesterov ? d + o.momentum * buf[i] : buf[i]);
      }
      CheckClose(p, ref, 1e-12);
    }
  }
}

TEST_CASE("Adam and AdamW") {
  for (bool decoupled : {false, true}) {
    Tensor p = FromVector({1, -2, 0.5}, {3}, DType::kFloat64).set_requires_grad(true);
    optim::AdamOptions o;
    o.lr = 0.05;
    o.weight_decay = 0.1;
    optim::Adam opt({p}, o, decoupled);
    std::vector<double> ref = {1, -2, 0.5}, m(3), v(3);
    const double c[3] = {1, 2, 3};
    for (int t = 1; t <= 4; ++t) {
      opt.zero_grad();
      Backward(p);
      opt.step();
      for (int i = 0; i < 3; ++i) {
        double g = 2 * c[i] * ref[i];
        const double old = ref[i];
        if (!decoupled) g += o.weight_decay * ref[i];
        m[i] = o.beta1 * m[i] + (1 - o.beta1) * g;
        v[i] = o.beta2 * v[i] + (1 - o.beta2) * g * g;
        double mh = m[i] / (1 - std::pow(o.beta1, t)), vh = v[i] / (1 - std::pow(o.beta2, t));
        ref[i] -= o.lr * mh / (std::sqrt(vh) + o.eps);
        if (decoupled) ref[i] -= o.lr * o.weight_decay * old;  // from the old value
      }
      CheckClose(p, ref, 1e-10);
    }
  }
}

TEST_CASE("optimizer errors") {
  Tensor p = fn::zeros({2}).set_requires_grad(true);
  optim::SGDOptions bad;
  bad.lr = -1;
  REQUIRE_THROWS_WITH(optim::SGD({p}, bad), "SGD: invalid learning rate -1 (expected lr >= 0)");
  optim::AdamOptions ab;
  ab.beta1 = 1.5;
  REQUIRE_THROWS_WITH(optim::Adam({p}, ab), "Adam: invalid beta1 1.5 (expected 0 <= beta1 < 1)");
  REQUIRE_THROWS_WITH(optim::SGD({fn::mul(p, p)}, optim::SGDOptions()),
                      Catch::Contains("optimizer: parameter 0 is not a leaf tensor"));
}

}  // namespace
}  // namespace oneflow
