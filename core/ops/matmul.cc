// Matrix multiplication on cpu::Gemm (oneDNN for float32, OpenBLAS for float64; bfloat16 on
// oneDNN's bf16 kernels where the CPU has them, float16 and other CPUs in float32), batched with
// broadcast batch dims. Transposed views are passed to gemm as transposes, so x @ w.T and the
// gradients of matmul copy nothing.

#include <cstring>

#include "core/kernels/cpu/blas.h"
#include "core/kernels/cpu/cpu_util.h"
#include "core/ops/op_util.h"

namespace oneflow {

namespace {

std::vector<TensorMeta> InferMatmul(const std::vector<TensorMeta>& in, const Attrs&) {
  const Shape &a = in[0].shape, &b = in[1].shape;
  ONEFLOW_CHECK(a.ndim() >= 2 && b.ndim() >= 2,
                "matmul: expected tensors with at least 2 dims, got ", a, " and ", b);
  ONEFLOW_CHECK(in[0].dtype == in[1].dtype, "matmul: expected both inputs of one dtype, got ",
                DTypeName(in[0].dtype), " and ", DTypeName(in[1].dtype));
  int64_t m = a[a.ndim() - 2], k = a[a.ndim() - 1], k2 = b[b.ndim() - 2], n = b[b.ndim() - 1];
  if (k != k2) {
    throw Error(StrCat("matmul: cannot multiply ", a, " by ", b, ": inner sizes ", k, " and ", k2,
                       " differ"));
  }
  Shape ba(std::vector<int64_t>(a.dims().begin(), a.dims().end() - 2));
  Shape bb(std::vector<int64_t>(b.dims().begin(), b.dims().end() - 2));
  std::vector<int64_t> out = BroadcastShapes(ba, bb, "matmul").dims();
  out.push_back(m);
  out.push_back(n);
  return {{Shape(out), in[0].dtype, in[0].device}};
}

// How gemm can read the last two dims of t: row-major with a leading dimension, maybe
// transposed; nullopt-like (ld = 0) when neither stride is 1.
struct MatView {
  bool trans = false;
  int64_t ld = 0;
};
MatView ViewOf(const Tensor& t) {
  int64_t nd = t.ndim();
  int64_t rows = t.shape()[nd - 2], cols = t.shape()[nd - 1];
  int64_t rs = t.strides()[nd - 2], cs = t.strides()[nd - 1];
  if ((cs == 1 || cols == 1) && rs >= std::max<int64_t>(cols, 1)) return {false, rs};
  if ((rs == 1 || rows == 1) && cs >= std::max<int64_t>(rows, 1)) return {true, cs};
  return {};
}

template <typename T>
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, T* c, int64_t ldc) {
  if constexpr (std::is_floating_point_v<T>) {
    cpu::Gemm(ta, tb, m, n, k, T(1), a, lda, b, ldb, T(0), c, ldc);
  } else {
    // Integer matmul: plain loops (no BLAS for integers).
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T s = 0;
        for (int64_t p = 0; p < k; ++p) {
          T x = ta ? a[p * lda + i] : a[i * lda + p];
          T y = tb ? b[j * ldb + p] : b[p * ldb + j];
          s += x * y;
        }
        c[i * ldc + j] = s;
      }
  }
}

// bfloat16 runs natively where the CPU has bfloat16 instructions; other half cases compute in
// float32 (RunKernelInFloat32).
bool NativeHalf(DType t) { return t == DType::kBFloat16 && cpu::HasBf16Gemm(); }

