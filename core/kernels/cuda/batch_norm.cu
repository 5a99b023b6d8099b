// CUDA kernels of batch_norm_train, batch_norm_elemt and their backward ops
// (core/ops/nn/batch_norm.cc). Own kernels rather than cuDNN's: the ops return the biased batch
// variance (cuDNN keeps the unbiased one in its running statistics and returns the inverse
// standard deviation) and take gradients for mean and var as inputs.
//
// x (N, C, S...) is seen as (outer = N, C, inner = prod(S)). Per-channel sums go in two steps:
// a grid of (channel, chunk) blocks writes partial sums, then one thread per channel adds its
// chunks in order. Sums are in double, as the CPU kernels' totals; the elementwise passes
// compute in T (float for the half types), as the CPU kernels do.

#include <algorithm>
#include <vector>

#include "core/functional.h"
#include "core/kernels/cuda/cuda_dispatch.h"
#include "core/kernels/cuda/cuda_types.cuh"
#include "core/kernels/cuda/cuda_util.h"
#include "core/op_registry.h"

namespace oneflow {

namespace {

using cuda::Acc;
using cuda::DevT;
using cuda::Load;
using cuda::Store;

struct ChannelLayout {
  int64_t outer, c, inner;
  explicit ChannelLayout(const Shape& x) : outer(x[0]), c(x[1]), inner(1) {
    for (int64_t d = 2; d < x.ndim(); ++d) inner *= x[d];
  }
  __host__ __device__ int64_t per_channel() const { return outer * inner; }
};

// ---------------------------------------------------------------- per-channel sums

constexpr int kReduceThreads = 256;  // a multiple of the warp size

// Blocks per channel: enough blocks in all to fill the GPU, each with at least 16 elements
// per thread.
int64_t ChunksPerChannel(const ChannelLayout& l) {
  const int64_t by_size = std::max<int64_t>(1, l.per_channel() / (kReduceThreads * 16));
  const int64_t by_grid = std::max<int64_t>(1, 2048 / std::max<int64_t>(l.c, 1));
  return std::min<int64_t>({by_size, by_grid, 65535});
}

// Sums a and b over the block; the result is in thread 0.
__device__ void BlockSum2(double* a, double* b) {
  __shared__ double sa[kReduceThreads / 32], sb[kReduceThreads / 32];
  for (int off = 16; off > 0; off >>= 1) {
    *a += __shfl_down_sync(0xffffffffu, *a, off);
    *b += __shfl_down_sync(0xffffffffu, *b, off);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    sa[warp] = *a;
    sb[warp] = *b;
  }
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x / 32;
    *a = lane < warps ? sa[lane] : 0.0;
    *b = lane < warps ? sb[lane] : 0.0;
    for (int off = 16; off > 0; off >>= 1) {
      *a += __shfl_down_sync(0xffffffffu, *a, off);
      *b += __shfl_down_sync(0xffffffffu, *b, off);
    }
  }
}

// Grid (C, chunks): block (c, k) sums f over elements [k * chunk, (k + 1) * chunk) of channel
// c into partial[(c * chunks + k) * 2 + {0, 1}]. f(c, offset, &s0, &s1) adds one element.
template <typename F>
__global__ void ChannelPartialSumsKernel(ChannelLayout l, int64_t chunk, F f, double* partial) {
  const int64_t c = blockIdx.x, k = blockIdx.y;
  const int64_t begin = k * chunk, end = min(begin + chunk, l.per_channel());
  double s0 = 0, s1 = 0;
  for (int64_t e = begin + threadIdx.x; e < end; e += blockDim.x) {
    const int64_t n = e / l.inner, s = e - n * l.inner;
    f(c, (n * l.c + c) * l.inner + s, &s0, &s1);
  }
  BlockSum2(&s0, &s1);
  if (threadIdx.x == 0) {
    partial[(c * gridDim.y + k) * 2] = s0;
    partial[(c * gridDim.y + k) * 2 + 1] = s1;
  }
}

// Channel c's totals from its partial sums, added in chunk order (deterministic).
__device__ void ChannelTotals(const double* partial, int64_t chunks, int64_t c, double* s0,
                              double* s1) {
  *s0 = 0, *s1 = 0;
  for (int64_t k = 0; k < chunks; ++k) {
    *s0 += partial[(c * chunks + k) * 2];
    *s1 += partial[(c * chunks + k) * 2 + 1];
  }
}

// Scratch for the sums: 2 * chunks partials and `extra` more doubles per channel.
struct Sums {
  Tensor scratch;
  int64_t chunks;
  double* partial() const { return scratch.data<double>(); }
  double* extra(int64_t i, int64_t c) const {
    return scratch.data<double>() + 2 * chunks * c + i * c;
  }
};

Sums MakeSums(const ChannelLayout& l, int64_t extra, const Device& device) {
  Sums s;
  s.chunks = ChunksPerChannel(l);
  s.scratch = Tensor::Empty(Shape({l.c * (2 * s.chunks + extra)}), DType::kFloat64, device);
  return s;
}

// Launches the partial sums of f over every channel.
template <typename F>
void LaunchPartialSums(const ChannelLayout& l, const Sums& sums, F f, cudaStream_t stream) {
  const int64_t chunk = (l.per_channel() + sums.chunks - 1) / sums.chunks;
  const dim3 grid(static_cast<unsigned>(l.c), static_cast<unsigned>(sums.chunks));
  ChannelPartialSumsKernel<<<grid, kReduceThreads, 0, stream>>>(l, chunk, f, sums.partial());
  ONEFLOW_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
struct SumOf {
  const T* x;
  __device__ void operator()(int64_t, int64_t off, double* s0, double*) const {
    *s0 += static_cast<double>(Load(x[off]));
  }
};

template <typename T>
struct SquaredDeviationOf {
  const T* x;
  const double* mean;
  __device__ void operator()(int64_t c, int64_t off, double* s0, double*) const {
    const double d = static_cast<double>(Load(x[off])) - mean[c];
    *s0 += d * d;
  }
};

// sum(dy) and sum(dy * (x - mean)), what every batch_norm gradient needs.
template <typename T>
struct GradSumsOf {
  const T *dy, *x, *mean;
  __device__ void operator()(int64_t c, int64_t off, double* s0, double* s1) const {
    const double g = static_cast<double>(Load(dy[off]));
    *s0 += g;
    *s1 += g * (static_cast<double>(Load(x[off])) - static_cast<double>(Load(mean[c])));
  }
};

// ---------------------------------------------------------------- per-channel steps

template <typename T>
__global__ void MeanKernel(int64_t channels, int64_t chunks, double count, const double* partial,
                           double* mean_acc, T* mean) {
  ONEFLOW_CUDA_GRID_LOOP(c, channels) {
    double s0, s1;
    ChannelTotals(partial, chunks, c, &s0, &s1);
    mean_acc[c] = s0 / count;
    mean[c] = Store<T>(mean_acc[c]);
  }
}

template <typename T>
__global__ void VarKernel(int64_t channels, int64_t chunks, double count, const double* partial,
                          T* var) {
  ONEFLOW_CUDA_GRID_LOOP(c, channels) {
    double s0, s1;
    ChannelTotals(partial, chunks, c, &s0, &s1);
    var[c] = Store<T>(s0 / count);
  }
}

// y = (x - mean) / sqrt(var + eps) * w + b as y = x * scale + shift, computed in T as on CPU.
template <typename T>
__global__ void ScaleShiftKernel(int64_t channels, const T* mean, const T* var, const T* w,
                                 const T* b, double eps, double* scale, double* shift) {
  using A = Acc<T>;
  ONEFLOW_CUDA_GRID_LOOP(c, channels) {
    const A s = Load(w[c]) / sqrt(Load(var[c]) + static_cast<A>(eps));
    scale[c] = s;
    shift[c] = Load(b[c]) - Load(mean[c]) * s;
  }
}

template <typename T>
__global__ void NormalizeKernel(int64_t total, int64_t inner, int64_t channels, const T* x,
                                const double* scale, const double* shift, T* y) {
  using A = Acc<T>;
  ONEFLOW_CUDA_GRID_LOOP(i, total) {
    const int64_t c = (i / inner) % channels;
    y[i] = Store<T>(Load(x[i]) * static_cast<A>(scale[c]) + static_cast<A>(shift[c]));
  }
}

// y from x and per-channel mean, var, w, b (all of T, contiguous).
template <typename T>
void Normalize(const ChannelLayout& l, const Tensor& x, const Tensor& mean, const Tensor& var,
               const Tensor& w, const Tensor& b, double eps, double* scale, double* shift,
               const Tensor& y, cudaStream_t stream) {
  ScaleShiftKernel<<<cuda::Blocks(l.c), cuda::kThreads, 0, stream>>>(
      l.c, cuda::Ptr<T>(mean), cuda::Ptr<T>(var), cuda::Ptr<T>(w), cuda::Ptr<T>(b), eps, scale,
      shift);
  ONEFLOW_CUDA_CHECK(cudaGetLastError());
  if (y.numel() == 0) return;
  NormalizeKernel<<<cuda::Blocks(y.numel()), cuda::kThreads, 0, stream>>>(
      y.numel(), l.inner, l.c, cuda::Ptr<T>(x), scale, shift, cuda::Ptr<T>(y));
  ONEFLOW_CUDA_CHECK(cudaGetLastError());
}

// ---------------------------------------------------------------- batch_norm_train

// batch_norm_train(x, weight, bias), attr eps -> (y, mean, var); var is biased. Two passes
// (mean, then squared deviations) as on CPU: E[x^2] - E[x]^2 cancels badly.
std::vector<Tensor> TrainCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                              const std::vector<TensorMeta>& out) {
  Tensor y = Tensor::Empty(out[0]), mean = Tensor::Empty(out[1]), var = Tensor::Empty(out[2]);
  cuda::DispatchFloatingWithHalf(in[0].dtype(), "batch_norm_train", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const ChannelLayout l(in[0].shape());
    if (l.c == 0) return;
    Tensor x = fn::contiguous(in[0]), w = fn::contiguous(in[1]), b = fn::contiguous(in[2]);
    cudaStream_t stream = cuda::StreamFor(y.device());
    const Sums sums = MakeSums(l, 3, y.device());  // extra: mean in double, scale, shift
    double *mean_acc = sums.extra(0, l.c), *scale = sums.extra(1, l.c), *shift = sums.extra(2, l.c);
    const double count = static_cast<double>(l.per_channel());  // 0 gives NaN, as on CPU

    LaunchPartialSums(l, sums, SumOf<DevT<T>>{cuda::Ptr<T>(x)}, stream);
    MeanKernel<<<cuda::Blocks(l.c), cuda::kThreads, 0, stream>>>(
        l.c, sums.chunks, count, sums.partial(), mean_acc, cuda::Ptr<T>(mean));
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
    LaunchPartialSums(l, sums, SquaredDeviationOf<DevT<T>>{cuda::Ptr<T>(x), mean_acc}, stream);
    VarKernel<<<cuda::Blocks(l.c), cuda::kThreads, 0, stream>>>(l.c, sums.chunks, count,
                                                                sums.partial(), cuda::Ptr<T>(var));
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
    Normalize<T>(l, x, mean, var, w, b, attrs.Get<double>("eps"), scale, shift, y, stream);
  });
  return {y, mean, var};
}

