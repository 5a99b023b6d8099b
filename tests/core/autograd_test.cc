// The autograd engine: accumulation, leaves, no_grad, shared subgraphs, and its errors.
#include "core/autograd.h"

#include "core/inplace.h"
#include "tests/test_util.h"

namespace oneflow {
namespace {

using testing::CheckClose;
using testing::FromVector;

TEST_CASE("gradients accumulate across backward calls and through shared inputs") {
  Tensor x = FromVector({1, 2, 3}, {3}).set_requires_grad(true);
  Tensor y = fn::mul(x, x);                  // x used twice in one op
  fn::sum(fn::add(y, x)).backward();         // and again in another
  CheckClose(x.grad(), {3, 5, 7});           // 2x + 1
  fn::sum(fn::mul_scalar(x, 3)).backward();  // accumulates
  CheckClose(x.grad(), {6, 8, 10});
  CHECK(x.is_leaf());
  CHECK_FALSE(y.is_leaf());
  CHECK_FALSE(y.grad().defined());  // non-leaves keep no grad
}

TEST_CASE("diamond graphs sum both paths") {
  Tensor x = FromVector({2}, {1}).set_requires_grad(true);
  Tensor a = fn::exp(x);
  Tensor b = fn::mul(a, a);  // e^{2x}
  Tensor c = fn::add(b, a);  // e^{2x} + e^x
  c.backward(fn::ones_like(c));
  CheckClose(x.grad(), {2 * std::exp(4.0) + std::exp(2.0)}, 1e-5);
}

TEST_CASE("no_grad records nothing and detach cuts the graph") {
  Tensor x = FromVector({1, 2}, {2}).set_requires_grad(true);
  {
    NoGradGuard ng;
    Tensor y = fn::mul(x, x);
    CHECK_FALSE(y.requires_grad());
  }
  Tensor d = x.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.storage() == x.storage());
  Tensor z = fn::mul(fn::mul(x, d), fn::scalar_like(1, x));
  fn::sum(z).backward();
  CheckClose(x.grad(), {1, 2});  // d is a constant
}

TEST_CASE("integer outputs carry no gradient") {
  Tensor x = FromVector({1, 5, 2}, {3}).set_requires_grad(true);
  auto [v, i] = fn::max(x, 0);
  CHECK(v.requires_grad());
  CHECK_FALSE(i.requires_grad());
  CHECK_FALSE(fn::gt(x, fn::scalar_like(1, x)).requires_grad());
}

TEST_CASE("autograd errors are one clear line") {
  Tensor x = FromVector({1, 2}, {2}).set_requires_grad(true);
  Tensor y = fn::sum(fn::mul(x, x));
  y.backward();
  REQUIRE_THROWS_WITH(
      y.backward(),
      Catch::Contains("backward: trying to backward through the graph a second time"));
  Tensor z = fn::sum(fn::mul(x, x));
  z.backward(Tensor(), /*retain_graph=*/true);
  REQUIRE_NOTHROW(z.backward());
  REQUIRE_THROWS_WITH(
      fn::mul(x, x).backward(),
      Catch::Contains("grad can be implicitly created only for outputs with one element"));
  REQUIRE_THROWS_WITH(FromVector({1}, {1}).backward(),
                      Catch::Contains("does not require grad and has no grad_fn"));
  REQUIRE_THROWS_WITH(fn::mul(x, x).set_requires_grad(false),
                      Catch::Contains("you can only change requires_grad of leaf tensors"));
  REQUIRE_THROWS_WITH(
      fn::arange(0, 3, 1).set_requires_grad(true),
      Catch::Contains("only tensors of floating point and complex dtype can require gradients"));
}

TEST_CASE("modifying a saved tensor in place is caught at backward") {
  Tensor x = FromVector({1, 2}, {2}).set_requires_grad(true);
  Tensor y = fn::exp(x);
  fn::fill_(y.detach(), 0.0);  // the saved output shares y's storage
  REQUIRE_THROWS_WITH(fn::sum(y).backward(),
                      "backward: output 0 of 'exp', which its gradient needs, was modified by an "
                      "in-place operation (version 1, saved at version 0)");
  Tensor a = FromVector({1, 2}, {2}).set_requires_grad(true);
  Tensor b = FromVector({3, 4}, {2});
  Tensor c = fn::mul(a, b);
  fn::fill_(b, 1.0);
  REQUIRE_THROWS_WITH(fn::sum(c).backward(), Catch::Contains("input 1 of 'mul'"));
}

TEST_CASE("post-accumulate hooks run once per leaf gradient") {
  Tensor w = FromVector({1, 2}, {2}).set_requires_grad(true);
  int calls = 0;
  w.impl()->mutable_autograd().post_accumulate_grad_hooks.push_back([&](const Tensor& leaf) {
    ++calls;
    CHECK(leaf.grad().defined());
  });
  fn::sum(fn::mul(w, w)).backward();
  CHECK(calls == 1);
}

TEST_CASE("a leaf's gradient buffer receives a linear's weight gradient without a copy") {
  Tensor x = FromVector({1, -2, 3, 0.5, 4, -1, 2, 2, -3, 1, 0, 5}, {4, 3});
  Tensor w = FromVector({0.1, 0.2, -0.3, 0.4, -0.5, 0.6}, {2, 3}).set_requires_grad(true);
  Tensor b = FromVector({0.5, -0.5}, {2}).set_requires_grad(true);
  // The reference: the same leaf values without a buffer.
  Tensor w0 = fn::clone(w).detach().set_requires_grad(true);
  fn::sum(fn::mul(fn::linear(x, w0, b), fn::linear(x, w0, b))).backward();
  Tensor want = fn::clone(w0.grad());
  // A buffer inside a larger flat tensor, as DDP's buckets hold them; -7 marks untouched.
  Tensor flat = fn::full(Shape({10}), -7.0);
  Tensor buffer = fn::view(fn::slice(flat, 0, 2, 8), {2, 3});
  w.impl()->mutable_autograd().grad_buffer = buffer.impl_ptr();

  SECTION("one use: computed into the buffer, which becomes .grad") {
    Tensor y = fn::linear(x, w, b);
    fn::sum(fn::mul(y, y)).backward();
    CheckClose(w.grad(), want);
    CHECK(w.grad().data<float>() == buffer.data<float>());
    CheckClose(fn::slice(flat, 0, 0, 2), {-7, -7});  // nothing outside the buffer
    CheckClose(fn::slice(flat, 0, 8, 10), {-7, -7});
    // .grad is set now: the next backward accumulates as always.
    Tensor y2 = fn::linear(x, w, b);
    fn::sum(fn::mul(y2, y2)).backward();
    CheckClose(w.grad(), fn::mul_scalar(want, 2));
  }
  SECTION("two uses: the gradient is a sum, so the buffer is not offered") {
    Tensor y = fn::add(fn::linear(x, w, b), fn::linear(x, w, b));
    fn::sum(fn::mul(y, y)).backward();
    CheckClose(w.grad(), fn::mul_scalar(want, 4));  // (2y)^2: 4x the single use
    CheckClose(flat, std::vector<double>(10, -7.0));
  }
  SECTION("an op that cannot compute into it ignores it") {
    fn::sum(fn::mul(w, w)).backward();
    CheckClose(w.grad(), fn::mul_scalar(w, 2));
    CheckClose(flat, std::vector<double>(10, -7.0));
  }
}

// Turns graph recording on for a scope (finite differences evaluate under no_grad).
struct EnableGrad {
  bool prev = GradModeEnabled();
  EnableGrad() { SetGradMode(true); }
  ~EnableGrad() { SetGradMode(prev); }
};

// d/dx of sum(f(x) * r) as a function of x, with a graph of its own (create_graph).
std::function<Tensor(const std::vector<Tensor>&)> GradientOf(
    std::function<Tensor(const Tensor&)> f) {
  return [f](const std::vector<Tensor>& in) {
    EnableGrad on;
    Tensor out = f(in[0]);
    // Weights 0.25, 0.5, 0.75, ... (uneven: softmax's rows would cancel even ones).
    const double n = static_cast<double>(out.numel());
    Tensor r =
        fn::reshape(fn::mul_scalar(fn::arange(1, n + 1, 1, out.dtype()), 0.25), out.shape().dims());
    return Grad({fn::sum(fn::mul(out, r))}, {in[0]}, {}, std::nullopt, /*create_graph=*/true)[0];
  };
}

Tensor Leaf64(const std::vector<double>& v, const Shape& shape) {
  return FromVector(v, shape, DType::kFloat64).set_requires_grad(true);
}

TEST_CASE("Grad returns gradients without touching .grad, for leaves and non-leaves") {
  Tensor x = FromVector({1, 2, 3}, {3}).set_requires_grad(true);
  Tensor w = FromVector({0.5}, {1}).set_requires_grad(true);
  Tensor h = fn::mul(x, x);
  Tensor y = fn::sum(fn::mul(h, w));
  std::vector<Tensor> g = Grad({y}, {x, h}, {}, /*retain_graph=*/true);
  CheckClose(g[0], {1, 2, 3});  // 2 x w
  CheckClose(g[1], {0.5, 0.5, 0.5});
  CHECK_FALSE(x.grad().defined());
  CHECK_FALSE(w.grad().defined());  // not asked for: left alone
  // grad_outputs seeds, and the graph was retained.
  std::vector<Tensor> g2 = Grad({y}, {w}, {FromVector({2}, {})});
  CheckClose(g2[0], {28});  // 2 * (1 + 4 + 9)
  CHECK_FALSE(w.grad().defined());
}

TEST_CASE("Grad errors are one clear line") {
  Tensor x = FromVector({1, 2}, {2}).set_requires_grad(true);
  Tensor unused = FromVector({1, 2}, {2}).set_requires_grad(true);
  Tensor y = fn::sum(fn::mul(x, x));
  REQUIRE_THROWS_WITH(Grad({y}, {x, unused}, {}, true),
                      Catch::Contains("grad: input 1 (tensor(shape=(2,), dtype=float32, "
                                      "device=cpu)) was not used to compute the outputs (no "
                                      "gradient reached it); pass allow_unused=True to get None"));
  std::vector<Tensor> g = Grad({y}, {x, unused}, {}, true, false, /*allow_unused=*/true);
  CHECK(g[0].defined());
  CHECK_FALSE(g[1].defined());
  REQUIRE_THROWS_WITH(Grad({y}, {FromVector({1}, {1})}, {}, true),
                      Catch::Contains("grad: input 0 does not require grad"));
  REQUIRE_THROWS_WITH(Grad({fn::mul(x, x)}, {x}),
                      Catch::Contains("grad: grad can be implicitly created only for outputs "
                                      "with one element"));
}

TEST_CASE("second derivatives match finite differences of the first") {
  using testing::CheckGradients;
  Tensor x = Leaf64({0.3, -1.2, 0.7, 2.0}, {4});
  SECTION("x^3: d2/dx2 = 6x") {
    auto f = [](const Tensor& t) { return fn::mul(fn::mul(t, t), t); };
    Tensor g = GradientOf(f)({x});
    CheckClose(g, {0.25 * 3 * 0.09, 0.5 * 3 * 1.44, 0.75 * 3 * 0.49, 1.0 * 12});
    Tensor h = Grad({fn::sum(g)}, {x})[0];
    CheckClose(h, {0.25 * 6 * 0.3, 0.5 * 6 * -1.2, 0.75 * 6 * 0.7, 1.0 * 12});
    CheckGradients(GradientOf(f), {x});
  }
  SECTION("tanh, sigmoid, exp, pow (formulas that use the saved output)") {
    CheckGradients(GradientOf([](const Tensor& t) { return fn::tanh(t); }), {x});
    CheckGradients(GradientOf([](const Tensor& t) { return fn::sigmoid(t); }), {x});
    CheckGradients(GradientOf([](const Tensor& t) { return fn::exp(t); }), {x});
    CheckGradients(GradientOf([](const Tensor& t) { return fn::pow(t, fn::scalar_like(3, t)); }),
                   {x});
  }
  SECTION("matmul with a nonlinearity, and softmax") {
    Tensor w = FromVector({0.2, -0.4, 0.9, 0.1, 0.5, -0.3, 0.8, 0.6}, {4, 2}, DType::kFloat64);
    CheckGradients(GradientOf([w](const Tensor& t) {
                     return fn::tanh(fn::matmul(fn::reshape(t, {1, 4}), w));
                   }),
                   {x});
    CheckGradients(GradientOf([](const Tensor& t) {
                     return fn::softmax(fn::reshape(t, {2, 2}), 1);
                   }),
                   {x});
  }
}

TEST_CASE("a gradient penalty trains through relu (second derivative of an MLP)") {
  // loss = |d sum(mlp(x)) / dx|^2, differentiated with respect to the first layer's weight.
  Tensor x = FromVector({0.5, -1, 2, 0.3, 1.5, -0.7}, {2, 3}, DType::kFloat64);
  Tensor w1 = Leaf64({0.2, -0.5, 0.3, 0.7, 0.1, -0.4, -0.6, 0.9, 0.25, 0.4, -0.3, 0.8}, {4, 3});
  Tensor w2 = FromVector({0.3, -0.8, 0.5, 0.6}, {1, 4}, DType::kFloat64);
  auto penalty = [&](const std::vector<Tensor>& in) {
    EnableGrad on;
    Tensor xi = fn::clone(x).set_requires_grad(true);
    Tensor out = fn::sum(
        fn::matmul(fn::relu(fn::matmul(xi, fn::transpose(in[0], 0, 1))), fn::transpose(w2, 0, 1)));
    Tensor gx = Grad({out}, {xi}, {}, std::nullopt, /*create_graph=*/true)[0];
    return fn::sum(fn::mul(gx, gx));
  };
  testing::CheckGradients(penalty, {w1});
}

TEST_CASE("second derivatives through an op without one are an error naming it") {
  Tensor x = Leaf64({0.3, -1.2}, {2});
  Tensor g = GradientOf([](const Tensor& t) { return fn::gelu(t); })({x});
  REQUIRE_THROWS_WITH(Grad({fn::sum(g)}, {x}),
                      "backward: 'gelu_grad' is part of another op's gradient and has no "
                      "gradient of its own; second derivatives (create_graph=True) through it "
                      "are not supported");
}

TEST_CASE("Backward with create_graph and inputs") {
  Tensor x = Leaf64({1, 2}, {2});
  Tensor w = Leaf64({3}, {1});
  Tensor y = fn::sum(fn::mul(fn::mul(x, x), w));
  Backward({y}, {Tensor()}, /*retain_graph=*/true, /*create_graph=*/true, {x});
  CheckClose(x.grad(), {6, 12});  // 2 x w
  CHECK(x.grad().requires_grad());
  CHECK_FALSE(w.grad().defined());  // only the inputs accumulate
  Tensor gx = x.grad();
  x.set_grad(Tensor());
  Backward({fn::sum(gx)}, {Tensor()}, false, false, {w});
  CheckClose(w.grad(), {6});  // d/dw sum(2 x w) = 2 (1 + 2)
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("in-place ops on non-leaves are followed by autograd") {
  Tensor x = Leaf64({1, 2, 3, 4, 5, 6}, {2, 3});
  SECTION("(x * 1).mul_(2).add_(1)") {
    Tensor y = fn::mul_scalar(x, 1);
    InPlace(
        y, [](const Tensor& s) { return fn::mul_scalar(s, 2); }, "mul_");
    InPlace(
        y, [](const Tensor& s) { return fn::add_scalar(s, 1); }, "add_");
    CheckClose(y, {3, 5, 7, 9, 11, 13});
    fn::sum(fn::mul(y, y)).backward();
    CheckClose(x.grad(), {12, 20, 28, 36, 44, 52});  // 2 y * 2
  }
  SECTION("a write into a view: y[:, 0] = 0 and y[1] *= w") {
    Tensor w = Leaf64({-1}, {});
    Tensor y = fn::mul_scalar(x, 2);
    InPlace(
        fn::select(y, 1, 0), [](const Tensor& s) { return fn::zeros_like(s); }, "fill_");
    InPlace(
        fn::select(y, 0, 1), [&](const Tensor& s) { return fn::mul(s, w); }, "mul_");
    CheckClose(y, {0, 4, 6, 0, -10, -12});
    fn::sum(fn::mul(y, fn::reshape(fn::arange(1, 7, 1, DType::kFloat64), {2, 3}))).backward();
    CheckClose(x.grad(), {0, 4, 6, 0, -10, -12});  // 2 * weight, -1 on row 1, 0 in column 0
    CheckClose(w.grad(), {0 + 5 * 10 + 6 * 12});   // sum(weight * 2 x) over row 1 after the fill
  }
  SECTION("a view taken before the write sees the new history") {
    Tensor y = fn::mul_scalar(x, 2);
    Tensor row = fn::select(y, 0, 0);
    InPlace(
        y, [](const Tensor& s) { return fn::mul_scalar(s, 3); }, "mul_");
    fn::sum(row).backward();
    CheckClose(x.grad(), {6, 6, 6, 0, 0, 0});
  }
  SECTION("a leaf that requires grad is refused") {
    REQUIRE_THROWS_WITH(
        InPlace(
            x, [](const Tensor& s) { return s; }, "add_"),
        "add_: a leaf tensor that requires grad cannot be modified in place; wrap the update in "
        "`with oneflow.no_grad():`");
  }
  SECTION("a saved tensor written in place is still caught") {
    Tensor y = fn::exp(x);
    InPlace(
        y, [](const Tensor& s) { return fn::mul_scalar(s, 2); }, "mul_");
    REQUIRE_THROWS_WITH(fn::sum(y).backward(),
                        "backward: output 0 of 'exp', which its gradient needs, was modified by "
                        "an in-place operation (version 1, saved at version 0)");
  }
  SECTION("gradients through in-place writes match finite differences") {
    testing::CheckGradients(
        [](const std::vector<Tensor>& in) {
          Tensor y = fn::add_scalar(fn::tanh(in[0]), 0.5);  // tanh saves its own output
          InPlace(
              fn::slice(y, 1, 1, 3), [&](const Tensor& s) { return fn::mul(s, in[1]); }, "mul_");
          InPlace(
              y, [](const Tensor& s) { return fn::exp(s); }, "exp_");
          return y;
        },
        {x, Leaf64({0.5, -2}, {2})});
  }
}

}  // namespace
}  // namespace oneflow
