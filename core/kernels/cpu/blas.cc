#include "core/kernels/cpu/blas.h"

#include <cblas.h>
#include <cpuid.h>
#include <oneapi/dnnl/dnnl.h>

#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <unordered_map>

#include "core/error.h"
#include "core/kernels/cpu/onednn_eltwise.h"

namespace oneflow {
namespace cpu {

namespace {

// Below this many multiply-adds, oneDNN's dispatch costs more than its faster kernel saves
// (measured: 16x16x16 takes 0.2 us in OpenBLAS, 0.4 us in oneDNN; 6x784x75 23 us against 6).
constexpr int64_t kSmallProduct = 32 * 32 * 32;

}  // namespace

void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (m * n * k >= kSmallProduct) {
    dnnl_status_t status =
        dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    ONEFLOW_CHECK(status == dnnl_success, "sgemm: oneDNN failed with status ",
                  static_cast<int>(status), " for ", m, "x", k, " by ", k, "x", n);
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, alpha, a, lda, b, ldb, beta, c, ldc);
}

bool HasBf16Gemm() {
  static const bool has = [] {
    // The CPU's own word (AVX512-BF16: CPUID.(7,1):EAX[5]; AMX-BF16: CPUID.(7,0):EDX[22]), and
    // oneDNN's, which also knows whether the OS enabled the AVX-512 / AMX state.
    unsigned a = 0, b = 0, c = 0, d = 0;
    bool avx512_bf16 = __get_cpuid_count(7, 1, &a, &b, &c, &d) && ((a >> 5) & 1);
    bool amx_bf16 = __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((d >> 22) & 1);
    const unsigned isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const unsigned need = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
    return (avx512_bf16 || amx_bf16) && (isa & need) == need;
  }();
  return has;
}

namespace {

using dnnl::memory;

// Primitives are cached by everything that shapes them.
using Bf16Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                           bool /*beta*/, bool /*f32 out*/>;

void RunBf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
             const void* b, int64_t ldb, float beta, void* c, int64_t ldc, bool f32_out) {
  if (m == 0 || n == 0) return;
  ONEFLOW_CHECK(beta == 0.f || beta == 1.f, "gemm_bf16: beta must be 0 or 1, got ", beta);
  static std::mutex mu;
  static auto* cache = new std::map<Bf16Key, std::pair<dnnl::matmul, dnnl::matmul::primitive_desc>>;
  dnnl::engine& eng = OneDnnEngine();
  const auto bf16 = memory::data_type::bf16;
  memory::desc a_md({m, k}, bf16, ta ? memory::dims{1, lda} : memory::dims{lda, 1});
  memory::desc b_md({k, n}, bf16, tb ? memory::dims{1, ldb} : memory::dims{ldb, 1});
  memory::desc c_md({m, n}, f32_out ? memory::data_type::f32 : bf16, memory::dims{ldc, 1});
  Bf16Key key{ta, tb, m, n, k, lda, ldb, ldc, beta != 0.f, f32_out};
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache->find(key);
  if (it == cache->end()) {
    dnnl::primitive_attr attr;
    if (beta != 0.f) {
      dnnl::post_ops ops;
      ops.append_sum(beta);
      attr.set_post_ops(ops);
    }
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, eng);
    it = cache->emplace(key, std::make_pair(dnnl::matmul(pd), pd)).first;
  }
  memory am(a_md, eng, const_cast<void*>(a)), bm(b_md, eng, const_cast<void*>(b)), cm(c_md, eng, c);
  it->second.first.execute(OneDnnStream(),
                           {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  OneDnnStream().wait();
}

// Key: ta, tb, m, n, k, lda, ldb, ldc, bias, relu.
using BiasReluKey =
    std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool>;

// A primitive with its memory objects: a call only points them at its buffers.
struct BiasReluPrimitive {
  dnnl::matmul matmul;
  memory a, b, bias, c;
  std::unordered_map<int, memory> args;  // handles on the memories above
};

}  // namespace

void GemmBiasRelu(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                  const float* b, int64_t ldb, const float* bias, bool relu, float* c,
                  int64_t ldc) {
  ONEFLOW_CHECK(m > 0 && n > 0 && k > 0, "gemm_bias_relu: expected a non-empty product, got ", m,
                "x", k, " by ", k, "x", n);
  // One lock for the cache, the memory objects (pointed at each call's buffers) and the
  // shared stream, as the other oneDNN paths do.
  static std::mutex mu;
  static auto* cache = new std::map<BiasReluKey, BiasReluPrimitive>;
  const BiasReluKey key{ta, tb, m, n, k, lda, ldb, ldc, bias != nullptr, relu};
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache->find(key);
  if (it == cache->end()) {
    dnnl::engine& eng = OneDnnEngine();
    const auto f32 = memory::data_type::f32;
    memory::desc a_md({m, k}, f32, ta ? memory::dims{1, lda} : memory::dims{lda, 1});
    memory::desc b_md({k, n}, f32, tb ? memory::dims{1, ldb} : memory::dims{ldb, 1});
    memory::desc bias_md({1, n}, f32, memory::dims{n, 1});
    memory::desc c_md({m, n}, f32, memory::dims{ldc, 1});
    dnnl::primitive_attr attr;
    if (relu) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      attr.set_post_ops(ops);
    }
    dnnl::matmul::primitive_desc pd(
        bias ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md) : dnnl::matmul::desc(a_md, b_md, c_md),
        attr, eng);
    BiasReluPrimitive p{dnnl::matmul(pd),           memory(a_md, eng, nullptr),
                        memory(b_md, eng, nullptr), memory(bias_md, eng, nullptr),
                        memory(c_md, eng, nullptr), {}};
    p.args = {{DNNL_ARG_SRC, p.a}, {DNNL_ARG_WEIGHTS, p.b}, {DNNL_ARG_DST, p.c}};
    if (bias) p.args.emplace(DNNL_ARG_BIAS, p.bias);
    it = cache->emplace(key, std::move(p)).first;
  }
  BiasReluPrimitive& p = it->second;
  p.a.set_data_handle(const_cast<float*>(a));
  p.b.set_data_handle(const_cast<float*>(b));
  p.c.set_data_handle(c);
  if (bias) p.bias.set_data_handle(const_cast<float*>(bias));
  p.matmul.execute(OneDnnStream(), p.args);
  OneDnnStream().wait();
}

void GemmBf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const BFloat16* a, int64_t lda,
              const BFloat16* b, int64_t ldb, float beta, BFloat16* c, int64_t ldc) {
  RunBf16(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc, /*f32_out=*/false);
}
void GemmBf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const BFloat16* a, int64_t lda,
              const BFloat16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  RunBf16(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc, /*f32_out=*/true);
}

}  // namespace cpu
}  // namespace oneflow
