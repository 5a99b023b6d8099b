// Shard windows (core/shard_window.h): a creation op under a scope builds only its window, and
// a random one draws the numbers the whole draw holds there.
#include "core/shard_window.h"

#include "core/functional.h"
#include "tests/test_util.h"

namespace oneflow {
namespace {

// The window [start, start + local) of a (5, 7) tensor.
ShardWindowFn Window(std::vector<int64_t> start, std::vector<int64_t> local) {
  return [=](const Shape&) { return ShardWindow{start, Shape(local)}; };
}

}  // namespace

TEST_CASE("ForEachLogicalIndex walks a window in row-major order") {
  std::vector<std::pair<int64_t, int64_t>> seen;
  ForEachLogicalIndex(Shape({5, 7}), {1, 2}, Shape({2, 3}),
                      [&](int64_t i, int64_t g) { seen.emplace_back(i, g); });
  const std::vector<std::pair<int64_t, int64_t>> want = {{0, 9},  {1, 10}, {2, 11},
                                                         {3, 16}, {4, 17}, {5, 18}};
  CHECK(seen == want);
}

TEST_CASE("random and filled creation under a window build the window of the whole") {
  for (int kind = 0; kind < 3; ++kind) {
    auto make = [&] {
      const Shape s({5, 7});
      if (kind == 0) return fn::randn(s, DType::kFloat32, Device::CPU());
      if (kind == 1) return fn::rand(s, DType::kFloat64, Device::CPU());
      return fn::full(s, 3.0, DType::kFloat32, Device::CPU());
    };
    fn::manual_seed(9);
    Tensor whole = fn::contiguous_copy(fn::slice(fn::slice(make(), 0, 1, 3), 1, 2, 5));
    const uint64_t after_whole = fn::generator_state().second;
    fn::manual_seed(9);
    ShardWindowScope scope(Window({1, 2}, {2, 3}));
    Tensor part = make();
    CHECK(scope.taken());
    CHECK(scope.logical() == Shape({5, 7}));
    CHECK(fn::generator_state().second == after_whole);  // the logical draw's advance
    REQUIRE(part.shape() == Shape({2, 3}));
    CHECK(testing::ToVector(part) == testing::ToVector(whole));
    CHECK(!TakeShardWindow(Shape({5, 7})));  // once per scope
  }
}

}  // namespace oneflow