// o = a @ b, written into o (contiguous, of the product's shape and dtype): the GEMM's
// destination is o itself (LinearGrad passes a leaf's gradient buffer).
void MatmulInto(const Tensor& o, Tensor a, Tensor b) {
  if (!ViewOf(a).ld) a = Contig(a);
  if (!ViewOf(b).ld) b = Contig(b);
  MatView va = ViewOf(a), vb = ViewOf(b);
  const Shape& os = o.shape();
  int64_t nd = os.ndim();
  int64_t m = os[nd - 2], n = os[nd - 1], k = a.shape()[a.ndim() - 1];
  if (o.numel() == 0) return;
  if (k == 0) {
    fn::fill_(o, 0.0);
    return;
  }
  // Broadcast batch strides of a and b over the output's batch dims.
  Shape batch(std::vector<int64_t>(os.dims().begin(), os.dims().end() - 2));
  auto batch_strides = [&](const Tensor& t) {
    std::vector<int64_t> s(batch.ndim(), 0);
    int64_t lead = batch.ndim() - (t.ndim() - 2);
    for (int64_t i = 0; i < t.ndim() - 2; ++i) {
      s[lead + i] = t.shape()[i] == 1 ? 0 : t.strides()[i];
    }
    return s;
  };
  std::vector<int64_t> sa = batch_strides(a), sb = batch_strides(b);
  int64_t nb = batch.numel();
  auto batch_offsets = [&](int64_t bi, int64_t* oa, int64_t* ob) {
    *oa = *ob = 0;
    for (int64_t d = batch.ndim() - 1, rem = bi; d >= 0; --d) {
      int64_t i = rem % batch[d];
      rem /= batch[d];
      *oa += i * sa[d];
      *ob += i * sb[d];
    }
  };
  if (a.dtype() == DType::kBFloat16) {  // REQUIRES: NativeHalf (callers check)
    const BFloat16* pa = a.data<BFloat16>();
    const BFloat16* pb = b.data<BFloat16>();
    BFloat16* po = o.data<BFloat16>();
    for (int64_t bi = 0; bi < nb; ++bi) {
      int64_t oa, ob;
      batch_offsets(bi, &oa, &ob);
      cpu::GemmBf16(va.trans, vb.trans, m, n, k, pa + oa, va.ld, pb + ob, vb.ld, 0.f,
                    po + bi * m * n, n);
    }
    return;
  }
  DispatchAll(a.dtype(), "matmul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      throw Error("matmul: bool tensors are not supported; convert to a number type first");
    } else {
      const T* pa = a.data<T>();
      const T* pb = b.data<T>();
      T* po = o.data<T>();
      std::vector<int64_t> idx(batch.ndim(), 0);
      for (int64_t bi = 0; bi < nb; ++bi) {
        int64_t oa, ob;
        batch_offsets(bi, &oa, &ob);
        Gemm<T>(va.trans, vb.trans, m, n, k, pa + oa, va.ld, pb + ob, vb.ld, po + bi * m * n, n);
      }
    }
  });
}

std::vector<Tensor> MatmulCpu(const std::vector<Tensor>& in, const Attrs& attrs,
                              const std::vector<TensorMeta>& out) {
  if (IsHalf(in[0].dtype()) && !NativeHalf(in[0].dtype())) {
    return RunKernelInFloat32(OP(matmul), MatmulCpu, in, attrs, out);
  }
  Tensor o = Tensor::Empty(out[0]);
  MatmulInto(o, in[0], in[1]);
  return {o};
}

std::vector<Tensor> MatmulGrad(const GradCtx& c) {
  const Tensor& g = c.grad_outputs[0];
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  Tensor ga, gb;
  if (c.needs_input_grad[0]) ga = fn::sum_to(fn::matmul(g, fn::transpose(b, -1, -2)), a.shape());
  if (c.needs_input_grad[1]) {
    if (a.ndim() == 2 && b.ndim() == 2 && g.ndim() == 2 && b.strides()[0] == 1 &&
        b.shape()[0] > 1 && b.shape()[1] > 1) {
      // b is a transposed view (x @ w.T in linear): give its gradient the same layout, so the
      // transpose's own gradient, which reaches w, comes out contiguous and needs no copy.
      gb = fn::transpose(fn::matmul(fn::transpose(g, 0, 1), a), 0, 1);
    } else {
      gb = fn::sum_to(fn::matmul(fn::transpose(a, -1, -2), g), b.shape());
    }
  }
  return {ga, gb};
}

// linear(x, w[, b]) = x @ w.T + b for 2-D x: one gemm whose output starts as the bias rows
// (beta = 1), so the bias costs no extra pass and the weight gradient g.T @ x comes out in
// w's own layout.
std::vector<TensorMeta> InferLinear(const std::vector<TensorMeta>& in, const Attrs&) {
  ONEFLOW_CHECK(in.size() == 2 || in.size() == 3, "linear: expected 2 or 3 tensors, got ",
                in.size());
  const Shape &x = in[0].shape, &w = in[1].shape;
  ONEFLOW_CHECK(w.ndim() == 2, "linear: weight must be 2-D (out_features, in_features), got ", w);
  ONEFLOW_CHECK(x.ndim() == 2 && x[1] == w[1], "linear: input of shape ", x, " has ",
                x.ndim() ? x[x.ndim() - 1] : 0, " features but the layer expects ", w[1]);
  for (size_t i = 1; i < in.size(); ++i) {
    ONEFLOW_CHECK(in[i].dtype == in[0].dtype, "linear: expected one dtype, got ",
                  DTypeName(in[0].dtype), " and ", DTypeName(in[i].dtype));
  }
  if (in.size() == 3) {
    ONEFLOW_CHECK(in[2].shape == Shape({w[0]}), "linear: bias of shape ", in[2].shape,
                  " does not match out_features ", w[0]);
  }
  return {{Shape({x[0], w[0]}), in[0].dtype, in[0].device}};
}

