// The everyday-API ops (core/ops/sort.cc, the tril/triu/flip/scatter block of core/ops/index.cc,
// multinomial in core/ops/random.cc, the composites of core/ops/everyday.cc): each forward
// against a naive loop, each gradient against finite differences, each user error on its text.
#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "core/op_registry.h"
#include "tests/test_util.h"

namespace oneflow {
namespace {

using testing::CheckClose;
using testing::CheckGradients;
using testing::FromVector;
using testing::ToVector;
using V = const std::vector<Tensor>&;

Tensor RandLeaf(const Shape& s, double lo = -1, double hi = 1) {
  Tensor t = fn::uniform(s, lo, hi, DType::kFloat64);
  t.set_requires_grad(true);
  return t;
}

// Element (i, j, k) of a contiguous 3-D view of v with dims (a, b, c).
struct Idx3 {
  int64_t a, b, c;
  int64_t operator()(int64_t i, int64_t j, int64_t k) const { return (i * b + j) * c + k; }
};

TEST_CASE("sort: stable, both directions, along any dim, NaN last; argsort and topk") {
  fn::manual_seed(3);
  // Whole numbers in a small range: plenty of ties to show stability.
  Tensor x = fn::to_dtype(fn::randint(0, 4, {3, 7, 2}), DType::kFloat64);
  std::vector<double> xv = ToVector(x);
  Idx3 at{3, 7, 2};
  for (bool desc : {false, true}) {
    auto [v, i] = fn::sort(x, 1, desc);
    CHECK(i.dtype() == DType::kInt64);
    std::vector<double> vv = ToVector(v), iv = ToVector(i);
    for (int64_t a = 0; a < 3; ++a)
      for (int64_t c = 0; c < 2; ++c) {
        std::vector<int64_t> order(7);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) {
          return desc ? xv[at(a, p, c)] > xv[at(a, q, c)] : xv[at(a, p, c)] < xv[at(a, q, c)];
        });
        for (int64_t j = 0; j < 7; ++j) {
          INFO("row " << a << "," << c << " position " << j << " descending " << desc);
          REQUIRE(iv[at(a, j, c)] == order[j]);
          REQUIRE(vv[at(a, j, c)] == xv[at(a, order[j], c)]);
        }
      }
  }
  Tensor nan = FromVector({3, NAN, -1, 2}, {4}, DType::kFloat64);
  CheckClose(fn::sort(nan, 0).second, {2, 3, 0, 1});
  CheckClose(fn::sort(nan, 0, true).second, {1, 0, 3, 2});
  CheckClose(fn::argsort(FromVector({5, 1, 4}, {3}), 0), {1, 2, 0});
  Tensor y = FromVector({4, 9, 1, 7, 3, 8}, {2, 3});
  auto [tv, ti] = fn::topk(y, 2, 1);
  CheckClose(tv, {9, 4, 8, 7});
  CheckClose(ti, {1, 0, 2, 0});
  auto [sv, si] = fn::topk(y, 1, 0, /*largest=*/false);
  CheckClose(sv, {4, 3, 1});
  CheckClose(si, {0, 1, 0});
  REQUIRE_THROWS_WITH(fn::topk(y, 4, 1), "topk: k must be in [0, 3] for dim 1 of size 3, got 4");
  REQUIRE_THROWS_WITH(fn::sort(y, 2), Catch::Contains("sort: dim 2 out of range"));
}

TEST_CASE("sort, topk: gradients go back to where each value came from") {
  Tensor x = RandLeaf({3, 5});
  CheckGradients([](V in) { return fn::sort(in[0], 1, true).first; }, {x});
  CheckGradients([](V in) { return fn::sort(in[0], 0).first; }, {x});
  CheckGradients([](V in) { return fn::topk(in[0], 2, 1).first; }, {x});
}

