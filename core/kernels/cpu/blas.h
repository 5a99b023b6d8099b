// Dense GEMM on the CPU, row-major: C = alpha * op(A) * op(B) + beta * C, op(A) m x k and
// op(B) k x n, with leading dimensions as in BLAS (row strides here). With beta == 0, C is
// written without being read (it may hold garbage).
//
//   cpu::Gemm(/*ta=*/false, /*tb=*/true, m, n, k, 1.0f, x, k, w, k, 0.0f, y, n);  // y = x w^T
//
// float goes to oneDNN's sgemm (JIT kernels for the CPU it runs on: AVX-512 and newer, where
// Debian's OpenBLAS 0.3.21 falls back to its Haswell AVX2 kernels on recent Xeons and runs at
// about half the speed), except for tiny products, where OpenBLAS' lower call overhead wins;
// double goes to OpenBLAS. Both are deterministic for a given shape and thread count.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace oneflow {
namespace cpu {

void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

// C = op(A) * op(B) + bias, then relu when asked, in float32 through one oneDNN matmul
// primitive that adds the bias and applies relu as it writes C (no further pass over C); bias
// is null or n contiguous floats added to every row. Where the second operand is transposed
// (x w^T of a linear layer), the primitive's kernels are about 10% faster than sgemm here.
// REQUIRES: m, n, k > 0.
//
//   cpu::GemmBiasRelu(false, true, m, n, k, x, k, w, k, b, /*relu=*/true, y, n);  // x w^T + b
void GemmBiasRelu(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                  const float* b, int64_t ldb, const float* bias, bool relu, float* c, int64_t ldc);

// bfloat16 GEMM through oneDNN's matmul primitive: bfloat16 inputs, float32 accumulation,
// C in bfloat16 or float32 (alpha is 1; beta 0 or 1). Fast only where the CPU has bfloat16
// instructions (AVX512-BF16, AMX); callers check HasBf16Gemm() and otherwise compute in float32.
//
//   if (cpu::HasBf16Gemm()) cpu::GemmBf16(false, true, m, n, k, x, k, w, k, 0.f, y, n);
bool HasBf16Gemm();
void GemmBf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const BFloat16* a, int64_t lda,
              const BFloat16* b, int64_t ldb, float beta, BFloat16* c, int64_t ldc);
void GemmBf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const BFloat16* a, int64_t lda,
              const BFloat16* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace cpu
}  // namespace oneflow
