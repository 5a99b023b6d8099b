// The everyday tensor API written from registered ops (no op of its own, so autograd, devices
// and SBP come from the parts): linspace, meshgrid, diag/diagonal, split/chunk/narrow/unflatten,
// roll, repeat, repeat_interleave, take_along_dim, one_hot, all/any, argsort/topk/median/mode,
// unique (host-side, local tensors only), and the matmul family with einsum.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "core/kernels/cpu/cpu_util.h"
#include "core/ops/op_util.h"
#include "core/size_check.h"

namespace oneflow {
namespace fn {

namespace {

// The ops here that take a dim index the tensor's sizes by it: a 0-dim tensor has none (the
// ones that accept it, as PyTorch's do, view it as 1-D first: AtLeast1d).
int64_t Wrap(int64_t dim, int64_t ndim, const char* op) {
  ONEFLOW_CHECK(ndim > 0, op, ": expected a tensor with at least 1 dim, got a 0-dim tensor");
  return WrapDim(dim, ndim, op);
}

// Integer dims of a tensor as seen by op; 0-dim tensors count as 1-D.
Tensor AtLeast1d(const Tensor& x) { return x.ndim() ? x : reshape(x, {1}); }

// The value of a one-element tensor, read on the host (a global one: its whole value, which
// every rank of the job reads together).
int64_t ReadInt(const Tensor& t) {
  Tensor v = t.is_global() ? GetGlobalHooks().whole(t.detach()) : t.detach();
  return Contig(to_dtype(to_device(v, Device::CPU()), DType::kInt64)).data<int64_t>()[0];
}

// arange(0, n) as int64 where x lives.
Tensor Positions(int64_t n, const Tensor& x) {
  return place_like(x, arange(0, static_cast<double>(n), 1, DType::kInt64, x.device()));
}

// A 0-dim int64 tensor where like lives.
Tensor IntScalar(int64_t v, const Tensor& like) {
  return constant_like(like, Shape({}), static_cast<double>(v), DType::kInt64);
}

}  // namespace

// ---------------------------------------------------------------- creation

Tensor linspace(double start, double end, int64_t steps, DType dtype, const Device& device) {
  ONEFLOW_CHECK(steps >= 0, "linspace: steps must be non-negative, got ", steps);
  if (steps == 0) return empty(Shape({0}), dtype, device);
  if (steps == 1) return full(Shape({1}), start, dtype, device);
  // PyTorch's formula: from start for the first half, from end for the second.
  const double step = (end - start) / static_cast<double>(steps - 1);
  Tensor i =
      to_dtype(arange(0, static_cast<double>(steps), 1, DType::kInt64, device), DType::kFloat64);
  Tensor from_start = add_scalar(mul_scalar(i, step), start);
  Tensor from_end =
      add_scalar(mul_scalar(add_scalar(neg(i), static_cast<double>(steps - 1)), -step), end);
  Tensor first_half = lt(i, scalar_like(static_cast<double>(steps / 2), i));
  return to_dtype(where(first_half, from_start, from_end), dtype);
}

std::vector<Tensor> meshgrid(const std::vector<Tensor>& xs, const std::string& indexing) {
  ONEFLOW_CHECK(indexing == "ij" || indexing == "xy",
                "meshgrid: indexing must be 'ij' or 'xy', got '", indexing, "'");
  const int64_t n = static_cast<int64_t>(xs.size());
  IntList shape;
  for (const Tensor& x : xs) {
    ONEFLOW_CHECK(x.ndim() <= 1, "meshgrid: expected 0-D or 1-D tensors, got shape ", x.shape());
    shape.push_back(x.numel());
  }
  // 'xy' swaps the first two output dims (Cartesian indexing).
  const bool xy = indexing == "xy" && n >= 2;
  if (xy) std::swap(shape[0], shape[1]);
  std::vector<Tensor> out;
  for (int64_t k = 0; k < n; ++k) {
    int64_t at = k;
    if (xy && k < 2) at = 1 - k;
    IntList view(n, 1);
    view[at] = xs[k].numel();
    out.push_back(expand(reshape(xs[k], view), shape));
  }
  return out;
}

// ---------------------------------------------------------------- diag, diagonal

Tensor diagonal(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  ONEFLOW_CHECK(x.ndim() >= 2, "diagonal: expected a tensor with at least 2 dims, got shape ",
                x.shape());
  const int64_t d1 = Wrap(dim1, x.ndim(), "diagonal"), d2 = Wrap(dim2, x.ndim(), "diagonal");
  ONEFLOW_CHECK(d1 != d2, "diagonal: dim1 and dim2 are both ", d1, "; they must differ");
  IntList perm;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    if (d != d1 && d != d2) perm.push_back(d);
  }
  perm.push_back(d1);
  perm.push_back(d2);
  Tensor m = permute(x, perm);  // (..., rows, cols)
  const int64_t rows = x.shape()[d1], cols = x.shape()[d2];
  const int64_t r0 = offset < 0 ? -offset : 0, c0 = offset > 0 ? offset : 0;
  const int64_t len = std::max<int64_t>(0, std::min(rows - r0, cols - c0));
  IntList lead(perm.size() - 2);
  for (size_t i = 0; i + 2 < perm.size(); ++i) lead[i] = x.shape()[perm[i]];
  // The len x len block starting at (r0, c0): its diagonal is every (len + 1)-th element.
  const int64_t nd = m.ndim();
  m = slice(slice(m, nd - 2, r0, r0 + len), nd - 1, c0, c0 + len);
  IntList flat = lead;
  flat.push_back(len * len);
  Tensor f = reshape(m, flat);
  if (len == 0) {
    IntList s = lead;
    s.push_back(0);
    return reshape(f, s);
  }
  return slice(f, f.ndim() - 1, 0, len * len, len + 1);
}

Tensor diag(const Tensor& x, int64_t diagonal_offset) {
  ONEFLOW_CHECK(x.ndim() == 1 || x.ndim() == 2, "diag: expected a 1-D or 2-D tensor, got shape ",
                x.shape());
  if (x.ndim() == 2) return diagonal(x, diagonal_offset, 0, 1);
  const int64_t n = x.shape()[0], k = std::abs(diagonal_offset);
  // [v_i, 0 x n] per row, flattened and cut to n * n, is v on the diagonal of an n x n matrix.
  Tensor z = constant_like(x, Shape({n, n}), 0.0, x.dtype());
  Tensor m = reshape(slice(reshape(cat({reshape(x, {n, 1}), z}, 1), {-1}), 0, 0, n * n), {n, n});
  if (k == 0) return m;
  Tensor side = constant_like(x, Shape({n, k}), 0.0, x.dtype());
  Tensor band = constant_like(x, Shape({k, n + k}), 0.0, x.dtype());
  if (diagonal_offset > 0) return cat({cat({side, m}, 1), band}, 0);  // v at (i, i + k)
  return cat({band, cat({m, side}, 1)}, 0);                           // v at (i + k, i)
}

// ---------------------------------------------------------------- split, chunk, narrow, ...

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  ONEFLOW_CHECK(x.ndim() > 0, "split: cannot split a 0-dim tensor");
  const int64_t d = Wrap(dim, x.ndim(), "split"), n = x.shape()[d];
  ONEFLOW_CHECK(split_size > 0 || (split_size == 0 && n == 0),
                "split: split_size must be positive, got ", split_size);
  std::vector<Tensor> out;
  if (n == 0) return {x};
  for (int64_t s = 0; s < n; s += split_size)
    out.push_back(slice(x, d, s, std::min(s + split_size, n)));
  return out;
}