// ---------------------------------------------------------------- batch_norm_train_grad

// Per channel, with M values, invstd = 1 / sqrt(var + eps) and wi = w invstd:
//   dx = a dy + b (x - mean) + k, a = wi, b = -wi invstd^2 sum(dy xc) / M + 2 dvar / M,
//   k = -wi sum(dy) / M + dmean / M;  dweight = invstd sum(dy xc);  dbias = sum(dy).
template <typename T>
__global__ void TrainGradCoefficientsKernel(int64_t channels, int64_t chunks, double count,
                                            const double* partial, const T* dmean, const T* dvar,
                                            const T* var, const T* w, double eps, double* a,
                                            double* b, double* k, T* dw, T* db) {
  using A = Acc<T>;
  ONEFLOW_CUDA_GRID_LOOP(c, channels) {
    double sum_dy, sum_dy_xc;
    ChannelTotals(partial, chunks, c, &sum_dy, &sum_dy_xc);
    const double inv_m = 1.0 / count;
    const double invstd = 1.0 / sqrt(static_cast<double>(Load(var[c])) + eps);
    const double wi = static_cast<double>(Load(w[c])) * invstd;
    // Rounded to the compute type, as the CPU kernel rounds them to T.
    a[c] = static_cast<A>(wi);
    b[c] = static_cast<A>(-wi * invstd * invstd * sum_dy_xc * inv_m +
                          2 * static_cast<double>(Load(dvar[c])) * inv_m);
    k[c] = static_cast<A>(-wi * sum_dy * inv_m + static_cast<double>(Load(dmean[c])) * inv_m);
    dw[c] = Store<T>(invstd * sum_dy_xc);
    db[c] = Store<T>(sum_dy);
  }
}