TEST_CASE("cumsum and cumprod against loops; integer inputs scan in int64") {
  Tensor x = FromVector({1, 2, 3, 4, 5, 6}, {2, 3}, DType::kFloat64);
  CheckClose(fn::cumsum(x, 1), {1, 3, 6, 4, 9, 15});
  CheckClose(fn::cumsum(x, 0), {1, 2, 3, 5, 7, 9});
  CheckClose(fn::cumprod(x, 1), {1, 2, 6, 4, 20, 120});
  CheckClose(fn::cumprod(x, -2), {1, 2, 3, 4, 10, 18});
  Tensor b = FromVector({1, 0, 1, 1}, {4}, DType::kBool);
  CHECK(fn::cumsum(b, 0).dtype() == DType::kInt64);
  CheckClose(fn::cumsum(b, 0), {1, 1, 2, 3});
  Tensor i = FromVector({2, 3, 4}, {3}, DType::kInt32);
  CHECK(fn::cumprod(i, 0).dtype() == DType::kInt64);
  CheckClose(fn::cumprod(i, 0), {2, 6, 24});
  REQUIRE_THROWS_WITH(fn::cumsum(x, 2), Catch::Contains("cumsum: dim 2 out of range"));
}

TEST_CASE("cumsum and cumprod gradients, cumprod also with zeros in the input") {
  Tensor x = RandLeaf({3, 4}, 0.5, 1.5);
  CheckGradients([](V in) { return fn::cumsum(in[0], 1); }, {x});
  CheckGradients([](V in) { return fn::cumsum(in[0], 0); }, {x});
  CheckGradients([](V in) { return fn::cumprod(in[0], 1); }, {x});
  CheckGradients([](V in) { return fn::cumprod(in[0], 0); }, {x});
  // One zero, two zeros, a zero first and last in a row.
  Tensor z = FromVector({2, 0, 3, 0.5, 0, 1.5, 0, 2, 0, 0.7, 1.2, 0.9, 1.1, 0.8, 0}, {3, 5},
                        DType::kFloat64);
  z.set_requires_grad(true);
  CheckGradients([](V in) { return fn::cumprod(in[0], 1); }, {z});
  // The gradient of the first zero by hand: x = [2, 0, 3], g = 1 -> d/dx1 = 2 + 2 * 3.
  Tensor w = FromVector({2, 0, 3}, {3}, DType::kFloat64);
  w.set_requires_grad(true);
  fn::sum(fn::cumprod(w, 0)).backward();
  CheckClose(w.grad(), {1, 8, 0});
}

TEST_CASE("tril and triu against loops, batched, every offset; gradients") {
  Tensor x = fn::uniform({2, 4, 5}, -1, 1, DType::kFloat64);
  std::vector<double> xv = ToVector(x);
  Idx3 at{2, 4, 5};
  for (int64_t k : {-2, -1, 0, 1, 3}) {
    std::vector<double> lo = xv, up = xv;
    for (int64_t m = 0; m < 2; ++m)
      for (int64_t i = 0; i < 4; ++i)
        for (int64_t j = 0; j < 5; ++j) {
          if (j - i > k) lo[at(m, i, j)] = 0;
          if (j - i < k) up[at(m, i, j)] = 0;
        }
    INFO("diagonal " << k);
    CheckClose(fn::tril(x, k), lo);
    CheckClose(fn::triu(x, k), up);
  }
  Tensor g = RandLeaf({3, 4});
  CheckGradients([](V in) { return fn::tril(in[0], 1); }, {g});
  CheckGradients([](V in) { return fn::triu(in[0], -1); }, {g});
  REQUIRE_THROWS_WITH(fn::tril(fn::ones({3}), 0),
                      "tril: expected a tensor with at least 2 dims, got 1 (shape (3,))");
}

