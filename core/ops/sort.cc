// Ops along one dim of rows: sort (stable, NaN last as in PyTorch) and the scans cumsum and
// cumprod. Each row is (outer, n, inner) around dim, read with stride inner.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/kernels/cpu/cpu_util.h"
#include "core/ops/op_util.h"

namespace oneflow {

namespace {

int64_t RowDim(const Attrs& a, int64_t ndim, const char* op) {
  return ndim ? WrapDim(a.Get<int64_t>("dim"), ndim, op) : 0;
}

// ---------------------------------------------------------------- sort

std::vector<TensorMeta> InferSort(const std::vector<TensorMeta>& in, const Attrs& a) {
  RowDim(a, in[0].shape.ndim(), "sort");
  return {{in[0].shape, in[0].dtype, in[0].device}, {in[0].shape, DType::kInt64, in[0].device}};
}

// a before b in ascending order, NaN after every number (PyTorch's order).
template <typename T>
bool LessNanLast(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}

std::vector<Tensor> SortCpu(const std::vector<Tensor>& in, const Attrs& a,
                            const std::vector<TensorMeta>& out) {
  Tensor x = Contig(in[0]);
  Tensor v = Tensor::Empty(out[0]), idx = Tensor::Empty(out[1]);
  const int64_t dim = RowDim(a, x.ndim(), "sort");
  const bool descending = a.Get<bool>("descending");
  const Around s = Split(x.shape(), dim);
  DispatchAll(x.dtype(), "sort", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    T* pv = v.data<T>();
    int64_t* pi = idx.data<int64_t>();
    std::vector<int64_t> order(s.n);
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t k = 0; k < s.inner; ++k) {
        const int64_t base = o * s.n * s.inner + k;
        auto at = [&](int64_t j) { return px[base + j * s.inner]; };
        std::iota(order.begin(), order.end(), int64_t{0});
        std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) {
          return descending ? LessNanLast(at(j), at(i)) : LessNanLast(at(i), at(j));
        });
        for (int64_t j = 0; j < s.n; ++j) {
          pv[base + j * s.inner] = at(order[j]);
          pi[base + j * s.inner] = order[j];
        }
      }
    }
  });
  return {v, idx};
}

// The values are a permutation of x: their gradient goes back to where each came from.
std::vector<Tensor> SortGrad(const GradCtx& c) {
  const Tensor& x = c.inputs[0];
  if (x.ndim() == 0) return {c.grad_outputs[0]};
  Attrs a;
  a.Set("dim", RowDim(c.attrs, x.ndim(), "sort")).Set("shape", x.shape().dims());
  return {CallOp1(OP(scatter_add), {c.outputs[1], c.grad_outputs[0]}, a)};
}

// ---------------------------------------------------------------- cumsum, cumprod

// Integer and bool inputs scan in int64, as in PyTorch.
DType ScanDType(DType t) { return IsFloating(t) ? t : DType::kInt64; }

std::vector<TensorMeta> InferScan(const std::vector<TensorMeta>& in, const Attrs& a,
                                  const char* op) {
  RowDim(a, in[0].shape.ndim(), op);
  return {{in[0].shape, ScanDType(in[0].dtype), in[0].device}};
}

// out[j] = x[0] op ... op x[j] along dim (from the end with attr reverse), accumulated in
// double for floats and int64 for integers.
template <bool kProd>
std::vector<Tensor> ScanCpu(const std::vector<Tensor>& in, const Attrs& a,
                            const std::vector<TensorMeta>& out) {
  const char* op = kProd ? "cumprod" : "cumsum";
  Tensor x = Contig(in[0]);
  if (x.dtype() != out[0].dtype) x = Contig(fn::to_dtype(x, out[0].dtype));
  Tensor o = Tensor::Empty(out[0]);
  const int64_t dim = RowDim(a, x.ndim(), op);
  const bool reverse = a.Has("reverse") && a.Get<bool>("reverse");
  const Around s = Split(x.shape(), dim);
  DispatchAll(o.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
    const T* px = x.data<T>();
    T* po = o.data<T>();
    for (int64_t r = 0; r < s.outer; ++r) {
      for (int64_t k = 0; k < s.inner; ++k) {
        const int64_t base = r * s.n * s.inner + k;
        Acc acc = kProd ? Acc(1) : Acc(0);
        for (int64_t t = 0; t < s.n; ++t) {
          const int64_t j = reverse ? s.n - 1 - t : t;
          const Acc e = static_cast<Acc>(px[base + j * s.inner]);
          acc = kProd ? acc * e : acc + e;
          po[base + j * s.inner] = static_cast<T>(acc);
        }
      }
    }
  });
  return {o};
}

