// The C++ op API: one function per user-facing op. Each builds Attrs and calls the registry
// through CallOp, so autograd, devices and global tensors all work the same way.
//
//   Tensor y = fn::relu(fn::add(fn::matmul(x, w), b));
//   Tensor loss = fn::cross_entropy(y, labels);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/ops/complex.h"  // complex tensors: view_as_real, real, imag, complex, conj, ...
#include "core/tensor.h"

namespace oneflow {
namespace fn {

using IntList = std::vector<int64_t>;

// ---- creation (core/ops/creation.cc) ----
Tensor empty(const Shape& shape, DType dtype = DType::kFloat32, const Device& device = Device());
Tensor zeros(const Shape& shape, DType dtype = DType::kFloat32, const Device& device = Device());
Tensor ones(const Shape& shape, DType dtype = DType::kFloat32, const Device& device = Device());
Tensor full(const Shape& shape, double value, DType dtype = DType::kFloat32,
            const Device& device = Device());
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
// A 0-dim tensor holding value, with like's dtype and device (for `x + 1`).
Tensor scalar_like(double value, const Tensor& like);
// Where a tensor an op makes for its input `like` lives (constants, positions, index tensors of
// composites, rule rewrites, hooks): the one place that decides it. On like's device; for a
// global like, broadcast on like's placement, each rank's piece on the placement's device
// (DESIGN.md, Where op-made tensors live).
//   constant_like: `value` of any shape and dtype there (0-dim: on like's device, local, to join
//     a global call as Python numbers do);
//   place_like: `values` (the same on every rank, made on any device) moved there.
Tensor constant_like(const Tensor& like, const Shape& shape, double value, DType dtype);
Tensor place_like(const Tensor& like, const Tensor& values);
Tensor arange(double start, double end, double step, DType dtype = DType::kInt64,
              const Device& device = Device());
Tensor eye(int64_t n, int64_t m, DType dtype = DType::kFloat32, const Device& device = Device());
// Copies numel elements of dtype from host memory.
Tensor from_blob_copy(const void* data, const Shape& shape, DType dtype,
                      const Device& device = Device());

// ---- random (core/ops/random.cc): one generator per process, same seed -> same numbers ----
void manual_seed(uint64_t seed);
uint64_t initial_seed();
// The generator's (seed, counter offset), and setting both: what a Python flow.Generator swaps
// in around its draws (each generator is such a pair on the same counter-based stream).
std::pair<uint64_t, uint64_t> generator_state();
void set_generator_state(uint64_t seed, uint64_t offset);
// Reserves n draws from the generator and returns the counter offset to start at.
uint64_t generator_advance(uint64_t n);
Tensor rand(const Shape& shape, DType dtype = DType::kFloat32, const Device& device = Device());
Tensor randn(const Shape& shape, DType dtype = DType::kFloat32, const Device& device = Device());
Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype = DType::kInt64,
               const Device& device = Device());
Tensor randperm(int64_t n, const Device& device = Device());
Tensor uniform(const Shape& shape, double low, double high, DType dtype = DType::kFloat32,
               const Device& device = Device());
Tensor normal(const Shape& shape, double mean, double std, DType dtype = DType::kFloat32,
              const Device& device = Device());
// Keep-mask of bernoulli(1 - p) draws scaled by 1 / (1 - p), the shape of x.
Tensor dropout_mask(const Tensor& x, double p);

// ---- elementwise (core/ops/elementwise.cc), with broadcasting and type promotion ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);  // true division: ints give float32
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, const Tensor& b);  // Python's %: the sign of b
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor square(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor relu6(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor gelu(const Tensor& x);  // exact (erf) form, PyTorch's default
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
// The unary table (core/ops/unary_table.cc): floating ops, integers computed as float32.
Tensor log1p(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor log10(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor asin(const Tensor& x);
Tensor acos(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor sinh(const Tensor& x);
Tensor cosh(const Tensor& x);
Tensor asinh(const Tensor& x);
Tensor atanh(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor erfc(const Tensor& x);
Tensor erfinv(const Tensor& x);
Tensor lgamma(const Tensor& x);   // log |gamma(x)|; its derivative is digamma
Tensor digamma(const Tensor& x);  // d/dx lgamma(x); its derivative is trigamma
Tensor floor(const Tensor& x);    // rounding keeps integer tensors as they are
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);  // half to even
Tensor trunc(const Tensor& x);
Tensor silu(const Tensor& x);
Tensor mish(const Tensor& x);
Tensor hardswish(const Tensor& x);
Tensor hardsigmoid(const Tensor& x);
Tensor logsigmoid(const Tensor& x);
Tensor softsign(const Tensor& x);
Tensor selu(const Tensor& x);
Tensor gelu_tanh(const Tensor& x);  // gelu(approximate="tanh")
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
Tensor elu(const Tensor& x, double alpha = 1.0);
Tensor celu(const Tensor& x, double alpha = 1.0);
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
Tensor softshrink(const Tensor& x, double lambd = 0.5);
Tensor hardshrink(const Tensor& x, double lambd = 0.5);
Tensor threshold(const Tensor& x, double threshold, double value);
// Scalar conveniences: a 0-dim operand of x's dtype.
Tensor add_scalar(const Tensor& x, double v);
Tensor mul_scalar(const Tensor& x, double v);

// ---- reductions (core/ops/reduce.cc); empty dims means all dims ----
Tensor sum(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
// Over one dim: (values, indices).
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max_all(const Tensor& x);
// Product over dims (integers accumulate in int64, floats in double).
Tensor prod(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
// Largest / smallest over dims; ties share the gradient evenly (PyTorch's amax/amin).
Tensor amax(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
Tensor min_all(const Tensor& x);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// Sums a broadcast result back down to shape (gradients of broadcasting ops).
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- linear algebra (core/ops/matmul.cc) ----
// 1-D/2-D/batched with broadcast batch dims, like torch.matmul.
Tensor matmul(const Tensor& a, const Tensor& b);
// x @ weight^T + bias; bias may be undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

// ---- shape and view ops (core/ops/shape.cc); views share storage where PyTorch's do ----
Tensor reshape(const Tensor& x, const IntList& shape);  // one -1 allowed
Tensor view(const Tensor& x, const IntList& shape);     // REQUIRES: viewable without a copy
Tensor permute(const Tensor& x, const IntList& dims);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor select(const Tensor& x, int64_t dim, int64_t index);  // drops dim
Tensor expand(const Tensor& x, const IntList& shape);        // -1 keeps a dim
Tensor squeeze(const Tensor& x, std::optional<int64_t> dim = std::nullopt);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor contiguous(const Tensor& x);       // x itself when already contiguous
Tensor contiguous_copy(const Tensor& x);  // always a new buffer (clone)
Tensor clone(const Tensor& x);
Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out[i][j][k] = x[i][index[i][j][k]][k] for dim 1; index has x's shape except in dim.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor to_dtype(const Tensor& x, DType dtype);
Tensor to_device(const Tensor& x, const Device& device);
// In-place: copies src (broadcast, cast) into dst's memory; no autograd.
void copy_(const Tensor& dst, const Tensor& src);
void fill_(const Tensor& dst, double value);

// ---- nn (core/ops/nn.cc) ----
// bias may be undefined. stride/padding/dilation are (h, w).
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const IntList& stride,
              const IntList& padding, const IntList& dilation, int64_t groups);
// The transposed convolution (the gradient of conv2d wrt its input), weight (in_channels,
// out_channels / groups, kh, kw) as in PyTorch; bias may be undefined.
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const IntList& stride, const IntList& padding,
                        const IntList& output_padding, int64_t groups, const IntList& dilation);
Tensor max_pool2d(const Tensor& x, const IntList& kernel, const IntList& stride,
                  const IntList& padding, const IntList& dilation, bool ceil_mode);
Tensor avg_pool2d(const Tensor& x, const IntList& kernel, const IntList& stride,
                  const IntList& padding, bool ceil_mode, bool count_include_pad);
Tensor adaptive_avg_pool2d(const Tensor& x, const IntList& output_size);
// training: normalise with batch statistics and update running_mean/var in place (when
// defined) with momentum; eval: normalise with the running statistics.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps);
Tensor dropout(const Tensor& x, double p, bool training);
// Normalizes over the trailing dims given by normalized_shape; weight and bias (shaped
// normalized_shape) may be undefined (core/ops/nn/layer_norm.cc).
Tensor layer_norm(const Tensor& x, const IntList& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps = 1e-5);
// x / sqrt(mean(x^2 over normalized_shape) + eps) * weight; weight may be undefined (ones).
Tensor rms_norm(const Tensor& x, const IntList& normalized_shape, const Tensor& weight, double eps);
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// reduction: "mean", "sum" or "none". target holds class indices (int64).
Tensor nll_loss(const Tensor& log_probs, const Tensor& target,
                const std::string& reduction = "mean", int64_t ignore_index = -100);
// label_smoothing (PyTorch's) needs local logits of shape (C,) or (N, C) (the fused op).
Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                     const std::string& reduction = "mean", int64_t ignore_index = -100,
                     double label_smoothing = 0.0);
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");

// ---- everyday API: kernels in core/ops/index.cc (tril, triu, flip, scatter), core/ops/sort.cc
// (sort, cumsum, cumprod) and core/ops/random.cc (multinomial); the rest are composites in
// core/ops/everyday.cc ----
Tensor linspace(double start, double end, int64_t steps, DType dtype = DType::kFloat32,
                const Device& device = Device());
// indexing "ij" (matrix) or "xy" (Cartesian: the first two output dims swapped).
std::vector<Tensor> meshgrid(const std::vector<Tensor>& xs, const std::string& indexing = "ij");
// 1-D -> a matrix with x on diagonal `diagonal`; 2-D -> that diagonal as a 1-D tensor.
Tensor diag(const Tensor& x, int64_t diagonal = 0);
// The diagonal of dims (dim1, dim2) moved to the last dim (PyTorch's torch.diagonal).
Tensor diagonal(const Tensor& x, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split_with_sizes(const Tensor& x, const IntList& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor unflatten(const Tensor& x, int64_t dim, const IntList& sizes);  // one -1 allowed
Tensor flip(const Tensor& x, const IntList& dims);
// Empty dims: x flattened, rolled and reshaped back.
Tensor roll(const Tensor& x, const IntList& shifts, const IntList& dims);
Tensor repeat(const Tensor& x, const IntList& repeats);  // Tensor.repeat (tiling)
// No dim: over x flattened. Tensor repeats: one count per element of dim (read on the host).
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim);
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim);
// Elements (i, j) of the last two dims with j - i <= diagonal (tril) / >= diagonal (triu).
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
// gather with the other dims broadcast between x and index; no dim: over both flattened.
Tensor take_along_dim(const Tensor& x, const Tensor& index, std::optional<int64_t> dim);
// A copy of x with out[i][index[i][j][k]][k] = src[i][j][k] (dim 1); index may be smaller than
// x outside dim and than src everywhere. scatter_add adds instead of writing.
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, double value);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// int64 one-hot rows; num_classes -1: max(index) + 1 (read on the host).
Tensor one_hot(const Tensor& index, int64_t num_classes = -1);
// Integer and bool inputs scan in int64.
Tensor cumsum(const Tensor& x, int64_t dim);
Tensor cumprod(const Tensor& x, int64_t dim);
// Stable; NaN sorts after every number. (values, int64 indices).
std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);
// The k largest (smallest) along dim, always in sorted order.
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                               bool sorted = true);
// Empty dims: all dims. bool results (uint8 for uint8 input, as in PyTorch).
Tensor all(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
Tensor any(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
// The lower median (NaN where a NaN is present); with dim: (values, indices).
Tensor median_all(const Tensor& x);
std::pair<Tensor, Tensor> median(const Tensor& x, int64_t dim, bool keepdim = false);
// The most frequent value (smallest on ties) and the index of its last occurrence.
std::pair<Tensor, Tensor> mode(const Tensor& x, int64_t dim = -1, bool keepdim = false);
// Sorted unique values of a local tensor, the index of each element's value (x's shape) and
// each value's count. Throws on a global tensor.
struct UniqueResult {
  Tensor values, inverse, counts;
};
UniqueResult unique(const Tensor& x);
// Non-maximum suppression (OneFlow's flow.nms, torchvision.ops.nms): the indices (int64) of the
// boxes kept, highest score first, where boxes (N, 4) are (x1, y1, x2, y2) and a box is dropped
// when its IoU with a kept one exceeds iou_threshold. Computed on the host; the result lives
// where boxes live (a global one: broadcast on its placement, from the whole boxes).
Tensor nms(const Tensor& boxes, const Tensor& scores, double iou_threshold);
// Category indices drawn from each row of non-negative weights (1-D or 2-D), from the
// process's generator (manual_seed makes it reproducible).
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false);
Tensor bmm(const Tensor& a, const Tensor& b);
Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, double beta = 1,
             double alpha = 1);
Tensor baddbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, double beta = 1,
               double alpha = 1);
Tensor outer(const Tensor& a, const Tensor& b);
// "bij,bjk->bik", "ii->i", "...ij->...ji", implicit output ("ij,jk"): permutes and reshapes
// to batched matmuls; repeated labels in one operand take its diagonal.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

}  // namespace fn
}  // namespace oneflow
