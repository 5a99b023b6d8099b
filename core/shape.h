// Shape: the sizes of a tensor's dims, an immutable value that prints like PyTorch's size.
//
//   Shape s({2, 3});
//   s.numel();     // 6
//   s.ToString();  // "(2, 3)"
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

namespace oneflow {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int64_t ndim() const { return static_cast<int64_t>(dims_.size()); }
  int64_t operator[](int64_t i) const { return dims_[i]; }
  int64_t at(int64_t i) const { return dims_.at(i); }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims_) n *= d;
    return n;
  }
  const std::vector<int64_t>& dims() const { return dims_; }
  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return dims_ != o.dims_; }
  // "(2, 3)"; a 1-dim shape prints as "(4,)".
  std::string ToString() const;
  size_t Hash() const;

 private:
  std::vector<int64_t> dims_;
};

inline std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.ToString(); }

// Row-major strides of a contiguous tensor of this shape, in elements.
std::vector<int64_t> ContiguousStrides(const Shape& shape);

// Maps a possibly negative dim into [0, ndim); throws "op: dim d out of range for a tensor of n
// dims".
int64_t WrapDim(int64_t dim, int64_t ndim, const char* op);

// The shape two shapes broadcast to, or an error naming op and both shapes.
Shape BroadcastShapes(const Shape& a, const Shape& b, const char* op);

}  // namespace oneflow

template <>
struct std::hash<oneflow::Shape> {
  size_t operator()(const oneflow::Shape& s) const { return s.Hash(); }
};
