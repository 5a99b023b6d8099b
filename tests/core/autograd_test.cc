// The autograd engine: accumulation, leaves, no_grad, shared subgraphs, and its errors.
#include "core/autograd.h"

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
      Catch::Contains("only tensors of floating point dtype can require gradients"));
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

}  // namespace
}  // namespace oneflow
