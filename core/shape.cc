#include "core/shape.h"

#include <algorithm>

#include "core/error.h"

namespace oneflow {

std::string Shape::ToString() const {
  std::string s = "(";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  if (dims_.size() == 1) s += ",";
  return s + ")";
}

size_t Shape::Hash() const {
  size_t h = dims_.size();
  for (int64_t d : dims_) h = h * 1000003u ^ std::hash<int64_t>()(d);
  return h;
}

std::vector<int64_t> ContiguousStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.ndim());
  int64_t s = 1;
  for (int64_t i = shape.ndim() - 1; i >= 0; --i) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

int64_t WrapDim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);  // a 0-dim tensor accepts dim 0 and -1
  if (dim < -n || dim >= n) {
    throw IndexError(StrCat(op, ": dim ", dim, " out of range for a tensor of ", ndim,
                            " dims (expected a dim in [", -n, ", ", n - 1, "])"));
  }
  return dim < 0 ? dim + n : dim;
}

Shape BroadcastShapes(const Shape& a, const Shape& b, const char* op) {
  if (a == b) return a;
  int64_t n = std::max(a.ndim(), b.ndim());
  std::vector<int64_t> out(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.ndim() ? 1 : a[i - (n - a.ndim())];
    int64_t db = i < n - b.ndim() ? 1 : b[i - (n - b.ndim())];
    if (da != db && da != 1 && db != 1) {
      throw Error(StrCat(op, ": shapes ", a, " and ", b, " cannot be broadcast: dim ", i,
                         " has sizes ", da, " and ", db));
    }
    out[i] = da == 1 ? db : da;
  }
  return Shape(std::move(out));
}

}  // namespace oneflow