std::vector<Tensor> split_with_sizes(const Tensor& x, const IntList& sizes, int64_t dim) {
  ONEFLOW_CHECK(x.ndim() > 0, "split: cannot split a 0-dim tensor");
  const int64_t d = Wrap(dim, x.ndim(), "split"), n = x.shape()[d];
  int64_t total = 0;
  for (int64_t s : sizes) {
    ONEFLOW_CHECK(s >= 0, "split: sizes must be non-negative, got ", s);
    total += s;
  }
  ONEFLOW_CHECK(total == n, "split: sizes ", Shape(sizes), " sum to ", total, " but dim ", d,
                " has size ", n);
  std::vector<Tensor> out;
  int64_t at = 0;
  for (int64_t s : sizes) {
    out.push_back(slice(x, d, at, at + s));
    at += s;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  ONEFLOW_CHECK(chunks > 0, "chunk: chunks must be positive, got ", chunks);
  ONEFLOW_CHECK(x.ndim() > 0, "chunk: cannot chunk a 0-dim tensor");
  const int64_t n = x.shape()[Wrap(dim, x.ndim(), "chunk")];
  return split(x, std::max<int64_t>((n + chunks - 1) / chunks, n == 0 ? 0 : 1), dim);
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  ONEFLOW_CHECK(x.ndim() > 0, "narrow: cannot narrow a 0-dim tensor");
  const int64_t d = Wrap(dim, x.ndim(), "narrow"), n = x.shape()[d];
  ONEFLOW_CHECK(start >= -n && start <= n, "narrow: start ", start, " is out of range for dim ", d,
                " of size ", n);
  if (start < 0) start += n;
  ONEFLOW_CHECK(length >= 0 && start + length <= n, "narrow: start ", start, " + length ", length,
                " exceeds dim ", d, " of size ", n);
  return slice(x, d, start, start + length);
}

Tensor unflatten(const Tensor& x, int64_t dim, const IntList& sizes) {
  ONEFLOW_CHECK(x.ndim() > 0, "unflatten: cannot unflatten a 0-dim tensor");
  ONEFLOW_CHECK(!sizes.empty(), "unflatten: sizes must not be empty");
  const int64_t d = Wrap(dim, x.ndim(), "unflatten"), n = x.shape()[d];
  int64_t known = 1, unknown = 0;
  for (int64_t s : sizes) {
    if (s == -1) {
      ++unknown;
    } else {
      known *= s;
    }
  }
  ONEFLOW_CHECK(unknown <= 1, "unflatten: at most one size may be -1, got ", Shape(sizes));
  ONEFLOW_CHECK(unknown ? known != 0 && n % known == 0 : known == n, "unflatten: sizes ",
                Shape(sizes), " do not multiply to dim ", d, "'s size ", n);
  IntList shape(x.shape().dims().begin(), x.shape().dims().begin() + d);
  for (int64_t s : sizes) shape.push_back(s == -1 ? n / known : s);
  shape.insert(shape.end(), x.shape().dims().begin() + d + 1, x.shape().dims().end());
  return reshape(x, shape);
}

Tensor roll(const Tensor& x, const IntList& shifts, const IntList& dims) {
  if (dims.empty()) {
    ONEFLOW_CHECK(shifts.size() == 1, "roll: without dims, shifts must be one number, got ",
                  shifts.size());
    return reshape(roll(reshape(x, {-1}), shifts, {0}), x.shape().dims());
  }
  ONEFLOW_CHECK(shifts.size() == dims.size(), "roll: got ", shifts.size(), " shifts for ",
                dims.size(), " dims; they must match");
  Tensor y = x;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = Wrap(dims[i], std::max<int64_t>(x.ndim(), 1), "roll");
    y = AtLeast1d(y);
    const int64_t n = y.shape()[d];
    if (n == 0) continue;
    const int64_t s = ((shifts[i] % n) + n) % n;
    if (s == 0) continue;
    y = cat({slice(y, d, n - s, n), slice(y, d, 0, n - s)}, d);
  }
  return x.ndim() ? y : reshape(y, {});
}