std::vector<Tensor> LinearCpu(const std::vector<Tensor>& in, const Attrs& attrs,
                              const std::vector<TensorMeta>& out) {
  if (IsHalf(in[0].dtype()) && !NativeHalf(in[0].dtype())) {
    return RunKernelInFloat32(OP(linear), LinearCpu, in, attrs, out);
  }
  Tensor x = in[0], w = in[1];
  if (!ViewOf(x).ld) x = Contig(x);
  if (!ViewOf(w).ld) w = Contig(w);
  MatView vx = ViewOf(x), vw = ViewOf(w);
  Tensor o = Tensor::Empty(out[0]);
  const int64_t m = o.shape()[0], n = o.shape()[1], k = x.shape()[1];
  if (o.numel() == 0) return {o};
  const bool has_bias = in.size() == 3;
  if (o.dtype() == DType::kBFloat16) {
    BFloat16* po = o.data<BFloat16>();
    if (has_bias) {
      Tensor b = Contig(in[2]);
      for (int64_t i = 0; i < m; ++i) std::memcpy(po + i * n, b.data<BFloat16>(), n * 2);
    }
    if (k == 0) {
      if (!has_bias) fn::fill_(o, 0.0);
      return {o};
    }
    cpu::GemmBf16(vx.trans, !vw.trans, m, n, k, x.data<BFloat16>(), vx.ld, w.data<BFloat16>(),
                  vw.ld, has_bias ? 1.f : 0.f, po, n);
    return {o};
  }
  DispatchFloating(o.dtype(), "linear", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* po = o.data<T>();
    if (has_bias) {
      Tensor b = Contig(in[2]);
      const T* pb = b.data<T>();
      for (int64_t i = 0; i < m; ++i) std::memcpy(po + i * n, pb, n * sizeof(T));
    }
    if (k == 0) {
      if (!has_bias) fn::fill_(o, 0.0);
      return;
    }
    // w is (n, k): reading it transposed gives the (k, n) operand.
    cpu::Gemm(vx.trans, !vw.trans, m, n, k, T(1), x.data<T>(), vx.ld, w.data<T>(), vw.ld,
              has_bias ? T(1) : T(0), po, n);
  });
  return {o};
}

std::vector<Tensor> LinearGrad(const GradCtx& c) {
  const Tensor& g = c.grad_outputs[0];
  const Tensor &x = c.inputs[0], &w = c.inputs[1];
  std::vector<Tensor> grads(c.inputs.size());
  if (c.needs_input_grad[0]) grads[0] = fn::matmul(g, w);
  const bool bias_grad = c.inputs.size() == 3 && c.needs_input_grad[2];
  if (c.needs_input_grad[1] && bias_grad && !g.is_cpu() && !g.is_global() && !x.is_global() &&
      !GradModeEnabled()) {
    // Both from one GEMM (the bias gradient in its epilogue on CUDA).
    std::vector<Tensor> wb = CallOp(OP(linear_grad_weight_bias), {g, x});
    grads[1] = wb[0];
    grads[2] = wb[1];
    return grads;
  }
  if (c.needs_input_grad[1]) {
    // Straight into the weight's gradient buffer when it offers one (DDP's bucket) and the
    // product is a plain CPU GEMM; otherwise a fresh tensor.
    Tensor buffer = c.grad_buffer(1);
    const bool into = buffer.defined() && buffer.is_cpu() && g.is_cpu() && x.is_cpu() &&
                      !g.is_global() && buffer.is_contiguous() && buffer.shape() == w.shape() &&
                      buffer.dtype() == g.dtype() && g.dtype() == x.dtype() && x.numel() > 0 &&
                      (!IsHalf(g.dtype()) || NativeHalf(g.dtype()));
    if (into) {
      MatmulInto(buffer, fn::transpose(g, 0, 1), x);
      buffer.storage()->bump_version();
      grads[1] = buffer;
    } else {
      grads[1] = fn::matmul(fn::transpose(g, 0, 1), x);
    }
  }
  if (bias_grad) grads[2] = fn::sum(g, {0});
  return grads;
}

// ---- linear_grad_weight_bias(g (m, n), x (m, k)) -> (g.T @ x (n, k), g.sum(0) (n,)) ----
// linear's weight and bias gradients in one op: on CUDA one cuBLASLt GEMM whose epilogue sums g
// for the bias as it reads it (core/kernels/cuda/matmul.cu).

