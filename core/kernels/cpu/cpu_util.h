// Helpers for CPU kernels: contiguous inputs and strided loops over broadcast operands.
//
//   Tensor xc = Contig(x);                       // x itself when already contiguous
//   auto st = BroadcastStrides(a, out.shape());  // 0 stride on broadcast dims
#pragma once

#include <array>
#include <vector>

#include "core/tensor.h"

namespace oneflow {

// x when contiguous, else a contiguous copy (kernel-level, no autograd).
Tensor Contig(const Tensor& x);

// Strides of t viewed as shape `out` under broadcasting (0 on broadcast dims).
std::vector<int64_t> BroadcastStrides(const Tensor& t, const Shape& out);

// Calls row(offsets, n, inner_strides) for every innermost row of `shape`, where offsets[k]
// is operand k's element offset at the row start. Dims are coalesced first.
template <size_t N, typename F>
void ForEachRow(const Shape& shape, std::array<std::vector<int64_t>, N> strides, F&& row) {
  std::vector<int64_t> dims = shape.dims();
  if (shape.numel() == 0) return;
  // Coalesce adjacent dims that are contiguous for every operand.
  std::vector<int64_t> cd;
  std::array<std::vector<int64_t>, N> cs;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    bool merge = !cd.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = cs[k].back() == strides[k][i] * dims[i];
    if (merge) {
      cd.back() *= dims[i];
      for (size_t k = 0; k < N; ++k) cs[k].back() = strides[k][i];
    } else {
      cd.push_back(dims[i]);
      for (size_t k = 0; k < N; ++k) cs[k].push_back(strides[k][i]);
    }
  }
  if (cd.empty()) {
    cd.push_back(1);
    for (size_t k = 0; k < N; ++k) cs[k].push_back(0);
  }
  const int64_t nd = static_cast<int64_t>(cd.size());
  const int64_t inner = cd.back();
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = cs[k].back();
  std::vector<int64_t> idx(nd, 0);
  std::array<int64_t, N> off{};
  const int64_t rows = shape.numel() / inner;
  for (int64_t r = 0; r < rows; ++r) {
    row(off, inner, inner_strides);
    for (int64_t d = nd - 2; d >= 0; --d) {
      ++idx[d];
      for (size_t k = 0; k < N; ++k) off[k] += cs[k][d];
      if (idx[d] < cd[d]) break;
      for (size_t k = 0; k < N; ++k) off[k] -= cs[k][d] * cd[d];
      idx[d] = 0;
    }
  }
}

}  // namespace oneflow