template <typename T>
__global__ void TrainGradInputKernel(int64_t total, int64_t inner, int64_t channels, const T* dy,
                                     const T* x, const T* mean, const double* a, const double* b,
                                     const double* k, T* dx) {
  using A = Acc<T>;
  ONEFLOW_CUDA_GRID_LOOP(i, total) {
    const int64_t c = (i / inner) % channels;
    dx[i] = Store<T>(static_cast<A>(a[c]) * Load(dy[i]) +
                     static_cast<A>(b[c]) * (Load(x[i]) - Load(mean[c])) + static_cast<A>(k[c]));
  }
}

// batch_norm_train_grad(dy, dmean, dvar, x, mean, var, weight), attr eps -> (dx, dw, db).
std::vector<Tensor> TrainGradCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                  const std::vector<TensorMeta>& out) {
  Tensor dx = Tensor::Empty(out[0]), dw = Tensor::Empty(out[1]), db = Tensor::Empty(out[2]);
  cuda::DispatchFloatingWithHalf(in[3].dtype(), "batch_norm_train_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const ChannelLayout l(in[3].shape());
    if (l.c == 0) return;
    Tensor dy = fn::contiguous(in[0]), dmean = fn::contiguous(in[1]);
    Tensor dvar = fn::contiguous(in[2]), x = fn::contiguous(in[3]);
    Tensor mean = fn::contiguous(in[4]), var = fn::contiguous(in[5]), w = fn::contiguous(in[6]);
    cudaStream_t stream = cuda::StreamFor(dx.device());
    const Sums sums = MakeSums(l, 3, dx.device());  // extra: the coefficients a, b, k
    double *a = sums.extra(0, l.c), *b = sums.extra(1, l.c), *k = sums.extra(2, l.c);

    LaunchPartialSums(l, sums,
                      GradSumsOf<DevT<T>>{cuda::Ptr<T>(dy), cuda::Ptr<T>(x), cuda::Ptr<T>(mean)},
                      stream);
    TrainGradCoefficientsKernel<<<cuda::Blocks(l.c), cuda::kThreads, 0, stream>>>(
        l.c, sums.chunks, static_cast<double>(l.per_channel()), sums.partial(), cuda::Ptr<T>(dmean),
        cuda::Ptr<T>(dvar), cuda::Ptr<T>(var), cuda::Ptr<T>(w), attrs.Get<double>("eps"), a, b, k,
        cuda::Ptr<T>(dw), cuda::Ptr<T>(db));
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
    if (dx.numel() == 0) return;
    TrainGradInputKernel<<<cuda::Blocks(dx.numel()), cuda::kThreads, 0, stream>>>(
        dx.numel(), l.inner, l.c, cuda::Ptr<T>(dy), cuda::Ptr<T>(x), cuda::Ptr<T>(mean), a, b, k,
        cuda::Ptr<T>(dx));
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
  });
  return {dx, dw, db};
}