TEST_CASE("flip and roll against loops; gradients") {
  Tensor x = FromVector({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {2, 3, 2});
  CheckClose(fn::flip(x, {1}), {4, 5, 2, 3, 0, 1, 10, 11, 8, 9, 6, 7});
  CheckClose(fn::flip(x, {0, -1}), {7, 6, 9, 8, 11, 10, 1, 0, 3, 2, 5, 4});
  // On a transposed view.
  CheckClose(fn::flip(fn::transpose(FromVector({1, 2, 3, 4, 5, 6}, {2, 3}), 0, 1), {0}),
             {3, 6, 2, 5, 1, 4});
  REQUIRE_THROWS_WITH(fn::flip(x, {1, -2}), "flip: dim 1 appears more than once in dims");
  Tensor r = FromVector({1, 2, 3, 4, 5, 6}, {2, 3});
  CheckClose(fn::roll(r, {1}, {1}), {3, 1, 2, 6, 4, 5});
  CheckClose(fn::roll(r, {-1, 4}, {0, 1}), {6, 4, 5, 3, 1, 2});
  CheckClose(fn::roll(r, {2}, {}), {5, 6, 1, 2, 3, 4});
  Tensor g = RandLeaf({3, 4});
  CheckGradients([](V in) { return fn::flip(in[0], {0, 1}); }, {g});
  CheckGradients([](V in) { return fn::roll(in[0], {2, -1}, {0, 1}); }, {g});
}

TEST_CASE("scatter and scatter_add against loops, with an index smaller than the input") {
  Tensor x = fn::uniform({3, 5}, -1, 1, DType::kFloat64);
  Tensor src = fn::uniform({3, 4}, -1, 1, DType::kFloat64);
  Tensor index = FromVector({4, 0, 2, 2, 1, 3, 0, 4, 0, 0, 1, 1}, {3, 4}, DType::kInt64);
  // Along dim 1 with a 2 x 2 index: only src[:2, :2] is used.
  Tensor small = FromVector({3, 1, 0, 4}, {2, 2}, DType::kInt64);
  std::vector<double> xv = ToVector(x), sv = ToVector(src), iv = ToVector(index);
  std::vector<double> added = xv;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j)
      added[i * 5 + static_cast<int64_t>(iv[i * 4 + j])] += sv[i * 4 + j];
  CheckClose(fn::scatter_add(x, 1, index, src), added);
  std::vector<double> written = xv;
  std::vector<double> sm = ToVector(small);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 2; ++j)
      written[i * 5 + static_cast<int64_t>(sm[i * 2 + j])] = sv[i * 4 + j];
  CheckClose(fn::scatter(x, 1, small, src), written);
  // Along dim 0, a number as the source.
  Tensor rows = FromVector({2, 0, 1}, {1, 3}, DType::kInt64);
  std::vector<double> filled = xv;
  for (int64_t j = 0; j < 3; ++j) filled[static_cast<int64_t>(ToVector(rows)[j]) * 5 + j] = 7.5;
  CheckClose(fn::scatter(x, 0, rows, 7.5), filled);
  REQUIRE_THROWS_WITH(fn::scatter(x, 1, FromVector({5}, {1, 1}, DType::kInt64), src),
                      "scatter: index 5 is out of bounds for dimension 1 with size 5");
  REQUIRE_THROWS_WITH(
      fn::scatter_add(x, 1, fn::zeros({4, 1}, DType::kInt64), fn::ones({4, 1}, DType::kFloat64)),
      "scatter_add: index shape (4, 1) must not exceed input shape (3, 5) except "
      "in dim 1");
  REQUIRE_THROWS_WITH(fn::scatter(x, 1, fn::zeros({1, 1}), src),
                      "scatter: index must be an int64 or int32 tensor, got float32");
}

TEST_CASE("scatter gradients: overwritten places take none, src takes the gathered gradient") {
  Tensor x = RandLeaf({3, 5});
  Tensor src = RandLeaf({3, 4});
  // Distinct places per row (scatter's winner among duplicates is unspecified).
  Tensor index = FromVector({4, 0, 2, 1, 1, 3, 0, 4, 0, 2, 3, 1}, {3, 4}, DType::kInt64);
  Tensor small = FromVector({3, 1, 0, 4}, {2, 2}, DType::kInt64);
  CheckGradients([&](V in) { return fn::scatter(in[0], 1, index, in[1]); }, {x, src});
  CheckGradients([&](V in) { return fn::scatter(in[0], 1, small, in[1]); }, {x, src});
  Tensor dup = FromVector({4, 4, 2, 2, 1, 1, 0, 0, 3, 3, 3, 1}, {3, 4}, DType::kInt64);
  CheckGradients([&](V in) { return fn::scatter_add(in[0], 1, dup, in[1]); }, {x, src});
  Tensor rows = FromVector({2, 0, 1, 1, 2, 0}, {2, 3}, DType::kInt64);
  CheckGradients([&](V in) { return fn::scatter_add(in[0], 0, rows, in[1]); },
                 {x, RandLeaf({2, 4})});
}

