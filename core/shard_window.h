// Shard windows: a creation op asked for a logical tensor builds only the part one rank holds.
//
// Core knows no ranks: the global layer opens a scope with a function that gives, for the
// logical shape a creation op is asked for, the window this rank keeps (its offsets along each
// axis and its shape). The first creation op under the scope takes the window (full, empty,
// arange and the random ops: uniform, normal, randint); the random ones draw each element from
// the counter of its logical position, so a shard holds the numbers one process drawing the
// whole tensor would hold there.
//
//   ShardWindowScope scope([&](const Shape& logical) { return MyWindow(logical); });
//   Tensor shard = fn::randn(Shape({8, 4}), DType::kFloat32, Device::CPU());  // the window
//   if (scope.taken()) { ... scope.logical() is {8, 4} ... }
#pragma once

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "core/shape.h"

namespace oneflow {

struct ShardWindow {
  std::vector<int64_t> start;  // the window's first element along each axis
  Shape local;                 // the window's shape
};
using ShardWindowFn = std::function<ShardWindow(const Shape& logical)>;

// REQUIRES: scopes nest on one thread.
class ShardWindowScope {
 public:
  explicit ShardWindowScope(ShardWindowFn fn);
  ~ShardWindowScope();
  ShardWindowScope(const ShardWindowScope&) = delete;
  ShardWindowScope& operator=(const ShardWindowScope&) = delete;

  bool taken() const { return taken_; }
  const Shape& logical() const { return logical_; }

 private:
  friend std::optional<ShardWindow> TakeShardWindow(const Shape& logical);
  ShardWindowFn fn_;
  ShardWindowScope* outer_;
  bool taken_ = false;
  Shape logical_;
};

// Global work inside a scope (an op on global tensors, a layout change, reading a global
// value: flow.full(shape, global_scalar)) builds what it builds whole: the window waits for the
// creation op the scope is for.
class ShardWindowPause {
 public:
  ShardWindowPause();
  ~ShardWindowPause();
  ShardWindowPause(const ShardWindowPause&) = delete;
  ShardWindowPause& operator=(const ShardWindowPause&) = delete;

 private:
  ShardWindowScope* saved_;
};

// The innermost open scope's window for `logical`, once per scope (nullopt after, or with no
// scope): what a creation op builds instead of the whole of `logical`.
std::optional<ShardWindow> TakeShardWindow(const Shape& logical);

// Calls f(i, g) for each element of a window in row-major order: i its index in the window, g
// its row-major index in the logical tensor.
template <typename F>
void ForEachLogicalIndex(const Shape& logical, const std::vector<int64_t>& start,
                         const Shape& local, F f) {
  const int64_t n = local.numel(), nd = local.ndim();
  if (n == 0) return;
  if (nd == 0) {
    f(int64_t{0}, int64_t{0});
    return;
  }
  const int64_t row = local[nd - 1];
  std::vector<int64_t> idx(nd, 0);  // the window index of the row's first element
  for (int64_t i = 0; i < n; i += row) {
    int64_t g = 0;
    for (int64_t a = 0; a < nd; ++a) g = g * logical[a] + start[a] + idx[a];
    for (int64_t j = 0; j < row; ++j) f(i + j, g + j);
    for (int64_t a = nd - 2; a >= 0; --a) {
      if (++idx[a] < local[a]) break;
      idx[a] = 0;
    }
  }
}

// The part of a matrix's main diagonal inside a window of it (eye): the row-major offset of its
// first element in the window and how many there are; each next one is m + 1 further (m: the
// window's columns). Window element (i, j) is on it when start[0] + i == start[1] + j.
inline std::pair<int64_t, int64_t> WindowDiagonal(const std::vector<int64_t>& start,
                                                  const Shape& local) {
  const int64_t n = local[0], m = local[1], d = start[0] - start[1];
  const int64_t i0 = d < 0 ? -d : 0, i1 = n < m - d ? n : m - d;
  if (i1 <= i0) return {0, 0};
  return {i0 * m + i0 + d, i1 - i0};
}

}  // namespace oneflow
