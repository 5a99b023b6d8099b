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
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// reduction: "mean", "sum" or "none". target holds class indices (int64).
Tensor nll_loss(const Tensor& log_probs, const Tensor& target,
                const std::string& reduction = "mean", int64_t ignore_index = -100);
Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                     const std::string& reduction = "mean", int64_t ignore_index = -100);
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");

}  // namespace fn
}  // namespace oneflow
