#include "core/kernels/cpu/cpu_util.h"

#include <cstring>

#include "core/dtype.h"

namespace oneflow {

std::vector<int64_t> BroadcastStrides(const Tensor& t, const Shape& out) {
  std::vector<int64_t> s(out.ndim(), 0);
  int64_t lead = out.ndim() - t.ndim();
  for (int64_t i = 0; i < t.ndim(); ++i) {
    s[lead + i] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  }
  return s;
}

Tensor Contig(const Tensor& x) {
  if (x.is_contiguous()) return x;
  Tensor out = Tensor::Empty(x.shape(), x.dtype(), x.device());
  size_t es = SizeOf(x.dtype());
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  ForEachRow<2>(
      x.shape(), {ContiguousStrides(x.shape()), x.strides()},
      [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
        char* d = dst + off[0] * es;
        const char* s = src + off[1] * es;
        if (st[1] == 1) {
          std::memcpy(d, s, n * es);
        } else {
          for (int64_t i = 0; i < n; ++i) std::memcpy(d + i * es, s + i * st[1] * es, es);
        }
      });
  return out;
}

}  // namespace oneflow