TEST_CASE(
    "multinomial: reproducible under manual_seed, follows the weights, no repeats "
    "without replacement") {
  Tensor p = FromVector({0.1, 0, 0.6, 0.3, 1, 1, 1, 1}, {2, 4});
  fn::manual_seed(11);
  std::vector<double> a = ToVector(fn::multinomial(p, 3, false));
  fn::manual_seed(11);
  std::vector<double> b = ToVector(fn::multinomial(p, 3, false));
  CHECK(a == b);
  CHECK(ToVector(fn::multinomial(p, 3, false)) != a);  // the generator moved on
  for (int64_t r = 0; r < 2; ++r) {
    std::set<double> seen(a.begin() + r * 3, a.begin() + r * 3 + 3);
    CHECK(seen.size() == 3);
    if (r == 0) CHECK(seen.count(1) == 0);  // weight 0 is never drawn
  }
  std::vector<double> many =
      ToVector(fn::multinomial(FromVector({0.1, 0, 0.6, 0.3}, {4}), 20000, true));
  std::map<double, int> count;
  for (double v : many) ++count[v];
  CHECK(count[1] == 0);
  CHECK(std::abs(count[2] / 20000.0 - 0.6) < 0.02);
  CHECK(std::abs(count[3] / 20000.0 - 0.3) < 0.02);
  REQUIRE_THROWS_WITH(fn::multinomial(p, 5, false),
                      "multinomial: cannot draw 5 samples without replacement from 4 categories");
  REQUIRE_THROWS_WITH(fn::multinomial(p, 4, false),
                      "multinomial: cannot draw 4 samples without replacement from row 0, which "
                      "has 3 nonzero probabilities");
  REQUIRE_THROWS_WITH(fn::multinomial(FromVector({0.5, -1}, {2}), 1, true),
                      "multinomial: probabilities must be finite and non-negative, got -1");
}

TEST_CASE("creation: linspace, meshgrid, diag and diagonal") {
  CheckClose(fn::linspace(0, 1, 5), {0, 0.25, 0.5, 0.75, 1});
  CheckClose(fn::linspace(-2, 7, 1), {-2});
  CHECK(fn::linspace(3, 4, 0).numel() == 0);
  auto g = fn::meshgrid({FromVector({1, 2}, {2}), FromVector({3, 4, 5}, {3})}, "ij");
  CHECK(g[0].shape() == Shape({2, 3}));
  CheckClose(g[0], {1, 1, 1, 2, 2, 2});
  CheckClose(g[1], {3, 4, 5, 3, 4, 5});
  auto xy = fn::meshgrid({FromVector({1, 2}, {2}), FromVector({3, 4, 5}, {3})}, "xy");
  CHECK(xy[0].shape() == Shape({3, 2}));
  CheckClose(xy[0], {1, 2, 1, 2, 1, 2});
  CheckClose(xy[1], {3, 3, 4, 4, 5, 5});
  REQUIRE_THROWS_WITH(fn::meshgrid({fn::ones({2})}, "ji"),
                      "meshgrid: indexing must be 'ij' or 'xy', got 'ji'");
  Tensor v = FromVector({1, 2, 3}, {3});
  CheckClose(fn::diag(v), {1, 0, 0, 0, 2, 0, 0, 0, 3});
  CheckClose(fn::diag(v, 1), {0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 3, 0, 0, 0, 0});
  CheckClose(fn::diag(v, -1), {0, 0, 0, 0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 3, 0});
  Tensor m = FromVector({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4});
  CheckClose(fn::diag(m), {1, 6, 11});
  CheckClose(fn::diag(m, 1), {2, 7, 12});
  CheckClose(fn::diag(m, -1), {5, 10});
  CHECK(fn::diag(m, 5).numel() == 0);
  Tensor b = fn::reshape(fn::arange(0, 24, 1), {2, 3, 4});
  CheckClose(fn::diagonal(b, 0, 1, 2), {0, 5, 10, 12, 17, 22});
  CheckClose(fn::diagonal(b, 1, 0, 2), {1, 14, 5, 18, 9, 22});
  Tensor x = RandLeaf({3});
  CheckGradients([](V in) { return fn::diag(in[0], -2); }, {x});
  Tensor y = RandLeaf({3, 4});
  CheckGradients([](V in) { return fn::diag(in[0], 1); }, {y});
  REQUIRE_THROWS_WITH(fn::diag(fn::ones({2, 2, 2})),
                      "diag: expected a 1-D or 2-D tensor, got shape (2, 2, 2)");
}