// ---------------------------------------------------------------- batch_norm_elemt

// batch_norm_elemt(x, mean, var, weight, bias), attr eps -> y.
std::vector<Tensor> ElemtCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                              const std::vector<TensorMeta>& out) {
  Tensor y = Tensor::Empty(out[0]);
  cuda::DispatchFloatingWithHalf(in[0].dtype(), "batch_norm_elemt", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const ChannelLayout l(in[0].shape());
    if (l.c == 0) return;
    Tensor x = fn::contiguous(in[0]), mean = fn::contiguous(in[1]), var = fn::contiguous(in[2]);
    Tensor w = fn::contiguous(in[3]), b = fn::contiguous(in[4]);
    Tensor scratch = Tensor::Empty(Shape({2 * l.c}), DType::kFloat64, y.device());
    double* scale = scratch.data<double>();
    Normalize<T>(l, x, mean, var, w, b, attrs.Get<double>("eps"), scale, scale + l.c, y,
                 cuda::StreamFor(y.device()));
  });
  return {y};
}

// ---------------------------------------------------------------- batch_norm_elemt_grad

// Per channel, with invstd = 1 / sqrt(var + eps):
//   dx = dy w invstd;  dmean = -w invstd sum(dy);  dvar = -w invstd^3 / 2 sum(dy (x - mean));
//   dweight = invstd sum(dy (x - mean));  dbias = sum(dy).
template <typename T>
__global__ void ElemtGradChannelKernel(int64_t channels, int64_t chunks, const double* partial,
                                       const T* var, const T* w, double eps, double* scale,
                                       T* dmean, T* dvar, T* dw, T* db) {
  using A = Acc<T>;
  ONEFLOW_CUDA_GRID_LOOP(c, channels) {
    double sum_dy, sum_dy_xc;
    ChannelTotals(partial, chunks, c, &sum_dy, &sum_dy_xc);
    const double invstd = 1.0 / sqrt(static_cast<double>(Load(var[c])) + eps);
    const double wc = static_cast<double>(Load(w[c]));
    scale[c] = static_cast<A>(wc * invstd);
    dmean[c] = Store<T>(-wc * invstd * sum_dy);
    dvar[c] = Store<T>(-0.5 * wc * invstd * invstd * invstd * sum_dy_xc);
    dw[c] = Store<T>(invstd * sum_dy_xc);
    db[c] = Store<T>(sum_dy);
  }
}

