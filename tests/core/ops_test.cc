// Tensor ops of core/: each forward against values computed by hand or by a naive loop, each
// gradient against finite differences, and each user error on its message.
#include "core/dispatch.h"
#include "core/op_registry.h"
#include "core/ops/unary_functors.h"
#include "tests/test_util.h"

namespace oneflow {
namespace {

using testing::CheckClose;
using testing::CheckGradients;
using testing::FromVector;
using testing::ToVector;

Tensor RandLeaf(const Shape& s, double lo = -1, double hi = 1) {
  Tensor t = fn::uniform(s, lo, hi, DType::kFloat64);
  t.set_requires_grad(true);
  return t;
}

TEST_CASE("binary ops broadcast and match hand-computed values") {
  Tensor a = FromVector({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = FromVector({10, 20, 30}, {3});
  CheckClose(fn::add(a, b), {11, 22, 33, 14, 25, 36});
  CheckClose(fn::sub(a, b), {-9, -18, -27, -6, -15, -24});
  CheckClose(fn::mul(a, b), {10, 40, 90, 40, 100, 180});
  CheckClose(fn::div(b, a), {10, 10, 10, 2.5, 4, 5});
  CheckClose(fn::pow(a, fn::scalar_like(2, a)), {1, 4, 9, 16, 25, 36});
  Tensor col = FromVector({1, 5}, {2, 1});
  CheckClose(fn::maximum(a, col), {1, 2, 3, 5, 5, 6});
  CheckClose(fn::minimum(a, col), {1, 1, 1, 4, 5, 5});
  CheckClose(fn::gt(a, col), {0, 1, 1, 0, 0, 1});
  CHECK(fn::gt(a, col).dtype() == DType::kBool);
  CheckClose(fn::where(fn::gt(a, col), a, fn::neg(a)), {-1, 2, 3, -4, -5, 6});
  // Broadcasting over a transposed (strided) view.
  Tensor at = fn::transpose(a, 0, 1);  // (3, 2)
  CheckClose(fn::add(at, FromVector({100, 200}, {2})), {101, 204, 102, 205, 103, 206});
}

TEST_CASE("type promotion follows PyTorch for tensors and scalars") {
  Tensor i = fn::arange(0, 3, 1);  // int64
  Tensor f = fn::ones({3});
  CHECK(fn::add(i, f).dtype() == DType::kFloat32);
  CHECK(fn::add(f, fn::scalar_like(2.5, fn::to_dtype(f, DType::kFloat64))).dtype() ==
        DType::kFloat32);                           // 0-dim float64 does not widen float32
  CHECK(fn::div(i, i).dtype() == DType::kFloat32);  // true division
  CHECK(fn::sum(fn::ones({2}, DType::kBool)).dtype() == DType::kInt64);
}

TEST_CASE("unary ops match std math") {
  std::vector<double> v = {-2, -0.5, 0.25, 1.5};
  Tensor x = FromVector(v, {4}, DType::kFloat64);
  auto each = [&](double (*f)(double)) {
    std::vector<double> r;
    for (double e : v) r.push_back(f(e));
    return r;
  };
  CheckClose(fn::exp(x), each([](double e) { return std::exp(e); }));
  CheckClose(fn::tanh(x), each([](double e) { return std::tanh(e); }));
  CheckClose(fn::sigmoid(x), each([](double e) { return 1 / (1 + std::exp(-e)); }));
  CheckClose(fn::gelu(x),
             each([](double e) { return 0.5 * e * (1 + std::erf(e / std::sqrt(2))); }));
  CheckClose(fn::relu(x), {0, 0, 0.25, 1.5});
  CheckClose(fn::relu6(fn::mul_scalar(x, 5)), {0, 0, 1.25, 6});
  CheckClose(fn::abs(x), {2, 0.5, 0.25, 1.5});
  CheckClose(fn::sqrt(fn::abs(x)), each([](double e) { return std::sqrt(std::abs(e)); }));
  CheckClose(fn::clamp(x, -1.0, 1.0), {-1, -0.5, 0.25, 1});
}

TEST_CASE("gradients of elementwise ops agree with finite differences") {
  Tensor a = RandLeaf({2, 3}, 0.5, 2);
  Tensor b = RandLeaf({3}, 0.5, 2);
  Tensor c = RandLeaf({2, 1}, 0.5, 2);
  using V = const std::vector<Tensor>&;
  CheckGradients([](V in) { return fn::add(in[0], in[1]); }, {a, b});
  CheckGradients([](V in) { return fn::sub(in[0], in[1]); }, {a, c});
  CheckGradients([](V in) { return fn::mul(in[0], in[1]); }, {a, b});
  CheckGradients([](V in) { return fn::div(in[0], in[1]); }, {a, c});
  CheckGradients([](V in) { return fn::pow(in[0], in[1]); }, {a, b});
  CheckGradients([](V in) { return fn::maximum(in[0], in[1]); }, {a, b});
  CheckGradients([](V in) { return fn::minimum(in[0], in[1]); }, {a, c});
  Tensor x = RandLeaf({5}, -2, 2);
  Tensor pos = RandLeaf({5}, 0.5, 3);
  for (auto f :
       {fn::exp, fn::neg, fn::sigmoid, fn::tanh, fn::gelu, fn::square, fn::relu, fn::abs}) {
    CheckGradients([f](V in) { return f(in[0]); }, {x});
  }
  for (auto f : {fn::log, fn::sqrt, fn::rsqrt}) {
    CheckGradients([f](V in) { return f(in[0]); }, {pos});
  }
  CheckGradients([](V in) { return fn::clamp(in[0], -0.5, 0.7); }, {x});
  CheckGradients(
      [](V in) {
        return fn::where(fn::gt(in[0], fn::scalar_like(0, in[0])), in[0], fn::mul(in[0], in[0]));
      },
      {x});
}

// Naive formulas for the unary table's ops at PyTorch's default parameters, written from the
// definitions rather than from the functors (erfinv through erf: erf(erfinv(y)) = y).
double NaiveUnary(const std::string& op, double x) {
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  if (op == "log1p") return std::log(1 + x);
  if (op == "expm1") return std::exp(x) - 1;
  if (op == "log2") return std::log(x) / std::log(2.0);
  if (op == "log10") return std::log(x) / std::log(10.0);
  if (op == "reciprocal") return 1 / x;
  if (op == "sin") return std::sin(x);
  if (op == "cos") return std::cos(x);
  if (op == "tan") return std::sin(x) / std::cos(x);
  if (op == "asin") return std::atan2(x, std::sqrt(1 - x * x));
  if (op == "acos") return M_PI / 2 - std::atan2(x, std::sqrt(1 - x * x));
  if (op == "atan") return std::atan2(x, 1.0);
  if (op == "sinh") return (std::exp(x) - std::exp(-x)) / 2;
  if (op == "cosh") return (std::exp(x) + std::exp(-x)) / 2;
  if (op == "asinh") return std::log(x + std::sqrt(x * x + 1));
  if (op == "atanh") return 0.5 * std::log((1 + x) / (1 - x));
  if (op == "erf") return std::erf(x);
  if (op == "erfc") return 1 - std::erf(x);
  if (op == "floor") return std::floor(x);
  if (op == "ceil") return std::ceil(x);
  if (op == "round") return std::nearbyint(x);
  if (op == "trunc") return x < 0 ? std::ceil(x) : std::floor(x);
  if (op == "silu") return x * sig(x);
  if (op == "mish") return x * std::tanh(std::log(1 + std::exp(x)));
  if (op == "hardswish") return x * std::min(std::max(x + 3, 0.0), 6.0) / 6;
  if (op == "hardsigmoid") return std::min(std::max(x + 3, 0.0), 6.0) / 6;
  if (op == "logsigmoid") return std::log(sig(x));
  if (op == "softsign") return x / (1 + std::abs(x));
  if (op == "selu") {
    return 1.0507009873554805 * (x > 0 ? x : 1.6732632423543772 * (std::exp(x) - 1));
  }
  if (op == "gelu_tanh") {
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  }
  if (op == "leaky_relu") return x > 0 ? x : 0.01 * x;
  if (op == "elu") return x > 0 ? x : std::exp(x) - 1;
  if (op == "softplus") return std::log(1 + std::exp(x));
  if (op == "shrink") return x > 0.5 ? x - 0.5 : x < -0.5 ? x + 0.5 : 0;  // softshrink
  if (op == "threshold") return x > 0.5 ? x : -1;
  // log |gamma|, and its derivative by a fourth-order central difference of it
  auto lgamma = [](double v) { return std::log(std::abs(std::tgamma(v))); };
  if (op == "lgamma") return lgamma(x);
  if (op == "digamma") {
    const double h = 1e-3;
    return (-lgamma(x + 2 * h) + 8 * lgamma(x + h) - 8 * lgamma(x - h) + lgamma(x - 2 * h)) /
           (12 * h);
  }
  FAIL("no naive formula for " << op);
  return 0;
}

TEST_CASE(
    "every op of the unary table: forward against a naive formula, gradient against "
    "finite differences") {
  using V = const std::vector<Tensor>&;
  int checked = 0;
#define ONEFLOW_CHECK_TABLE_OP(name, F, lo, hi)                                                    \
  {                                                                                                \
    INFO("op " #name);                                                                             \
    const OpDef& op = OpRegistry::Global().Get(#name);                                             \
    const Attrs attrs = functors::DefaultAttrs<functors::F>();                                     \
    Tensor x = RandLeaf({7}, lo, hi);                                                              \
    Tensor y = CallOp1(op, {x}, attrs);                                                            \
    std::vector<double> xs = ToVector(x), want;                                                    \
    for (double v : xs) want.push_back(std::string(#name) == "erfinv" ? v : NaiveUnary(#name, v)); \
    CheckClose(std::string(#name) == "erfinv" ? fn::erf(y) : y, want, 1e-9);                       \
    CheckGradients([&](V in) { return CallOp1(op, {in[0]}, attrs); }, {x});                        \
    ++checked;                                                                                     \
  }
  ONEFLOW_UNARY_TABLE_OPS(ONEFLOW_CHECK_TABLE_OP)
#undef ONEFLOW_CHECK_TABLE_OP
  CHECK(checked >= 35);
  // Parameters reach the kernels and the gradients.
  Tensor x = FromVector({-2, -0.3, 0.4, 3}, {4}, DType::kFloat64);
  CheckClose(fn::leaky_relu(x, 0.2), {-0.4, -0.06, 0.4, 3});
  CheckClose(fn::elu(x, 2.0), {2 * std::expm1(-2.0), 2 * std::expm1(-0.3), 0.4, 3});
  CheckClose(fn::celu(x, 2.0), {2 * std::expm1(-1.0), 2 * std::expm1(-0.15), 0.4, 3});
  CheckClose(fn::softplus(x, 2.0, 1.0),
             {std::log1p(std::exp(-4.0)) / 2, std::log1p(std::exp(-0.6)) / 2,
              std::log1p(std::exp(0.8)) / 2, 3});  // 2 * 3 > 1
  CheckClose(fn::softshrink(x, 0.35), {-1.65, 0, 0.05, 2.65});
  CheckClose(fn::hardshrink(x, 0.35), {-2, 0, 0.4, 3});
  CheckClose(fn::threshold(x, 0.0, 9.0), {9, 9, 0.4, 3});
  CheckClose(fn::round(FromVector({0.5, 1.5, 2.5, -0.5}, {4})), {0, 2, 2, -0});
  Tensor xl = RandLeaf({6}, -2, 2);
  CheckGradients([](V in) { return fn::elu(in[0], 0.7); }, {xl});
  CheckGradients([](V in) { return fn::celu(in[0], 0.7); }, {xl});
  CheckGradients([](V in) { return fn::softplus(in[0], 3.0, 2.0); }, {xl});
  CheckGradients([](V in) { return fn::leaky_relu(in[0], 0.3); }, {xl});
  // Integers compute as float32; rounding keeps them.
  CHECK(fn::sin(fn::arange(0, 3, 1)).dtype() == DType::kFloat32);
  CHECK(fn::floor(fn::arange(0, 3, 1)).dtype() == DType::kInt64);
  REQUIRE_THROWS_WITH(fn::celu(x, 0.0), Catch::Contains("celu: alpha must not be 0"));
}

TEST_CASE("prod, amax, amin: values, ties and zeros in the gradient") {
  Tensor a = FromVector({1, 5, 3, 4, 2, 6}, {2, 3});
  CheckClose(fn::prod(a), {720});
  CheckClose(fn::prod(a, {0}), {4, 10, 18});
  CheckClose(fn::prod(fn::arange(1, 6, 1)), {120});
  CHECK(fn::prod(fn::arange(1, 6, 1)).dtype() == DType::kInt64);
  CheckClose(fn::amax(a, {1}), {5, 6});
  CheckClose(fn::amin(a, {0, 1}), {1});
  CHECK(fn::amax(a, {1}, true).shape() == Shape({2, 1}));
  using V = const std::vector<Tensor>&;
  Tensor x = RandLeaf({3, 4}, 0.5, 1.5);
  CheckGradients([](V in) { return fn::prod(in[0], {1}); }, {x});
  CheckGradients([](V in) { return fn::prod(in[0]); }, {x});
  CheckGradients([](V in) { return fn::amax(in[0], {0}); }, {x});
  CheckGradients([](V in) { return fn::amin(in[0], {0, 1}, true); }, {x});
  // One zero in a row: only it gets the product of the others; two zeros: nothing.
  Tensor z = FromVector({2, 0, 3, 0, 0, 5}, {2, 3}, DType::kFloat64);
  z.set_requires_grad(true);
  fn::sum(fn::prod(z, {1})).backward();
  CheckClose(z.grad(), {0, 6, 0, 0, 0, 0});
  // Ties share the gradient of amax evenly.
  Tensor t = FromVector({1, 3, 3, 2}, {4}, DType::kFloat64);
  t.set_requires_grad(true);
  fn::amax(t, {0}).backward();
  CheckClose(t.grad(), {0, 0.5, 0.5, 0});
  REQUIRE_THROWS_WITH(fn::amax(fn::zeros({2, 0}), {1}),
                      Catch::Contains("amax: cannot reduce over dim 1 of size 0"));
}

TEST_CASE("reductions") {
  Tensor a = FromVector({1, 5, 3, 4, 2, 6}, {2, 3});
  CheckClose(fn::sum(a), {21});
  CheckClose(fn::sum(a, {0}), {5, 7, 9});
  CheckClose(fn::sum(a, {1}, true), {9, 12});
  CHECK(fn::sum(a, {1}, true).shape() == Shape({2, 1}));
  CheckClose(fn::mean(a, {-1}), {3, 4});
  auto [v, i] = fn::max(a, 1);
  CheckClose(v, {5, 6});
  CheckClose(i, {1, 2});
  CheckClose(fn::argmax(a), {5});
  CheckClose(fn::min(a, 0).first, {1, 2, 3});
  CheckClose(fn::max_all(a), {6});
  // A reduction over a non-contiguous view.
  CheckClose(fn::sum(fn::transpose(a, 0, 1), {1}), {5, 7, 9});
  using V = const std::vector<Tensor>&;
  Tensor x = RandLeaf({3, 4});
  CheckGradients([](V in) { return fn::sum(in[0], {1}); }, {x});
  CheckGradients([](V in) { return fn::mean(in[0], {0}, true); }, {x});
  CheckGradients([](V in) { return fn::mean(in[0]); }, {x});
  CheckGradients([](V in) { return fn::max(in[0], 1).first; }, {x});
  CheckGradients([](V in) { return fn::min(in[0], 0, true).first; }, {x});
  REQUIRE_THROWS_WITH(fn::sum(a, {2}),
                      Catch::Contains("sum: dim 2 out of range for a tensor of 2 dims"));
  REQUIRE_THROWS_WITH(fn::mean(fn::arange(0, 4, 1)),
                      Catch::Contains("mean: expected a floating point tensor, got int64"));
}

// Naive batched matmul reference.
std::vector<double> NaiveMatmul(const std::vector<double>& a, const std::vector<double>& b,
                                int64_t batch, int64_t m, int64_t k, int64_t n) {
  std::vector<double> c(batch * m * n, 0);
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t p = 0; p < k; ++p)
          c[(t * m + i) * n + j] += a[(t * m + i) * k + p] * b[(t * k + p) * n + j];
  return c;
}

TEST_CASE("matmul against a naive loop, incl. transposed views and batches") {
  Tensor a = fn::randn({2, 3, 4}, DType::kFloat64);
  Tensor b = fn::randn({2, 4, 5}, DType::kFloat64);
  CheckClose(fn::matmul(a, b), NaiveMatmul(ToVector(a), ToVector(b), 2, 3, 4, 5), 1e-10);
  // Transposed operands are read by gemm without a copy; the values must not change.
  Tensor bt = fn::contiguous(fn::transpose(b, 1, 2));  // (2, 5, 4)
  CheckClose(fn::matmul(a, fn::transpose(bt, 1, 2)),
             NaiveMatmul(ToVector(a), ToVector(b), 2, 3, 4, 5), 1e-10);
  // Broadcast batch: (2,3,4) @ (4,5).
  Tensor w = fn::randn({4, 5}, DType::kFloat64);
  std::vector<double> wv = ToVector(w), w2 = wv;
  w2.insert(w2.end(), wv.begin(), wv.end());
  CheckClose(fn::matmul(a, w), NaiveMatmul(ToVector(a), w2, 2, 3, 4, 5), 1e-10);
  // float32 path (sgemm).
  Tensor af = fn::to_dtype(a, DType::kFloat32), bf = fn::to_dtype(b, DType::kFloat32);
  CheckClose(fn::matmul(af, bf), NaiveMatmul(ToVector(a), ToVector(b), 2, 3, 4, 5), 1e-5);
  // 1-D cases.
  Tensor v = FromVector({1, 2}, {2});
  CheckClose(fn::matmul(v, v), {5});
  CheckClose(fn::matmul(FromVector({1, 2, 3, 4}, {2, 2}), v), {5, 11});
  REQUIRE_THROWS_WITH(fn::matmul(fn::ones({2, 3}), fn::ones({4, 5})),
                      "matmul: cannot multiply (2, 3) by (4, 5): inner sizes 3 and 4 differ");
  using V = const std::vector<Tensor>&;
  Tensor x = RandLeaf({2, 3, 4}), y = RandLeaf({4, 2}), z = RandLeaf({1, 4, 2});
  CheckGradients([](V in) { return fn::matmul(in[0], in[1]); }, {x, y});
  CheckGradients([](V in) { return fn::matmul(in[0], in[1]); }, {x, z});
  Tensor wl = RandLeaf({5, 4}), bl = RandLeaf({5});
  CheckGradients([](V in) { return fn::linear(in[0], in[1], in[2]); }, {x, wl, bl});
  // The fused op (bias rows + one gemm) against matmul + add, with and without bias.
  Tensor x2 = RandLeaf({3, 4});
  CheckGradients([](V in) { return fn::linear(in[0], in[1], Tensor()); }, {x2, wl});
  CheckGradients([](V in) { return fn::linear(in[0], in[1], in[2]); }, {x2, wl, bl});
  Tensor xf = fn::randn({5, 4}), wf = fn::randn({3, 4}), bias = fn::randn({3});
  CheckClose(fn::linear(xf, wf, bias), fn::add(fn::matmul(xf, fn::transpose(wf, 0, 1)), bias),
             1e-5);
  Tensor xt = fn::transpose(fn::randn({4, 5}), 0, 1);  // a transposed input reaches gemm as is
  CheckClose(fn::linear(xt, wf, Tensor()), fn::matmul(xt, fn::transpose(wf, 0, 1)), 1e-5);
  REQUIRE_THROWS_WITH(fn::linear(fn::ones({2, 3}), fn::ones({4, 5}), Tensor()),
                      "linear: input of shape (2, 3) has 3 features but the layer expects 5");
}

TEST_CASE("float32 matmul and linear on oneDNN's sgemm: every transpose, bias, batches") {
  // Products of 40x50x60 and more go to oneDNN (smaller ones to OpenBLAS): both transposes of
  // each operand, a broadcast batch, and linear's bias (beta = 1) against the float64 loop.
  Tensor a = fn::randn({2, 40, 50}, DType::kFloat64), b = fn::randn({50, 60}, DType::kFloat64);
  std::vector<double> bv = ToVector(b), b2 = bv;
  b2.insert(b2.end(), bv.begin(), bv.end());
  const std::vector<double> want = NaiveMatmul(ToVector(a), b2, 2, 40, 50, 60);
  Tensor af = fn::to_dtype(a, DType::kFloat32), bf = fn::to_dtype(b, DType::kFloat32);
  Tensor at = fn::transpose(fn::contiguous(fn::transpose(af, 1, 2)), 1, 2);  // column-major
  Tensor bt = fn::transpose(fn::contiguous(fn::transpose(bf, 0, 1)), 0, 1);
  for (const Tensor& x : {af, at}) {
    for (const Tensor& y : {bf, bt}) CheckClose(fn::matmul(x, y), want, 1e-4);
  }
  Tensor x = fn::to_dtype(fn::randn({64, 70}, DType::kFloat64), DType::kFloat32);
  Tensor w = fn::to_dtype(fn::randn({80, 70}, DType::kFloat64), DType::kFloat32);
  Tensor bias = fn::to_dtype(fn::randn({80}, DType::kFloat64), DType::kFloat32);
  std::vector<double> wt = ToVector(fn::contiguous(fn::transpose(w, 0, 1)));
  std::vector<double> lin = NaiveMatmul(ToVector(x), wt, 1, 64, 70, 80);
  std::vector<double> bv2 = ToVector(bias);
  for (size_t i = 0; i < lin.size(); ++i) lin[i] += bv2[i % 80];
  CheckClose(fn::linear(x, w, bias), lin, 1e-4);
  CheckClose(fn::linear(fn::transpose(fn::contiguous(fn::transpose(x, 0, 1)), 0, 1), w, bias), lin,
             1e-4);
}

TEST_CASE("views share storage; reshape, permute, slice, expand") {
  Tensor a = fn::arange(0, 6, 1, DType::kFloat32);
  Tensor r = fn::reshape(a, {2, -1});
  CHECK(r.shape() == Shape({2, 3}));
  CHECK(r.storage() == a.storage());
  Tensor t = fn::transpose(r, 0, 1);
  CHECK(t.storage() == a.storage());
  CHECK_FALSE(t.is_contiguous());
  CheckClose(t, {0, 3, 1, 4, 2, 5});
  Tensor s = fn::slice(r, 1, 0, 3, 2);
  CheckClose(s, {0, 2, 3, 5});
  CheckClose(fn::select(r, 0, -1), {3, 4, 5});
  Tensor e = fn::expand(FromVector({1, 2}, {2, 1}), {2, 3});
  CheckClose(e, {1, 1, 1, 2, 2, 2});
  CheckClose(fn::reshape(t, {6}), {0, 3, 1, 4, 2, 5});  // reshape of a non-contiguous view copies
  CheckClose(fn::flatten(fn::zeros({2, 3, 4}), 1).shape().dims() == std::vector<int64_t>{2, 12}
                 ? FromVector({1}, {1})
                 : FromVector({0}, {1}),
             {1});
  CHECK(fn::squeeze(fn::zeros({1, 3, 1})).shape() == Shape({3}));
  CHECK(fn::unsqueeze(fn::zeros({3}), -1).shape() == Shape({3, 1}));
  CheckClose(fn::cat({r, r}, 1), {0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5});
  CHECK(fn::stack({a, a}, 1).shape() == Shape({6, 2}));
  REQUIRE_THROWS_WITH(fn::reshape(a, {4, 2}),
                      "reshape: shape (4, 2) is invalid for input of size 6");
  REQUIRE_THROWS_WITH(fn::view(t, {6}),
                      Catch::Contains("view: the tensor of shape (3, 2) is not contiguous"));
  REQUIRE_THROWS_WITH(fn::expand(fn::zeros({2}), {3}),
                      Catch::Contains("expand: cannot expand dim 0 of size 2 to 3"));
  REQUIRE_THROWS_WITH(fn::cat({fn::zeros({2, 3}), fn::zeros({2, 4})}, 0),
                      Catch::Contains("cat: input 1 has shape (2, 4) but input 0 has (2, 3)"));
  using V = const std::vector<Tensor>&;
  Tensor x = RandLeaf({2, 3, 4});
  CheckGradients([](V in) { return fn::permute(in[0], {2, 0, 1}); }, {x});
  CheckGradients([](V in) { return fn::reshape(fn::transpose(in[0], 0, 2), {4, 6}); }, {x});
  CheckGradients([](V in) { return fn::slice(in[0], 2, 1, 4, 2); }, {x});
  CheckGradients([](V in) { return fn::expand(fn::slice(in[0], 1, 0, 1), {2, 5, 4}); }, {x});
  CheckGradients([](V in) { return fn::cat({in[0], fn::mul(in[0], in[0])}, 1); }, {x});
  CheckGradients([](V in) { return fn::stack({in[0], in[0]}, 0); }, {x});
}

TEST_CASE("index_select and gather") {
  Tensor x = FromVector({0, 1, 2, 10, 11, 12, 20, 21, 22}, {3, 3});
  Tensor idx = fn::from_blob_copy(std::vector<int64_t>{2, 0, 2}.data(), {3}, DType::kInt64);
  CheckClose(fn::index_select(x, 0, idx), {20, 21, 22, 0, 1, 2, 20, 21, 22});
  CheckClose(fn::index_select(x, 1, idx), {2, 0, 2, 12, 10, 12, 22, 20, 22});
  Tensor gi = fn::from_blob_copy(std::vector<int64_t>{1, 0, 2}.data(), {3, 1}, DType::kInt64);
  CheckClose(fn::gather(x, 1, gi), {1, 10, 22});
  Tensor bad = fn::from_blob_copy(std::vector<int64_t>{3}.data(), {1}, DType::kInt64);
  REQUIRE_THROWS_WITH(fn::index_select(x, 0, bad),
                      "index_select: index 3 is out of bounds for dimension 0 with size 3");
  using V = const std::vector<Tensor>&;
  Tensor y = RandLeaf({3, 3});
  CheckGradients([idx](V in) { return fn::index_select(in[0], 0, idx); }, {y});
  CheckGradients([idx](V in) { return fn::index_select(in[0], 1, idx); }, {y});
  CheckGradients([gi](V in) { return fn::gather(in[0], 1, gi); }, {y});
}

TEST_CASE("creation and random") {
  CheckClose(fn::eye(2, 3), {1, 0, 0, 0, 1, 0});
  CheckClose(fn::arange(1, 2, 0.25, DType::kFloat32), {1, 1.25, 1.5, 1.75});
  CheckClose(fn::full({2}, 7.5), {7.5, 7.5});
  fn::manual_seed(42);
  std::vector<double> r1 = ToVector(fn::randn({1000}));
  std::vector<double> u1 = ToVector(fn::rand({1000}));
  fn::manual_seed(42);
  CHECK(ToVector(fn::randn({1000})) == r1);
  CHECK(ToVector(fn::rand({1000})) == u1);
  double mean = 0, var = 0;
  for (double v : r1) mean += v / r1.size();
  for (double v : r1) var += (v - mean) * (v - mean) / r1.size();
  CHECK(std::abs(mean) < 0.1);
  CHECK(std::abs(var - 1) < 0.1);
  for (double v : u1) CHECK((v >= 0 && v < 1));
  std::vector<double> ri = ToVector(fn::randint(3, 7, {500}));
  for (double v : ri) CHECK((v >= 3 && v < 7));
  std::vector<double> p = ToVector(fn::randperm(50));
  std::sort(p.begin(), p.end());
  for (int i = 0; i < 50; ++i) CHECK(p[i] == i);
  REQUIRE_THROWS_WITH(fn::randint(5, 5, {2}), "randint: expected low < high, got low=5, high=5");
}

TEST_CASE("half types round-trip through float32 and compute") {
  Tensor x = FromVector({1.5, -2.25, 65504, 1e-3}, {4});
  CheckClose(fn::to_dtype(fn::to_dtype(x, DType::kFloat16), DType::kFloat32),
             {1.5, -2.25, 65504, 1e-3}, 1e-3);
  CheckClose(fn::to_dtype(fn::to_dtype(x, DType::kBFloat16), DType::kFloat32),
             {1.5, -2.25, 65536, 1e-3}, 1e-2);
  // Ops compute on them (in float32 where the kernel has no half path; half_test.cc).
  Tensor h = fn::to_dtype(x, DType::kFloat16);
  Tensor half = fn::mul_scalar(h, 0.5);
  CHECK(half.dtype() == DType::kFloat16);
  CheckClose(half, {0.75, -1.125, 32752, 5e-4}, 1e-3);
}

}  // namespace
}  // namespace oneflow