Tensor repeat(const Tensor& x, const IntList& repeats) {
  const int64_t k = static_cast<int64_t>(repeats.size());
  ONEFLOW_CHECK(k >= x.ndim(), "repeat: got ", k, " repeats for a tensor of ", x.ndim(),
                " dims; give at least one per dim");
  IntList padded(k - x.ndim(), 1);
  padded.insert(padded.end(), x.shape().dims().begin(), x.shape().dims().end());
  IntList view, big, out;
  for (int64_t i = 0; i < k; ++i) {
    ONEFLOW_CHECK(repeats[i] >= 0, "repeat: repeats must be non-negative, got ", Shape(repeats));
    view.push_back(1);
    view.push_back(padded[i]);
    big.push_back(repeats[i]);
    big.push_back(padded[i]);
    out.push_back(repeats[i] * padded[i]);
  }
  return reshape(expand(reshape(x, view), big), out);
}

Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim) {
  ONEFLOW_CHECK(repeats >= 0, "repeat_interleave: repeats must be non-negative, got ", repeats);
  if (!dim) return repeat_interleave(reshape(x, {-1}), repeats, 0);
  Tensor y = AtLeast1d(x);
  const int64_t d = Wrap(*dim, y.ndim(), "repeat_interleave");
  IntList big = y.shape().dims(), out = big;
  big.insert(big.begin() + d + 1, repeats);
  out[d] *= repeats;
  return reshape(expand(unsqueeze(y, d + 1), big), out);
}

Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim) {
  if (!dim) return repeat_interleave(reshape(x, {-1}), repeats, 0);
  Tensor y = AtLeast1d(x);
  const int64_t d = Wrap(*dim, y.ndim(), "repeat_interleave");
  ONEFLOW_CHECK(IsIntegral(repeats.dtype()),
                "repeat_interleave: repeats must be an integer tensor, got ",
                DTypeName(repeats.dtype()));
  ONEFLOW_CHECK(!repeats.is_global(),
                "repeat_interleave: a global repeats tensor is not supported; pass its to_local()");
  ONEFLOW_CHECK(repeats.numel() == 1 || (repeats.ndim() == 1 && repeats.numel() == y.shape()[d]),
                "repeat_interleave: repeats of shape ", repeats.shape(),
                " must have one element or one per element of dim ", d, " (size ", y.shape()[d],
                ")");
  Tensor r;
  {
    SizeCheckOpScope op("repeat_interleave");  // names the host read (core/sync_check.h)
    r = Contig(to_dtype(to_device(repeats.detach(), Device::CPU()), DType::kInt64));
  }
  if (r.numel() == 1) return repeat_interleave(y, r.data<int64_t>()[0], d);
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < r.numel(); ++i) {
    const int64_t c = r.data<int64_t>()[i];
    ONEFLOW_CHECK(c >= 0, "repeat_interleave: repeats must be non-negative, got ", c);
    for (int64_t j = 0; j < c; ++j) idx.push_back(i);
  }
  Tensor index = from_blob_copy(idx.data(), Shape({static_cast<int64_t>(idx.size())}),
                                DType::kInt64, y.device());
  return index_select(y, d, place_like(y, index));
}