std::vector<TensorMeta> InferLinearGradWeightBias(const std::vector<TensorMeta>& in, const Attrs&) {
  const Shape &g = in[0].shape, &x = in[1].shape;
  ONEFLOW_CHECK(g.ndim() == 2 && x.ndim() == 2 && g[0] == x[0],
                "linear_grad_weight_bias: expected g (m, n) and x (m, k), got ", g, " and ", x);
  ONEFLOW_CHECK(in[0].dtype == in[1].dtype && IsFloating(in[0].dtype),
                "linear_grad_weight_bias: expected one floating dtype, got ",
                DTypeName(in[0].dtype), " and ", DTypeName(in[1].dtype));
  return {{Shape({g[1], x[1]}), in[0].dtype, in[0].device},
          {Shape({g[1]}), in[0].dtype, in[0].device}};
}

std::vector<Tensor> LinearGradWeightBiasCpu(const std::vector<Tensor>& in, const Attrs&,
                                            const std::vector<TensorMeta>& out) {
  Tensor dw = Tensor::Empty(out[0]);
  if (dw.numel() > 0) MatmulInto(dw, fn::transpose(in[0], 0, 1), in[1]);
  return {dw, fn::sum(in[0], {0})};
}

}  // namespace

ONEFLOW_REGISTER_OP(linear)
    .Inputs(-1)
    .Infer(InferLinear)
    .Grad(LinearGrad)
    .CpuHalf()
    .Kernel(DeviceType::kCPU, LinearCpu);
ONEFLOW_REGISTER_OP(linear_grad_weight_bias)
    .Inputs(2)
    .Infer(InferLinearGradWeightBias)
    .Grad(NoDoubleBackward)
    .Kernel(DeviceType::kCPU, LinearGradWeightBiasCpu);
ONEFLOW_REGISTER_OP(matmul)
    .Inputs(2)
    .Infer(InferMatmul)
    .Grad(MatmulGrad)
    .CpuHalf()
    .Kernel(DeviceType::kCPU, MatmulCpu);

namespace fn {

Tensor matmul(const Tensor& a, const Tensor& b) {
  ONEFLOW_CHECK(a.ndim() >= 1 && b.ndim() >= 1, "matmul: both arguments need at least 1 dim, got ",
                a.shape(), " and ", b.shape());
  Tensor x = a, y = b;
  if (x.dtype() != y.dtype()) {
    DType t = PromoteTypes(x.dtype(), y.dtype());
    x = to_dtype(x, t);
    y = to_dtype(y, t);
  }
  if (x.ndim() == 1 && y.ndim() == 1) {
    if (x.shape()[0] != y.shape()[0]) {
      throw Error(StrCat("matmul: cannot multiply ", x.shape(), " by ", y.shape(), ": inner sizes ",
                         x.shape()[0], " and ", y.shape()[0], " differ"));
    }
    return reshape(CallOp1(OP(matmul), {unsqueeze(x, 0), unsqueeze(y, 1)}), {});
  }
  if (x.ndim() == 1) return squeeze(CallOp1(OP(matmul), {unsqueeze(x, 0), y}), -2);
  if (y.ndim() == 1) return squeeze(CallOp1(OP(matmul), {x, unsqueeze(y, 1)}), -1);
  // (..., m, k) @ (k, n): fold the batch into m so one gemm does it all.
  if (y.ndim() == 2 && x.ndim() > 2 && x.is_contiguous()) {
    std::vector<int64_t> out = x.shape().dims();
    out.back() = y.shape()[1];
    if (x.shape()[x.ndim() - 1] != y.shape()[0]) return CallOp1(OP(matmul), {x, y});  // error text
    return reshape(CallOp1(OP(matmul), {reshape(x, {-1, x.shape()[x.ndim() - 1]}), y}), out);
  }
  return CallOp1(OP(matmul), {x, y});
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  ONEFLOW_CHECK(weight.ndim() == 2, "linear: weight must be 2-D (out_features, in_features), got ",
                weight.shape());
  ONEFLOW_CHECK(x.ndim() >= 1 && x.shape()[x.ndim() - 1] == weight.shape()[1],
                "linear: input of shape ", x.shape(), " has ",
                x.ndim() ? x.shape()[x.ndim() - 1] : 0, " features but the layer expects ",
                weight.shape()[1]);
  if (!IsFloating(x.dtype()) || x.dtype() != weight.dtype() ||
      (bias.defined() && bias.dtype() != x.dtype())) {
    Tensor y = matmul(x, transpose(weight, 0, 1));  // promotes dtypes
    return bias.defined() ? add(y, bias) : y;
  }
  std::vector<Tensor> in = {x.ndim() == 2 ? x : reshape(x, {-1, weight.shape()[1]}), weight};
  if (bias.defined()) in.push_back(bias);
  Tensor y = CallOp1(OP(linear), in);
  if (x.ndim() == 2) return y;
  std::vector<int64_t> out = x.shape().dims();
  out.back() = weight.shape()[0];
  return reshape(y, out);
}

}  // namespace fn
}  // namespace oneflow