TEST_CASE("split, chunk, narrow, unflatten, repeat, repeat_interleave, take_along_dim") {
  Tensor x = fn::reshape(fn::arange(0, 10, 1), {5, 2});
  auto parts = fn::split(x, 2, 0);
  REQUIRE(parts.size() == 3);
  CheckClose(parts[2], {8, 9});
  auto sized = fn::split_with_sizes(x, {1, 4}, 0);
  CheckClose(sized[0], {0, 1});
  REQUIRE_THROWS_WITH(fn::split_with_sizes(x, {1, 3}, 0),
                      "split: sizes (1, 3) sum to 4 but dim 0 has size 5");
  auto ch = fn::chunk(x, 3, 0);  // sizes 2, 2, 1
  REQUIRE(ch.size() == 3);
  CHECK(ch[2].shape() == Shape({1, 2}));
  CheckClose(fn::narrow(x, 0, 1, 2), {2, 3, 4, 5});
  CheckClose(fn::narrow(x, 0, -2, 2), {6, 7, 8, 9});
  REQUIRE_THROWS_WITH(fn::narrow(x, 0, 4, 2), "narrow: start 4 + length 2 exceeds dim 0 of size 5");
  CHECK(fn::unflatten(fn::arange(0, 12, 1), 0, {3, -1}).shape() == Shape({3, 4}));
  REQUIRE_THROWS_WITH(fn::unflatten(fn::arange(0, 12, 1), 0, {5, -1}),
                      "unflatten: sizes (5, -1) do not multiply to dim 0's size 12");
  Tensor r = FromVector({1, 2, 3, 4}, {2, 2});
  CheckClose(fn::repeat(r, {1, 2}), {1, 2, 1, 2, 3, 4, 3, 4});
  CHECK(fn::repeat(r, {2, 1, 1}).shape() == Shape({2, 2, 2}));
  CheckClose(fn::repeat_interleave(r, 2, 0), {1, 2, 1, 2, 3, 4, 3, 4});
  CheckClose(fn::repeat_interleave(r, 2, std::nullopt), {1, 1, 2, 2, 3, 3, 4, 4});
  CheckClose(fn::repeat_interleave(r, FromVector({0, 3}, {2}, DType::kInt64), 1),
             {2, 2, 2, 4, 4, 4});
  Tensor t = FromVector({10, 30, 20, 60, 50, 40}, {2, 3});
  Tensor idx = FromVector({2, 0}, {2, 1}, DType::kInt64);
  CheckClose(fn::take_along_dim(t, idx, 1), {20, 60});
  CheckClose(fn::take_along_dim(t, FromVector({5, 0}, {2}, DType::kInt64), std::nullopt), {40, 10});
  // Gradients of the composites.
  Tensor a = RandLeaf({3, 4});
  CheckGradients([](V in) { return fn::repeat(in[0], {2, 1, 3}); }, {a});
  CheckGradients([](V in) { return fn::repeat_interleave(in[0], 3, 1); }, {a});
  CheckGradients([](V in) { return fn::cat(fn::chunk(in[0], 3, 1), 0); }, {a});
  CheckGradients(
      [](V in) {
        return fn::take_along_dim(in[0], FromVector({1, 3, 0}, {3, 1}, DType::kInt64), 1);
      },
      {a});
}

TEST_CASE("one_hot, all, any") {
  Tensor c = FromVector({2, 0, 1}, {3}, DType::kInt64);
  Tensor oh = fn::one_hot(c);
  CHECK(oh.dtype() == DType::kInt64);
  CheckClose(oh, {0, 0, 1, 1, 0, 0, 0, 1, 0});
  CHECK(fn::one_hot(c, 5).shape() == Shape({3, 5}));
  REQUIRE_THROWS_WITH(fn::one_hot(c, 2),
                      "one_hot: class values must be in [0, 2), got values in [0, 2]");
  Tensor m = FromVector({1, 0, 2, 3, 4, 5}, {2, 3});
  CheckClose(fn::all(m, {1}), {0, 1});
  CheckClose(fn::any(fn::eq(m, fn::scalar_like(0, m)), {0}, true), {0, 1, 0});
  CHECK(fn::all(m).dtype() == DType::kBool);
  CheckClose(fn::all(fn::ones({0})), {1});
  CheckClose(fn::any(fn::ones({0})), std::vector<double>{0});
}