Tensor take_along_dim(const Tensor& x, const Tensor& index, std::optional<int64_t> dim) {
  if (!dim) return gather(reshape(x, {-1}), 0, reshape(index, {-1}));
  ONEFLOW_CHECK(x.ndim() == index.ndim(), "take_along_dim: input has ", x.ndim(),
                " dims but indices have ", index.ndim(), "; they must match");
  const int64_t d = Wrap(*dim, x.ndim(), "take_along_dim");
  // Every other dim broadcasts between input and indices.
  IntList xs = x.shape().dims(), is = index.shape().dims();
  for (int64_t i = 0; i < x.ndim(); ++i) {
    if (i == d) continue;
    ONEFLOW_CHECK(xs[i] == is[i] || xs[i] == 1 || is[i] == 1, "take_along_dim: input shape ",
                  x.shape(), " and indices shape ", index.shape(), " do not broadcast outside dim ",
                  d);
    xs[i] = is[i] = std::max(xs[i], is[i]);
  }
  return gather(expand(x, xs), d, expand(index, is));
}

Tensor one_hot(const Tensor& index, int64_t num_classes) {
  ONEFLOW_CHECK(index.dtype() == DType::kInt64 || index.dtype() == DType::kInt32,
                "one_hot: expected an int64 (or int32) index tensor, got ",
                DTypeName(index.dtype()));
  if (num_classes == -1) {
    ONEFLOW_CHECK(index.numel() > 0,
                  "one_hot: cannot infer num_classes from an empty tensor; pass num_classes");
    num_classes = static_cast<int64_t>(ReadInt(max_all(index))) + 1;
  }
  ONEFLOW_CHECK(num_classes > 0, "one_hot: num_classes must be positive or -1, got ", num_classes);
  if (index.numel() > 0) {
    const int64_t lo = ReadInt(min_all(index));
    const int64_t hi = ReadInt(max_all(index));
    ONEFLOW_CHECK(lo >= 0 && hi < num_classes, "one_hot: class values must be in [0, ", num_classes,
                  "), got values in [", lo, ", ", hi, "]");
  }
  Tensor classes = Positions(num_classes, index);
  return to_dtype(eq(unsqueeze(to_dtype(index, DType::kInt64), -1), classes), DType::kInt64);
}

// ---------------------------------------------------------------- all, any

namespace {
IntList AllDims(const Tensor& x, const IntList& dims) {
  if (!dims.empty()) return dims;
  IntList all(x.ndim());
  std::iota(all.begin(), all.end(), int64_t{0});
  return all;
}

Tensor Truth(const Tensor& x, bool nonzero) {
  return nonzero ? ne(x, scalar_like(0, x)) : eq(x, scalar_like(0, x));
}

Tensor AllAny(const Tensor& x, const IntList& dims, bool keepdim, bool is_all) {
  Tensor count = x.ndim() ? sum(Truth(x, !is_all), AllDims(x, dims), keepdim)
                          : to_dtype(Truth(x, !is_all), DType::kInt64);
  Tensor r = is_all ? eq(count, scalar_like(0, count)) : gt(count, scalar_like(0, count));
  return x.dtype() == DType::kUInt8 ? to_dtype(r, DType::kUInt8) : r;  // PyTorch keeps uint8
}
}  // namespace

Tensor all(const Tensor& x, const IntList& dims, bool keepdim) {
  return AllAny(x, dims, keepdim, true);
}
Tensor any(const Tensor& x, const IntList& dims, bool keepdim) {
  return AllAny(x, dims, keepdim, false);
}

// ---------------------------------------------------------------- argsort, topk, median, mode

Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  return sort(x, dim, descending).second;
}

std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  (void)sorted;  // the k elements always come sorted, which sorted=False allows
  Tensor y = AtLeast1d(x);
  const int64_t d = Wrap(dim, y.ndim(), "topk"), n = y.shape()[d];
  ONEFLOW_CHECK(k >= 0 && k <= n, "topk: k must be in [0, ", n, "] for dim ", d, " of size ", n,
                ", got ", k);
  auto s = sort(y, d, largest);
  Tensor v = slice(s.first, d, 0, k), i = slice(s.second, d, 0, k);
  if (x.ndim() == 0) return {reshape(v, {}), reshape(i, {})};
  return {v, i};
}

