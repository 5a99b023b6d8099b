// CUDA kernels of scaled_dot_product_attention and its backward (core/ops/nn/attention.cc): the
// fused kernels of core/kernels/cuda/kernels/attention.cuh for float32, float16 and bfloat16
// (computing in float) with head dims up to 128; above 128 the op composed of cuBLAS matmuls and
// elementwise kernels (core/ops/nn/attention.h), which also takes float64.
#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

#include "core/kernels/cuda/cuda_dispatch.h"
#include "core/kernels/cuda/cuda_util.h"
#include "core/kernels/cuda/kernels/attention.cuh"
#include "core/op_registry.h"
#include "core/ops/nn/attention.h"
#include "core/ops/op_util.h"

namespace oneflow {

namespace {

namespace att = cuda::attention;

constexpr char kOp[] = "scaled_dot_product_attention";

// The mask of in[at] (when present) as a MaskView over q's batch dims; *hold keeps its float32
// copy alive.
att::MaskView MaskViewOf(const std::vector<Tensor>& in, size_t at, const Shape& q, Tensor* hold) {
  att::MaskView m;
  if (in.size() <= at) return m;
  const bool keep = in[at].dtype() == DType::kBool;
  *hold = keep ? in[at] : fn::to_dtype(in[at], DType::kFloat32);
  const Tensor& t = *hold;
  m.kind = keep ? 1 : 2;
  if (keep) {
    m.keep = static_cast<const bool*>(t.raw_data());
  } else {
    m.add = static_cast<const float*>(t.raw_data());
  }
  const int64_t n = q.ndim(), mn = t.ndim();
  auto stride_at = [&](int64_t a) {
    const int64_t ma = a - (n - mn);
    return ma < 0 || t.shape()[ma] == 1 ? int64_t{0} : t.strides()[ma];
  };
  // q's batch dims, size-1 ones dropped and neighbours that step through the mask as one dim
  // merged, so that few remain.
  std::vector<int64_t> size, stride;
  for (int64_t a = 0; a < n - 2; ++a) {
    if (q[a] == 1) continue;
    const int64_t st = stride_at(a);
    if (!size.empty() && stride.back() == st * q[a]) {
      size.back() *= q[a];
      stride.back() = st;
      continue;
    }
    size.push_back(q[a]);
    stride.push_back(st);
  }
  ONEFLOW_CHECK(static_cast<int>(size.size()) <= att::kMaxMaskBatchDims, kOp,
                ": the CUDA kernel takes an attn_mask that steps through at most ",
                att::kMaxMaskBatchDims, " batch dims, got one of shape ", t.shape(),
                " and strides ", Shape(t.strides()), " for query ", q);
  m.nd = static_cast<int>(size.size());
  for (int d = 0; d < m.nd; ++d) {
    m.size[d] = size[d];
    m.stride[d] = stride[d];
  }
  m.row_stride = stride_at(n - 2);
  m.col_stride = stride_at(n - 1);
  return m;
}

att::Params ParamsOf(const Tensor& q, const Tensor& k, const Tensor& v, const Attrs& a) {
  att::Params p;
  const int64_t n = q.ndim();
  p.batch = 1;
  for (int64_t d = 0; d < n - 2; ++d) p.batch *= q.shape()[d];
  p.L = q.shape()[n - 2];
  p.E = q.shape()[n - 1];
  p.S = k.shape()[n - 2];
  p.Ev = v.shape()[n - 1];
  p.scale = static_cast<float>(a.Get<double>("scale"));
  p.causal = a.Get<bool>("is_causal");
  const double dp = a.Get<double>("dropout_p");
  p.dropout = dp > 0;
  if (p.dropout) {
    p.seed = static_cast<uint64_t>(a.Get<int64_t>("seed"));
    p.offset = static_cast<uint64_t>(a.Get<int64_t>("offset"));
    p.batch_offset = a.Get<int64_t>("batch_offset");
    p.drop_p = dp;
    p.drop_scale = dp < 1 ? static_cast<float>(1.0 / (1.0 - dp)) : 0.f;
  }
  return p;
}

// The head-dim template (64 or 128) that holds E and Ev; 0 above 128 (the composed path).
int HeadTile(const att::Params& p) {
  const int64_t d = std::max(p.E, p.Ev);
  return d <= 64 ? 64 : d <= 128 ? 128 : 0;
}

int Grid(int64_t blocks) {
  ONEFLOW_CHECK(blocks <= INT_MAX, kOp, ": ", blocks, " blocks exceed the CUDA grid");
  return static_cast<int>(blocks);
}

template <typename DT, int kD>
void Forward(const att::Params& p, const Tensor& q, const Tensor& k, const Tensor& v,
             const Tensor& out, const Tensor& lse, cudaStream_t stream) {
  OF_CUDA_LAUNCH((att::AttentionForwardKernel<DT, kD>), Grid(att::ForwardBlocks<kD>(p)),
                 att::ForwardThreads<kD>(), att::ForwardSmemBytes<kD>(), stream, p,
                 reinterpret_cast<const DT*>(q.raw_data()),
                 reinterpret_cast<const DT*>(k.raw_data()),
                 reinterpret_cast<const DT*>(v.raw_data()), reinterpret_cast<DT*>(out.raw_data()),
                 lse.data<float>());
}

template <typename DT, int kD>
void Backward(const att::Params& p, const std::vector<Tensor>& t, const Tensor& lse,
              const Tensor& dsum, const std::vector<Tensor>& g, cudaStream_t stream) {
  auto c = [](const Tensor& x) { return reinterpret_cast<const DT*>(x.raw_data()); };
  auto w = [](const Tensor& x) { return reinterpret_cast<DT*>(x.raw_data()); };
  // t: dout, q, k, v; g: dq, dk, dv
  if (p.L > 0) {
    OF_CUDA_LAUNCH((att::AttentionBackwardQueryKernel<DT, kD>),
                   Grid(att::BackwardQueryBlocks<kD>(p)), att::BackwardThreads<kD>(),
                   att::BackwardSmemBytes<kD>(), stream, p, c(t[1]), c(t[2]), c(t[3]), c(t[0]),
                   lse.data<float>(), dsum.data<float>(), w(g[0]));
  }
  if (p.S > 0) {
    OF_CUDA_LAUNCH((att::AttentionBackwardKeyValueKernel<DT, kD>),
                   Grid(att::BackwardKeyBlocks<kD>(p)), att::BackwardThreads<kD>(),
                   att::BackwardSmemBytes<kD>(), stream, p, c(t[1]), c(t[2]), c(t[3]), c(t[0]),
                   lse.data<float>(), dsum.data<float>(), w(g[1]), w(g[2]));
  }
}

std::vector<Tensor> AttentionCuda(const std::vector<Tensor>& in, const Attrs& a,
                                  const std::vector<TensorMeta>& out) {
  Tensor q = fn::contiguous(in[0]), k = fn::contiguous(in[1]), v = fn::contiguous(in[2]);
  Tensor y = Tensor::Empty(out[0]), lse = Tensor::Empty(out[1]);
  att::Params p = ParamsOf(q, k, v, a);
  Tensor mask;
  p.mask = MaskViewOf(in, 3, q.shape(), &mask);
  const int kd = q.dtype() == DType::kFloat64 ? 0 : HeadTile(p);
  if (p.batch == 0 || p.L == 0) return {y, lse};
  if (kd == 0) {
    std::vector<Tensor> c = {q, k, v};
    if (in.size() > 3) c.push_back(in[3]);
    return ComposedAttention(c, a, out);
  }
  cudaStream_t stream = cuda::StreamFor(q.device());
  cuda::DispatchFloatingWithHalf(q.dtype(), kOp, [&](auto tag) {
    using DT = cuda::DevT<typename decltype(tag)::type>;
    if constexpr (!std::is_same_v<DT, double>) {
      if (kd == 64) {
        Forward<DT, 64>(p, q, k, v, y, lse, stream);
      } else {
        Forward<DT, 128>(p, q, k, v, y, lse, stream);
      }
    }
  });
  return {y, lse};
}

std::vector<Tensor> AttentionGradCuda(const std::vector<Tensor>& in, const Attrs& a,
                                      const std::vector<TensorMeta>& out) {
  std::vector<Tensor> t;
  for (int i = 0; i < 4; ++i) t.push_back(fn::contiguous(in[i]));  // dout, q, k, v
  Tensor y = fn::contiguous(in[4]), lse = fn::contiguous(in[5]);
  std::vector<Tensor> g = {Tensor::Empty(out[0]), Tensor::Empty(out[1]), Tensor::Empty(out[2])};
  att::Params p = ParamsOf(t[1], t[2], t[3], a);
  Tensor mask;
  p.mask = MaskViewOf(in, 6, t[1].shape(), &mask);
  const int kd = t[1].dtype() == DType::kFloat64 ? 0 : HeadTile(p);
  if (p.batch == 0 || (p.L == 0 && p.S == 0)) return g;
  if (kd == 0) {
    std::vector<Tensor> c = {t[0], t[1], t[2], t[3], y, lse};
    if (in.size() > 6) c.push_back(in[6]);
    return ComposedAttentionGrad(c, a, out);
  }
  cudaStream_t stream = cuda::StreamFor(t[1].device());
  const char* what = "scaled_dot_product_attention backward";
  cuda::DispatchFloatingWithHalf(t[1].dtype(), what, [&](auto tag) {
    using DT = cuda::DevT<typename decltype(tag)::type>;
    if constexpr (!std::is_same_v<DT, double>) {
      const int64_t rows = p.batch * p.L;
      Tensor dsum = Tensor::Empty(Shape({rows}), DType::kFloat32, t[1].device());
      if (rows > 0) {
        constexpr int kWarps = 4;
        const int64_t blocks = std::min<int64_t>((rows + kWarps - 1) / kWarps, 65535 * 16);
        OF_CUDA_LAUNCH(att::AttentionBackwardDotKernel<DT>, Grid(blocks), kWarps * 32, 0, stream,
                       rows, p.Ev, reinterpret_cast<const DT*>(t[0].raw_data()),
                       reinterpret_cast<const DT*>(y.raw_data()), dsum.data<float>());
      }
      if (kd == 64) {
        Backward<DT, 64>(p, t, lse, dsum, g, stream);
      } else {
        Backward<DT, 128>(p, t, lse, dsum, g, stream);
      }
    }
  });
  return g;
}

}  // namespace

ONEFLOW_REGISTER_KERNEL(scaled_dot_product_attention, kCUDA, AttentionCuda);
ONEFLOW_REGISTER_KERNEL(scaled_dot_product_attention_grad, kCUDA, AttentionGradCuda);

}  // namespace oneflow