Tensor Scan(const OpDef& op, const Tensor& x, int64_t dim, bool reverse) {
  Attrs a;
  a.Set("dim", dim).Set("reverse", reverse);
  return CallOp1(op, {x}, a);
}

// d/dx of a (reverse) prefix sum is the opposite-direction prefix sum of the gradient.
std::vector<Tensor> CumsumGrad(const GradCtx& c) {
  if (!IsFloating(c.inputs[0].dtype())) return {Tensor()};
  const bool reverse = c.attrs.Has("reverse") && c.attrs.Get<bool>("reverse");
  return {Scan(OP(cumsum), c.grad_outputs[0], c.attrs.Get<int64_t>("dim"), !reverse)};
}

// y_i = prod_{k<=i} x_k. Where x_j != 0: dy/dx_j = revcumsum(g * y)_j / x_j (terms past a later
// zero vanish on both sides). At the first zero z of a row the products skip x_z:
// revcumsum(g * cumprod(x with x_z = 1))_z. Later zeros get 0 (every product holds x_z).
std::vector<Tensor> CumprodGrad(const GradCtx& c) {
  const Tensor& x = c.inputs[0];
  if (!IsFloating(x.dtype())) return {Tensor()};
  const Tensor& g = c.grad_outputs[0];
  const Tensor& y = c.outputs[0];
  const int64_t dim = c.attrs.Get<int64_t>("dim");
  Tensor zero = fn::scalar_like(0, x), one = fn::scalar_like(1, x);
  Tensor is_zero = fn::eq(x, zero);
  Tensor zeros_so_far = Scan(OP(cumsum), is_zero, dim, false);
  Tensor first_zero =
      fn::logical_and(is_zero, fn::eq(zeros_so_far, fn::scalar_like(1, zeros_so_far)));
  Tensor safe_x = fn::where(is_zero, one, x);
  Tensor general = fn::div(Scan(OP(cumsum), fn::mul(g, y), dim, true), safe_x);
  Tensor skipped = Scan(OP(cumprod), fn::where(first_zero, one, x), dim, false);
  Tensor at_zero = Scan(OP(cumsum), fn::mul(g, skipped), dim, true);
  return {fn::where(first_zero, at_zero, fn::where(is_zero, zero, general))};
}

}  // namespace

ONEFLOW_REGISTER_OP(sort).Inputs(1).Infer(InferSort).Grad(SortGrad).Kernel(DeviceType::kCPU,
                                                                           SortCpu);
ONEFLOW_REGISTER_OP(cumsum)
    .Inputs(1)
    .Infer([](const std::vector<TensorMeta>& in, const Attrs& a) {
      return InferScan(in, a, "cumsum");
    })
    .Grad(CumsumGrad)
    .Kernel(DeviceType::kCPU, ScanCpu<false>);
ONEFLOW_REGISTER_OP(cumprod)
    .Inputs(1)
    .Infer([](const std::vector<TensorMeta>& in, const Attrs& a) {
      return InferScan(in, a, "cumprod");
    })
    .Grad(CumprodGrad)
    .Kernel(DeviceType::kCPU, ScanCpu<true>);

namespace fn {

std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending) {
  Attrs a;
  a.Set("dim", dim).Set("descending", descending);
  auto out = CallOp(OP(sort), {x}, a);
  return {out[0], out[1]};
}

Tensor cumsum(const Tensor& x, int64_t dim) { return Scan(OP(cumsum), x, dim, false); }
Tensor cumprod(const Tensor& x, int64_t dim) {
  Attrs a;
  a.Set("dim", dim);
  return CallOp1(OP(cumprod), {x}, a);
}

}  // namespace fn
}  // namespace oneflow