std::pair<Tensor, Tensor> median(const Tensor& x, int64_t dim, bool keepdim) {
  Tensor y = AtLeast1d(x);
  const int64_t d = Wrap(dim, y.ndim(), "median"), n = y.shape()[d];
  ONEFLOW_CHECK(n > 0, "median: cannot take the median of dim ", d, " of size 0");
  auto s = sort(y, d, false);
  // The lower median; a row with a NaN has median NaN (sorted last), as in PyTorch.
  Tensor mv = slice(s.first, d, (n - 1) / 2, (n - 1) / 2 + 1);
  Tensor mi = slice(s.second, d, (n - 1) / 2, (n - 1) / 2 + 1);
  Tensor lv = slice(s.first, d, n - 1, n), li = slice(s.second, d, n - 1, n);
  Tensor nan = ne(lv.detach(), lv.detach());
  Tensor v = where(nan, lv, mv), i = where(nan, li, mi);
  if (x.ndim() == 0) return {reshape(v, {}), reshape(i, {})};
  if (!keepdim) return {squeeze(v, d), squeeze(i, d)};
  return {v, i};
}

Tensor median_all(const Tensor& x) {
  ONEFLOW_CHECK(x.numel() > 0, "median: cannot take the median of an empty tensor");
  return median(reshape(x, {-1}), 0, false).first;
}

// The most frequent value of each row (the smallest among equally frequent ones) and the index
// of its last occurrence, as PyTorch. Counts come from comparing every pair of a row (n^2
// booleans per row).
std::pair<Tensor, Tensor> mode(const Tensor& x, int64_t dim, bool keepdim) {
  Tensor y = AtLeast1d(x);
  const int64_t d = Wrap(dim, y.ndim(), "mode"), n = y.shape()[d];
  ONEFLOW_CHECK(n > 0, "mode: cannot take the mode of dim ", d, " of size 0");
  Tensor v = y.detach();
  Tensor counts = sum(eq(unsqueeze(v, d + 1), unsqueeze(v, d)), {d + 1});
  Tensor most = max(counts, d, true).first;
  Tensor candidates = eq(counts, most);
  Tensor row_max = max(v, d, true).first;
  Tensor value = min(where(candidates, v, row_max), d, true).first;
  IntList pos_shape(y.ndim(), 1);
  pos_shape[d] = n;
  Tensor pos = reshape(Positions(n, y), pos_shape);
  Tensor index = max(where(eq(v, value), pos, IntScalar(-1, pos)), d, true).first;
  Tensor out = gather(y, d, index);  // the gradient goes to that element
  if (x.ndim() == 0) return {reshape(out, {}), reshape(index, {})};
  if (!keepdim) return {squeeze(out, d), squeeze(index, d)};
  return {out, index};
}

// ---------------------------------------------------------------- unique (host side)

UniqueResult unique(const Tensor& x) {
  if (x.is_global()) {
    throw Error(
        "unique: not supported on a global tensor; use to_local() (each shard's "
        "values) or gather it first (to_global(sbp=broadcast))");
  }
  SizeCheckOpScope op("unique");  // names the host read (core/sync_check.h)
  Tensor c = Contig(to_device(x.detach(), Device::CPU()));
  const int64_t n = c.numel();
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), int64_t{0});
  UniqueResult r;
  std::vector<int64_t> inverse(n), counts;
  std::vector<int64_t> firsts;  // position in c of each unique value
  DispatchAll(c.dtype(), "unique", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = c.data<T>();
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] < p[b]; });
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = order[k];
      if (k == 0 || p[order[k - 1]] < p[i]) {
        firsts.push_back(i);
        counts.push_back(0);
      }
      ++counts.back();
      inverse[i] = static_cast<int64_t>(firsts.size()) - 1;
    }
  });
  const int64_t u = static_cast<int64_t>(firsts.size());
  Tensor first_idx = from_blob_copy(firsts.data(), Shape({u}), DType::kInt64);
  r.values = to_device(index_select(reshape(c, {-1}), 0, first_idx), x.device());
  r.inverse = to_device(from_blob_copy(inverse.data(), x.shape(), DType::kInt64), x.device());
  r.counts = to_device(from_blob_copy(counts.data(), Shape({u}), DType::kInt64), x.device());
  return r;
}

// ---------------------------------------------------------------- nms (host side)

Tensor nms(const Tensor& boxes, const Tensor& scores, double iou_threshold) {
  ONEFLOW_CHECK(boxes.ndim() == 2 && boxes.shape()[1] == 4, "nms: boxes must be (N, 4), got ",
                boxes.shape());
  ONEFLOW_CHECK(scores.ndim() == 1 && scores.shape()[0] == boxes.shape()[0],
                "nms: scores must be (N,) for ", boxes.shape()[0], " boxes, got ", scores.shape());
  auto host = [](const Tensor& t) {
    Tensor v = t.is_global() ? GetGlobalHooks().whole(t.detach()) : t.detach();
    return Contig(to_dtype(to_device(v, Device::CPU()), DType::kFloat64));
  };
  const Tensor b = host(boxes), s = host(scores);
  const double* pb = b.data<double>();
  const double* ps = s.data<double>();
  const int64_t n = b.shape()[0];
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) { return ps[i] > ps[j]; });
  auto area = [&](int64_t i) {
    return (pb[4 * i + 2] - pb[4 * i]) * (pb[4 * i + 3] - pb[4 * i + 1]);
  };
  std::vector<int64_t> keep;
  for (int64_t i : order) {
    bool suppressed = false;
    for (int64_t k : keep) {
      const double w =
          std::max(0.0, std::min(pb[4 * i + 2], pb[4 * k + 2]) - std::max(pb[4 * i], pb[4 * k]));
      const double h = std::max(
          0.0, std::min(pb[4 * i + 3], pb[4 * k + 3]) - std::max(pb[4 * i + 1], pb[4 * k + 1]));
      const double inter = w * h;
      if (inter / (area(i) + area(k) - inter) > iou_threshold) {
        suppressed = true;
        break;
      }
    }
    if (!suppressed) keep.push_back(i);
  }
  Tensor out =
      from_blob_copy(keep.data(), Shape({static_cast<int64_t>(keep.size())}), DType::kInt64);
  return place_like(boxes, out);
}