template <typename T>
__global__ void ScaleKernel(int64_t total, int64_t inner, int64_t channels, const T* dy,
                            const double* scale, T* dx) {
  using A = Acc<T>;
  ONEFLOW_CUDA_GRID_LOOP(i, total) {
    const int64_t c = (i / inner) % channels;
    dx[i] = Store<T>(Load(dy[i]) * static_cast<A>(scale[c]));
  }
}

// batch_norm_elemt_grad(dy, x, mean, var, weight), attr eps -> (dx, dmean, dvar, dw, db).
std::vector<Tensor> ElemtGradCuda(const std::vector<Tensor>& in, const Attrs& attrs,
                                  const std::vector<TensorMeta>& out) {
  std::vector<Tensor> res;
  for (const TensorMeta& m : out) res.push_back(Tensor::Empty(m));
  cuda::DispatchFloatingWithHalf(in[1].dtype(), "batch_norm_elemt_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const ChannelLayout l(in[1].shape());
    if (l.c == 0) return;
    Tensor dy = fn::contiguous(in[0]), x = fn::contiguous(in[1]), mean = fn::contiguous(in[2]);
    Tensor var = fn::contiguous(in[3]), w = fn::contiguous(in[4]);
    const Tensor& dx = res[0];
    cudaStream_t stream = cuda::StreamFor(dx.device());
    const Sums sums = MakeSums(l, 1, dx.device());  // extra: the dx scale
    double* scale = sums.extra(0, l.c);

    LaunchPartialSums(l, sums,
                      GradSumsOf<DevT<T>>{cuda::Ptr<T>(dy), cuda::Ptr<T>(x), cuda::Ptr<T>(mean)},
                      stream);
    ElemtGradChannelKernel<<<cuda::Blocks(l.c), cuda::kThreads, 0, stream>>>(
        l.c, sums.chunks, sums.partial(), cuda::Ptr<T>(var), cuda::Ptr<T>(w),
        attrs.Get<double>("eps"), scale, cuda::Ptr<T>(res[1]), cuda::Ptr<T>(res[2]),
        cuda::Ptr<T>(res[3]), cuda::Ptr<T>(res[4]));
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
    if (dx.numel() == 0) return;
    ScaleKernel<<<cuda::Blocks(dx.numel()), cuda::kThreads, 0, stream>>>(
        dx.numel(), l.inner, l.c, cuda::Ptr<T>(dy), scale, cuda::Ptr<T>(dx));
    ONEFLOW_CUDA_CHECK(cudaGetLastError());
  });
  return res;
}

}  // namespace

ONEFLOW_REGISTER_KERNEL(batch_norm_train, kCUDA, TrainCuda);
ONEFLOW_REGISTER_KERNEL(batch_norm_train_grad, kCUDA, TrainGradCuda);
ONEFLOW_REGISTER_KERNEL(batch_norm_elemt, kCUDA, ElemtCuda);
ONEFLOW_REGISTER_KERNEL(batch_norm_elemt_grad, kCUDA, ElemtGradCuda);

}  // namespace oneflow