TEST_CASE("median and mode against loops; gradients") {
  Tensor x = FromVector({3, 1, 2, 9, 4, 4, 7, 4}, {2, 4});
  auto [v, i] = fn::median(x, 1);
  CheckClose(v, {2, 4});  // lower median of an even count
  CheckClose(
      fn::index_select(fn::reshape(x, {-1}), 0, fn::add(i, FromVector({0, 4}, {2}, DType::kInt64))),
      {2, 4});
  CheckClose(fn::median_all(x), {4});
  CHECK(std::isnan(ToVector(fn::median(FromVector({1, NAN, 3}, {3}), 0).first)[0]));
  auto [mv, mi] = fn::mode(FromVector({1, 2, 2, 3, 2, 1, 3, 3, 1, 1}, {2, 5}), 1);
  CheckClose(mv, {2, 1});
  CheckClose(mi, {4, 4});                                         // the last occurrence
  auto [tv, ti] = fn::mode(FromVector({3, 1, 3, 1, 5}, {5}), 0);  // tie: the smaller value
  CheckClose(tv, {1});
  CheckClose(ti, {3});
  Tensor g = RandLeaf({3, 5});
  CheckGradients([](V in) { return fn::median(in[0], 1).first; }, {g});
  CheckGradients([](V in) { return fn::median_all(in[0]); }, {g});
}

TEST_CASE("unique: sorted values, inverse and counts") {
  Tensor x = FromVector({3, 1, 2, 3, 1, 1}, {2, 3}, DType::kInt64);
  fn::UniqueResult r = fn::unique(x);
  CheckClose(r.values, {1, 2, 3});
  CheckClose(r.inverse, {2, 0, 1, 2, 0, 0});
  CHECK(r.inverse.shape() == x.shape());
  CheckClose(r.counts, {3, 1, 2});
}

TEST_CASE("bmm, addmm, baddbmm, outer against loops; gradients") {
  Tensor a = fn::uniform({2, 3, 4}, -1, 1, DType::kFloat64);
  Tensor b = fn::uniform({2, 4, 5}, -1, 1, DType::kFloat64);
  std::vector<double> av = ToVector(a), bv = ToVector(b), want(2 * 3 * 5, 0.0);
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 5; ++j)
        for (int64_t k = 0; k < 4; ++k)
          want[(n * 3 + i) * 5 + j] += av[(n * 3 + i) * 4 + k] * bv[(n * 4 + k) * 5 + j];
  CheckClose(fn::bmm(a, b), want);
  Tensor c = fn::uniform({3, 5}, -1, 1, DType::kFloat64);
  std::vector<double> cv = ToVector(c), bd = want;
  for (size_t e = 0; e < bd.size(); ++e) bd[e] = 0.5 * cv[e % 15] + 2 * want[e];
  CheckClose(fn::baddbmm(c, a, b, 0.5, 2), bd);
  std::vector<double> am(15);
  for (int64_t e = 0; e < 15; ++e) am[e] = -1 * cv[e] + want[e];
  CheckClose(fn::addmm(c, fn::select(a, 0, 0), fn::select(b, 0, 0), -1, 1), am);
  Tensor nan = fn::full({3, 5}, NAN, DType::kFloat64);
  CheckClose(fn::addmm(nan, fn::select(a, 0, 0), fn::select(b, 0, 0), 0, 1),
             std::vector<double>(want.begin(), want.begin() + 15));  // beta 0 ignores input
  CheckClose(fn::outer(FromVector({1, 2}, {2}), FromVector({3, 4, 5}, {3})), {3, 4, 5, 6, 8, 10});
  REQUIRE_THROWS_WITH(fn::bmm(fn::ones({2, 3}), fn::ones({2, 3, 4})),
                      "bmm: expected 3-D tensors, got shapes (2, 3) and (2, 3, 4)");
  REQUIRE_THROWS_WITH(
      fn::addmm(fn::ones({4}), fn::ones({2, 3}), fn::ones({3, 5})),
      "addmm: input of shape (4,) does not broadcast to the product's shape (2, 5)");
  Tensor x = RandLeaf({2, 3}), m1 = RandLeaf({2, 4}), m2 = RandLeaf({4, 3});
  CheckGradients([](V in) { return fn::addmm(in[0], in[1], in[2], 0.5, -1.5); }, {x, m1, m2});
  CheckGradients([](V in) { return fn::outer(in[0], in[1]); }, {RandLeaf({3}), RandLeaf({2})});
}