// ---------------------------------------------------------------- matmul family

Tensor bmm(const Tensor& a, const Tensor& b) {
  ONEFLOW_CHECK(a.ndim() == 3 && b.ndim() == 3, "bmm: expected 3-D tensors, got shapes ", a.shape(),
                " and ", b.shape());
  ONEFLOW_CHECK(a.shape()[0] == b.shape()[0] && a.shape()[2] == b.shape()[1],
                "bmm: cannot multiply batches of shapes ", a.shape(), " and ", b.shape());
  return matmul(a, b);
}

namespace {
// beta * input + alpha * product; beta == 0 ignores input (NaN in it does not propagate).
Tensor Scaled(const Tensor& input, const Tensor& product, double beta, double alpha,
              const char* op) {
  const Shape &in = input.shape(), &out = product.shape();
  bool fits = in.ndim() <= out.ndim();
  for (int64_t i = 1; fits && i <= in.ndim(); ++i) {
    fits = in[in.ndim() - i] == 1 || in[in.ndim() - i] == out[out.ndim() - i];
  }
  ONEFLOW_CHECK(fits, op, ": input of shape ", in, " does not broadcast to the product's shape ",
                out);
  Tensor p = alpha == 1 ? product : mul_scalar(product, alpha);
  if (beta == 0) return p;
  // The result has the product's dtype, as PyTorch's fused kernels (under autocast the product
  // is bfloat16 and a float32 input does not widen it).
  Tensor x = input.dtype() == p.dtype() ? input : to_dtype(input, p.dtype());
  return add(beta == 1 ? x : mul_scalar(x, beta), p);
}
}  // namespace

Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, double beta, double alpha) {
  ONEFLOW_CHECK(m1.ndim() == 2 && m2.ndim() == 2, "addmm: expected 2-D matrices, got shapes ",
                m1.shape(), " and ", m2.shape());
  ONEFLOW_CHECK(m1.shape()[1] == m2.shape()[0], "addmm: cannot multiply shapes ", m1.shape(),
                " and ", m2.shape());
  return Scaled(input, matmul(m1, m2), beta, alpha, "addmm");
}

Tensor baddbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, double beta, double alpha) {
  ONEFLOW_CHECK(b1.ndim() == 3 && b2.ndim() == 3, "baddbmm: expected 3-D batches, got shapes ",
                b1.shape(), " and ", b2.shape());
  return Scaled(input, bmm(b1, b2), beta, alpha, "baddbmm");
}

Tensor outer(const Tensor& a, const Tensor& b) {
  ONEFLOW_CHECK(a.ndim() == 1 && b.ndim() == 1, "outer: expected 1-D tensors, got shapes ",
                a.shape(), " and ", b.shape());
  return mul(unsqueeze(a, 1), unsqueeze(b, 0));
}

// ---------------------------------------------------------------- einsum

namespace {

constexpr int kEllipsisLabel = 1000;  // label of ellipsis dim k: kEllipsisLabel + k

struct Operand {
  Tensor t;
  std::vector<int> labels;  // one per dim of t
};

[[noreturn]] void EinsumError(const std::string& eq, const std::string& what) {
  throw Error(StrCat("einsum: ", what, " in equation '", eq, "'"));
}

// Letters of one term, with "..." as -1.
std::vector<int> ParseTerm(const std::string& term, const std::string& eq) {
  std::vector<int> out;
  bool ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    const char ch = term[i];
    if (ch == '.') {
      if (term.compare(i, 3, "...") != 0) EinsumError(eq, "a '.' that is not part of '...'");
      if (ellipsis) EinsumError(eq, "more than one '...' in one term");
      ellipsis = true;
      out.push_back(-1);
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(ch))) {
      out.push_back(static_cast<unsigned char>(ch));
    } else {
      EinsumError(eq, StrCat("invalid character '", std::string(1, ch), "'"));
    }
  }
  return out;
}

