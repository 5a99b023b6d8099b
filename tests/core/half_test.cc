// float16 / bfloat16 on the CPU: the float32 fallback at the dispatch seam (dtypes kept,
// float32 accumulation, in-place kernels written back), oneDNN's bfloat16 GEMM against a naive
// float32 product, and the autocast policy.
#include <cmath>

#include "core/autocast.h"
#include "core/dispatch.h"
#include "core/kernels/cpu/blas.h"
#include "core/optim.h"
#include "tests/test_util.h"

namespace oneflow {
namespace {

using testing::ToVector;

TEST_CASE("half inputs compute in float32 and keep their dtype") {
  for (DType t : {DType::kBFloat16, DType::kFloat16}) {
    INFO(DTypeName(t));
    Tensor x = fn::to_dtype(fn::randn(Shape({3, 4})), t);
    CHECK(fn::exp(x).dtype() == t);
    CHECK(fn::add(x, x).dtype() == t);
    CHECK(fn::add(x, fn::randn(Shape({3, 4}))).dtype() == DType::kFloat32);  // promotes
    CHECK(fn::softmax(x, -1).dtype() == t);
    std::vector<double> got = ToVector(fn::exp(x)), in = ToVector(x);
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(std::exp(in[i])).epsilon(1e-2));
    // 4096 ones: a half accumulator would stop at 256 (bfloat16) or 2048 (float16).
    CHECK(ToVector(fn::sum(fn::ones(Shape({4096}), t)))[0] == 4096);
  }
}

TEST_CASE("an in-place kernel on half tensors writes back through the fallback") {
  Tensor p = fn::to_dtype(fn::ones(Shape({5})), DType::kBFloat16);
  Tensor g = fn::to_dtype(fn::full(Shape({5}), 0.5), DType::kBFloat16);
  optim::SgdUpdate(p, g, Tensor(), /*lr=*/1.0, /*momentum=*/0, /*dampening=*/0, /*nesterov=*/false,
                   /*weight_decay=*/0);
  CHECK(p.dtype() == DType::kBFloat16);
  for (double v : ToVector(p)) CHECK(v == 0.5);
}

TEST_CASE("bfloat16 GEMM on oneDNN matches a naive float32 product") {
  if (!cpu::HasBf16Gemm()) {
    WARN("this CPU has no AVX512-BF16 / AMX: the bfloat16 GEMM is not used here");
    return;
  }
  const int64_t m = 37, n = 53, k = 130;
  for (bool tb : {false, true}) {
    Tensor a = fn::to_dtype(fn::randn(Shape({m, k})), DType::kBFloat16);
    Tensor b = fn::to_dtype(fn::randn(tb ? Shape({n, k}) : Shape({k, n})), DType::kBFloat16);
    Tensor c = fn::empty(Shape({m, n}), DType::kFloat32, Device::CPU());
    cpu::GemmBf16(false, tb, m, n, k, a.data<BFloat16>(), k, b.data<BFloat16>(), tb ? k : n, 0.f,
                  c.data<float>(), n);
    std::vector<double> av = ToVector(a), bv = ToVector(b), cv = ToVector(c);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += av[i * k + p] * (tb ? bv[j * k + p] : bv[p * n + j]);
        CHECK(cv[i * n + j] == Approx(s).margin(1e-3));  // exact products, float32 sums
      }
    }
    // The op path: bfloat16 out, rounded once.
    Tensor y = fn::matmul(a, tb ? fn::transpose(b, 0, 1) : b);
    CHECK(y.dtype() == DType::kBFloat16);
    std::vector<double> yv = ToVector(y);
    for (size_t i = 0; i < yv.size(); ++i)
      CHECK(yv[i] == Approx(cv[i]).epsilon(1.0 / 128).margin(1e-2));
  }
}

TEST_CASE("autocast runs linear in bfloat16, softmax in float32, gradients in float32") {
  Tensor x = fn::randn(Shape({4, 8}));
  Tensor w = fn::randn(Shape({3, 8}));
  w.set_requires_grad(true);
  Tensor loss;
  {
    AutocastGuard guard(DeviceType::kCPU, /*enabled=*/true, DType::kBFloat16);
    Tensor y = fn::linear(x, w, Tensor());
    CHECK(y.dtype() == DType::kBFloat16);
    Tensor s = fn::softmax(y, -1);
    CHECK(s.dtype() == DType::kFloat32);
    CHECK(fn::relu(y).dtype() == DType::kBFloat16);  // neither list: as given
    loss = fn::sum(fn::mul(s, s));
  }
  CHECK_FALSE(AutocastEnabled(DeviceType::kCPU));
  loss.backward();
  REQUIRE(w.grad().defined());
  CHECK(w.grad().dtype() == DType::kFloat32);
}

}  // namespace
}  // namespace oneflow