TEST_CASE("einsum against explicit compositions; gradients; malformed equations") {
  Tensor a = fn::uniform({2, 3, 4}, -1, 1, DType::kFloat64);
  Tensor b = fn::uniform({2, 4, 5}, -1, 1, DType::kFloat64);
  CheckClose(fn::einsum("bij,bjk->bik", {a, b}), fn::matmul(a, b));
  CheckClose(fn::einsum("bij, bjk", {a, b}), fn::sum(fn::matmul(a, b), {0}));  // implicit: "ik"
  CheckClose(fn::einsum("...ij,...jk->...ik", {a, b}), fn::matmul(a, b));
  Tensor m = fn::uniform({3, 4}, -1, 1, DType::kFloat64);
  CheckClose(fn::einsum("ij->ji", {m}), fn::contiguous(fn::transpose(m, 0, 1)));
  Tensor sq = fn::uniform({4, 4}, -1, 1, DType::kFloat64);
  CheckClose(fn::einsum("ii->i", {sq}), fn::diagonal(sq));
  CheckClose(fn::einsum("ii", {sq}), fn::sum(fn::diagonal(sq)));
  Tensor u = FromVector({1, 2}, {2}), w = FromVector({3, 4, 5}, {3});
  CheckClose(fn::einsum("i,j->ij", {u, w}), fn::outer(u, w));
  Tensor q = fn::uniform({2, 2, 3, 4}, -1, 1, DType::kFloat64);
  Tensor k = fn::uniform({2, 2, 5, 4}, -1, 1, DType::kFloat64);
  CheckClose(fn::einsum("bhqd,bhkd->bhqk", {q, k}), fn::matmul(q, fn::transpose(k, 2, 3)));
  CheckClose(fn::einsum("ij,ij->", {m, m}), fn::sum(fn::mul(m, m)));
  CheckClose(
      fn::einsum("ij,jk,kl->il",
                 {m, fn::select(b, 0, 0), fn::transpose(fn::select(b, 1, 0), 0, 1)}),
      fn::matmul(fn::matmul(m, fn::select(b, 0, 0)), fn::transpose(fn::select(b, 1, 0), 0, 1)));
  CheckGradients(
      [](V in) {
        return fn::einsum("bij,bjk->bik", {in[0], in[1]});
      },
      {RandLeaf({2, 3, 4}), RandLeaf({2, 4, 2})});
  CheckGradients([](V in) { return fn::einsum("ii->i", {in[0]}); }, {RandLeaf({3, 3})});
  CheckGradients(
      [](V in) {
        return fn::einsum("bhqd,bhkd->bhqk", {in[0], in[1]});
      },
      {RandLeaf({1, 2, 3, 2}), RandLeaf({1, 2, 2, 2})});
  REQUIRE_THROWS_WITH(fn::einsum("ij,jk->ik", {m}),
                      "einsum: 2 input terms for 1 operands in equation 'ij,jk->ik'");
  REQUIRE_THROWS_WITH(fn::einsum("ijk->i", {m}),
                      "einsum: term 'ijk' names 3 dims but operand 0 has 2 (shape (3, 4)) in "
                      "equation 'ijk->i'");
  REQUIRE_THROWS_WITH(fn::einsum("ij->iz", {m}),
                      "einsum: output label 'z' is not in any input in equation 'ij->iz'");
  REQUIRE_THROWS_WITH(fn::einsum("i1->i", {u}),
                      "einsum: invalid character '1' in equation 'i1->i'");
  REQUIRE_THROWS_WITH(fn::einsum("ij,ij->i", {m, sq}),
                      "einsum: label 'i' has sizes 3 and 4 in equation 'ij,ij->i'");
}

}  // namespace
}  // namespace oneflow