// Sums the dims whose labels are not in keep.
Operand SumOut(Operand o, const std::set<int>& keep) {
  IntList dims;
  std::vector<int> labels;
  for (size_t i = 0; i < o.labels.size(); ++i) {
    if (keep.count(o.labels[i])) {
      labels.push_back(o.labels[i]);
    } else {
      dims.push_back(static_cast<int64_t>(i));
    }
  }
  if (!dims.empty()) o.t = sum(o.t, dims, false);
  o.labels = labels;
  return o;
}

// Permutes o to the labels `order` (a permutation of o.labels).
Tensor Arrange(const Operand& o, const std::vector<int>& order) {
  IntList perm;
  for (int l : order) {
    perm.push_back(std::find(o.labels.begin(), o.labels.end(), l) - o.labels.begin());
  }
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
  return identity ? o.t : permute(o.t, perm);
}

int64_t LabelSize(const Operand& o, int label) {
  return o.t.shape()[std::find(o.labels.begin(), o.labels.end(), label) - o.labels.begin()];
}

// a and b contracted over their shared labels not in keep, as one batched matmul.
Operand Contract(Operand a, Operand b, const std::set<int>& keep) {
  std::set<int> in_b(b.labels.begin(), b.labels.end()), in_a(a.labels.begin(), a.labels.end());
  std::set<int> keep_a = keep, keep_b = keep;
  keep_a.insert(b.labels.begin(), b.labels.end());
  keep_b.insert(a.labels.begin(), a.labels.end());
  a = SumOut(a, keep_a);
  b = SumOut(b, keep_b);
  std::vector<int> batch, left, right, contracted;
  for (int l : a.labels) {
    if (in_b.count(l)) {
      (keep.count(l) ? batch : contracted).push_back(l);
    } else {
      left.push_back(l);
    }
  }
  for (int l : b.labels) {
    if (!in_a.count(l)) right.push_back(l);
  }
  // Shared labels of size 1 on one side broadcast to the other's size.
  auto sizes_of = [&](Operand& o, const std::vector<int>& ls, Operand& other) {
    IntList s;
    for (int l : ls) s.push_back(std::max(LabelSize(o, l), LabelSize(other, l)));
    return s;
  };
  IntList bs = sizes_of(a, batch, b), cs = sizes_of(a, contracted, b);
  auto product = [](const IntList& v) {
    int64_t p = 1;
    for (int64_t e : v) p *= e;
    return p;
  };
  IntList ls, rs;
  for (int l : left) ls.push_back(LabelSize(a, l));
  for (int l : right) rs.push_back(LabelSize(b, l));
  std::vector<int> order_a = batch, order_b = batch;
  order_a.insert(order_a.end(), left.begin(), left.end());
  order_a.insert(order_a.end(), contracted.begin(), contracted.end());
  order_b.insert(order_b.end(), contracted.begin(), contracted.end());
  order_b.insert(order_b.end(), right.begin(), right.end());
  IntList full_a = bs, full_b = bs;
  full_a.insert(full_a.end(), ls.begin(), ls.end());
  full_a.insert(full_a.end(), cs.begin(), cs.end());
  full_b.insert(full_b.end(), cs.begin(), cs.end());
  full_b.insert(full_b.end(), rs.begin(), rs.end());
  Tensor ta = expand(Arrange(a, order_a), full_a), tb = expand(Arrange(b, order_b), full_b);
  const int64_t nb = product(bs), nl = product(ls), nc = product(cs), nr = product(rs);
  Tensor m = matmul(reshape(ta, {nb, nl, nc}), reshape(tb, {nb, nc, nr}));
  IntList out_shape = bs;
  out_shape.insert(out_shape.end(), ls.begin(), ls.end());
  out_shape.insert(out_shape.end(), rs.begin(), rs.end());
  Operand r;
  r.t = reshape(m, out_shape);
  r.labels = batch;
  r.labels.insert(r.labels.end(), left.begin(), left.end());
  r.labels.insert(r.labels.end(), right.begin(), right.end());
  return r;
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  std::string eq;
  for (char ch : equation) {
    if (!std::isspace(static_cast<unsigned char>(ch))) eq.push_back(ch);
  }
  const size_t arrow = eq.find("->");
  if (arrow != std::string::npos && eq.find("->", arrow + 1) != std::string::npos) {
    EinsumError(eq, "more than one '->'");
  }
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  size_t start = 0;
  for (size_t i = 0; i <= lhs.size(); ++i) {
    if (i == lhs.size() || lhs[i] == ',') {
      terms.push_back(lhs.substr(start, i - start));
      start = i + 1;
    }
  }
  if (terms.size() != operands.size()) {
    EinsumError(eq, StrCat(terms.size(), " input terms for ", operands.size(), " operands"));
  }
  if (operands.empty()) EinsumError(eq, "no operands");
  // Labels per operand; ellipsis dims align to the right across operands.
  std::vector<std::vector<int>> parsed;
  int64_t ell = 0;
  for (size_t k = 0; k < terms.size(); ++k) {
    parsed.push_back(ParseTerm(terms[k], eq));
    const int64_t letters = static_cast<int64_t>(
        std::count_if(parsed[k].begin(), parsed[k].end(), [](int l) { return l >= 0; }));
    const bool has_ell = letters != static_cast<int64_t>(parsed[k].size());
    const int64_t nd = operands[k].ndim();
    if (has_ell ? nd < letters : nd != letters) {
      EinsumError(eq, StrCat("term '", terms[k], "' names ", letters, " dims but operand ", k,
                             " has ", nd, " (shape ", operands[k].shape(), ")"));
    }
    if (has_ell) ell = std::max(ell, nd - letters);
  }
  std::vector<Operand> ops;
  std::map<int, int> occurrences;
  for (size_t k = 0; k < terms.size(); ++k) {
    Operand o;
    o.t = operands[k];
    const int64_t letters = static_cast<int64_t>(
        std::count_if(parsed[k].begin(), parsed[k].end(), [](int l) { return l >= 0; }));
    const int64_t e = operands[k].ndim() - letters;
    for (int l : parsed[k]) {
      if (l >= 0) {
        o.labels.push_back(l);
      } else {
        for (int64_t i = 0; i < e; ++i) o.labels.push_back(kEllipsisLabel + ell - e + i);
      }
    }
    for (int l : o.labels) ++occurrences[l];
    ops.push_back(o);
  }
  std::vector<int> out_labels;
  if (arrow != std::string::npos) {
    const std::vector<int> out = ParseTerm(eq.substr(arrow + 2), eq);
    std::set<int> seen;
    for (int l : out) {
      if (l < 0) {
        for (int64_t i = 0; i < ell; ++i) out_labels.push_back(kEllipsisLabel + i);
        continue;
      }
      if (!seen.insert(l).second) {
        EinsumError(eq, StrCat("output label '", std::string(1, static_cast<char>(l)),
                               "' appears more than once"));
      }
      if (!occurrences.count(l)) {
        EinsumError(eq, StrCat("output label '", std::string(1, static_cast<char>(l)),
                               "' is not in any input"));
      }
      out_labels.push_back(l);
    }
  } else {
    for (int64_t i = 0; i < ell; ++i) out_labels.push_back(kEllipsisLabel + i);
    for (const auto& kv : occurrences) {
      if (kv.first < kEllipsisLabel && kv.second == 1) out_labels.push_back(kv.first);
    }
  }
  // Sizes of each label must agree (or be 1, which broadcasts).
  std::map<int, int64_t> size;
  for (const Operand& o : ops) {
    for (size_t i = 0; i < o.labels.size(); ++i) {
      const int l = o.labels[i];
      const int64_t s = o.t.shape()[static_cast<int64_t>(i)];
      auto it = size.find(l);
      if (it == size.end() || it->second == 1) {
        size[l] = s;
      } else if (s != 1 && s != it->second) {
        const std::string name =
            l >= kEllipsisLabel ? std::string("...") : std::string(1, static_cast<char>(l));
        EinsumError(eq, StrCat("label '", name, "' has sizes ", it->second, " and ", s));
      }
    }
  }
  // Repeated labels within one operand take its diagonal.
  for (Operand& o : ops) {
    for (bool again = true; again;) {
      again = false;
      for (size_t i = 0; i < o.labels.size() && !again; ++i) {
        for (size_t j = i + 1; j < o.labels.size() && !again; ++j) {
          if (o.labels[i] != o.labels[j]) continue;
          ONEFLOW_CHECK(o.t.shape()[i] == o.t.shape()[j], "einsum: repeated label '",
                        std::string(1, static_cast<char>(o.labels[i])), "' has sizes ",
                        o.t.shape()[i], " and ", o.t.shape()[j], " in one operand");
          const int l = o.labels[i];
          o.t = diagonal(o.t, 0, static_cast<int64_t>(i), static_cast<int64_t>(j));
          std::vector<int> labels;
          for (size_t k = 0; k < o.labels.size(); ++k) {
            if (k != i && k != j) labels.push_back(o.labels[k]);
          }
          labels.push_back(l);
          o.labels = labels;
          again = true;
        }
      }
    }
  }
  // Fold left to right, keeping the labels of the output and of the operands still to come.
  std::set<int> out_set(out_labels.begin(), out_labels.end());
  Operand acc = ops[0];
  for (size_t k = 1; k <= ops.size(); ++k) {
    std::set<int> keep = out_set;
    for (size_t m = k; m < ops.size(); ++m) keep.insert(ops[m].labels.begin(), ops[m].labels.end());
    if (k == ops.size()) {
      acc = SumOut(acc, keep);
    } else {
      acc = Contract(acc, ops[k], keep);
    }
  }
  // Output labels of size-1 dims broadcast against nothing stay; expand to the agreed sizes.
  Tensor r = Arrange(acc, out_labels);
  IntList want;
  for (int l : out_labels) want.push_back(size[l]);
  return r.shape().dims() == want ? r : expand(r, want);
}

}  // namespace fn
}  // namespace oneflow
