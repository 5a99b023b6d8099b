// The host stand-in itself (standin.h): reductions of reduce_util.cuh and sample kernels against
// host references, the shuffle/vote semantics, the launch limits, and the errors it must find
// (divergent barriers and warps). "[.race]" and "[.overrun]" are broken on purpose: check.sh runs
// them under ThreadSanitizer / AddressSanitizer and requires the sanitizer's report.
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/cuda/reduce_util.cuh"
#include "tests/cuda_host/standin_test_util.h"

namespace oneflow {
namespace cuda {
namespace {

// One block per row: the row's sum (BlockReduce) and max (WarpReduce per warp, then block).
__global__ void RowSumKernel(int64_t cols, const float* x, float* sum, float* warp_max) {
  __shared__ float smem[32];
  const float* row = x + blockIdx.x * cols;
  float s = 0.f, m = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += row[j], m = fmaxf(m, row[j]);
  const float total = BlockReduce(s, SumOf<float>, 0.f, smem);
  const float wm = WarpReduce(m, [](float a, float b) { return fmaxf(a, b); });
  if (threadIdx.x == 0) sum[blockIdx.x] = total;
  if (threadIdx.x % kWarpSize == 0)
    warp_max[blockIdx.x * (blockDim.x / kWarpSize) + threadIdx.x / kWarpSize] = wm;
}

// Reverses each block's chunk through dynamic shared memory (needs its __syncthreads).
template <typename T>
__global__ void ReverseKernel(int64_t n, const T* x, T* y, bool barrier) {
  OF_DYNAMIC_SMEM(T, buf);
  const int64_t base = int64_t(blockIdx.x) * blockDim.x;
  const int t = threadIdx.x;
  if (base + t < n) buf[t] = x[base + t];
  if (barrier) __syncthreads();
  const int64_t len = std::min<int64_t>(blockDim.x, n - base);
  if (t < len) y[base + t] = buf[len - 1 - t];
}

TEST_CASE("BlockReduce and WarpReduce match the host", "[standin][reduce]") {
  for (int threads : {32, 64, 256, 1024}) {
    for (int64_t cols : {1, 3, 31, 32, 33, 1025}) {
      const int rows = 3, warps = threads / kWarpSize;
      std::vector<float> x(rows * cols);
      for (size_t i = 0; i < x.size(); ++i) x[i] = float((i * 37) % 101) - 50.f;
      std::vector<float> sum(rows, NAN), wmax(rows * warps, NAN);
      OF_CUDA_LAUNCH(RowSumKernel, rows, threads, 0, nullptr, cols, x.data(), sum.data(),
                     wmax.data());
      for (int r = 0; r < rows; ++r) {
        double ref = 0;
        for (int64_t j = 0; j < cols; ++j) ref += x[r * cols + j];
        CHECK(sum[r] == Approx(ref).margin(1e-3));
        for (int w = 0; w < warps; ++w) {
          float m = -INFINITY;
          for (int64_t j = w * kWarpSize; j < cols; j += threads)
            for (int64_t k = j; k < std::min<int64_t>(j + kWarpSize, cols); ++k)
              m = std::max(m, x[r * cols + k]);
          CHECK(wmax[r * warps + w] == m);
        }
      }
    }
  }
}

TEST_CASE("dynamic shared memory is per block and sized by the launch", "[standin][smem]") {
  for (int64_t n : {1, 5, 128, 129, 300}) {
    std::vector<double> x(n), y(n, -1);
    std::iota(x.begin(), x.end(), 0.0);
    const int threads = 64;
    OF_CUDA_LAUNCH(ReverseKernel<double>, CeilDiv(n, threads), threads, threads * sizeof(double),
                   nullptr, n, x.data(), y.data(), true);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t base = i / threads * threads, len = std::min<int64_t>(threads, n - base);
      REQUIRE(y[i] == x[base + len - 1 - (i - base)]);
    }
  }
}

// Each lane's results of every shuffle and vote, against CUDA's documented lane arithmetic.
__global__ void ShuffleKernel(int* out) {
  const int lane = threadIdx.x % 32;
  int* o = out + threadIdx.x * 8;
  o[0] = __shfl_sync(kFullWarp, lane * 10, 3);
  o[1] = __shfl_sync(kFullWarp, lane * 10, lane + 1, 8);
  o[2] = __shfl_xor_sync(kFullWarp, lane * 10, 5);
  o[3] = __shfl_up_sync(kFullWarp, lane * 10, 2, 16);
  o[4] = __shfl_down_sync(kFullWarp, lane * 10, 3);
  o[5] = static_cast<int>(__ballot_sync(kFullWarp, lane % 3 == 0));
  o[6] = __all_sync(kFullWarp, lane < 40) + 2 * __any_sync(kFullWarp, lane == 31);
  o[7] = __syncthreads_count(threadIdx.x % 2);
}

TEST_CASE("shuffles and votes follow CUDA's lane arithmetic", "[standin][warp]") {
  const int threads = 64;
  std::vector<int> out(threads * 8);
  OF_CUDA_LAUNCH(ShuffleKernel, 1, threads, 0, nullptr, out.data());
  unsigned ballot = 0;
  for (int l = 0; l < 32; l += 3) ballot |= 1u << l;
  for (int t = 0; t < threads; ++t) {
    const int l = t % 32;
    const int* o = &out[t * 8];
    CHECK(o[0] == 30);
    CHECK(o[1] == (l / 8 * 8 + (l + 1) % 8) * 10);
    CHECK(o[2] == (l ^ 5) * 10);
    CHECK(o[3] == (l % 16 >= 2 ? l - 2 : l) * 10);
    CHECK(o[4] == (l + 3 < 32 ? l + 3 : l) * 10);
    CHECK(static_cast<unsigned>(o[5]) == ballot);
    CHECK(o[6] == 3);
    CHECK(o[7] == threads / 2);
  }
}

__global__ void HalfKernel(int64_t n, const __half* x, __nv_bfloat16* y) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16(__half2float(x[i]) * 2.f);
}

TEST_CASE("half and bfloat16 come from the toolkit's headers", "[standin][half]") {
  using cuda_host::ToDouble;
  const std::vector<__half> x = cuda_host::RandomVector<__half>(100, 7);
  std::vector<__nv_bfloat16> y(100);
  OF_CUDA_LAUNCH(HalfKernel, 2, 64, 0, nullptr, int64_t(100), x.data(), y.data());
  std::vector<double> want(100);
  for (int i = 0; i < 100; ++i) want[i] = 2 * ToDouble(x[i]);
  cuda_host::RequireClose(y, want, "half -> bfloat16");
  for (int i = 0; i < 100; ++i) REQUIRE(ToDouble(y[i]) == float(__nv_bfloat16(2 * ToDouble(x[i]))));
}

// A barrier after an early return: undefined on a GPU, an error here.
__global__ void EarlyReturnKernel(int n, float* y) {
  __shared__ float s[64];
  if (static_cast<int>(threadIdx.x) >= n) return;
  s[threadIdx.x] = 1.f;
  __syncthreads();
  y[threadIdx.x] = s[n - 1 - threadIdx.x];
}

__global__ void TwoBarriersKernel() {
  if (threadIdx.x < 32) {
    __syncthreads();
  } else {
    __syncthreads();
  }
}

__global__ void DivergentShuffleKernel(int* out) {
  int v = threadIdx.x;
  if (threadIdx.x % 32 < 16) v = __shfl_xor_sync(kFullWarp, v, 1);
  out[threadIdx.x] = v;
}

__global__ void PartialWarpKernel(float* out) {
  out[threadIdx.x + threadIdx.y * blockDim.x] = WarpReduce(1.f, SumOf<float>);
}

__global__ void ThrowingKernel(int* out) { out[threadIdx.x] = 1; }

TEST_CASE("divergent barriers and warps fail the launch, naming the kernel", "[standin][errors]") {
  std::vector<float> y(64);
  OF_CUDA_LAUNCH(EarlyReturnKernel, 1, 64, 0, nullptr, 64, y.data());  // uniform: fine
  REQUIRE(y[0] == 1.f);
  REQUIRE_THROWS_WITH(OF_CUDA_LAUNCH(EarlyReturnKernel, 2, 64, 0, nullptr, 40, y.data()),
                      Catch::Contains("EarlyReturnKernel: divergent __syncthreads") &&
                          Catch::Contains("(every thread must reach it)"));
  REQUIRE_THROWS_WITH(
      OF_CUDA_LAUNCH(TwoBarriersKernel, 1, 64, 0, nullptr),
      Catch::Contains("divergent __syncthreads") && Catch::Contains("while others wait at"));
  std::vector<int> out(64);
  REQUIRE_THROWS_WITH(OF_CUDA_LAUNCH(DivergentShuffleKernel, 1, 64, 0, nullptr, out.data()),
                      Catch::Contains("DivergentShuffleKernel: divergent warp") &&
                          Catch::Contains("__shfl_xor_sync"));
  REQUIRE_THROWS_WITH(
      OF_CUDA_LAUNCH(PartialWarpKernel, 1, 48, 0, nullptr, y.data()),
      Catch::Contains("with mask 0xffffffff") && Catch::Contains("(0xffff, 16 lanes)"));
  // The pool is reusable after a failed launch.
  OF_CUDA_LAUNCH(PartialWarpKernel, 1, 64, 0, nullptr, y.data());
  REQUIRE(y[63] == 32.f);
}

TEST_CASE("launch limits are the GPU's", "[standin][limits]") {
  std::vector<int> out(2048);
  REQUIRE_THROWS_WITH(OF_CUDA_LAUNCH(ThrowingKernel, 1, 2048, 0, nullptr, out.data()),
                      Catch::Contains("OF_CUDA_LAUNCH(ThrowingKernel): block (2048,1,1)"));
  REQUIRE_THROWS_WITH(OF_CUDA_LAUNCH(ThrowingKernel, 1, dim3(32, 32, 2), 0, nullptr, out.data()),
                      Catch::Contains("has 2048 threads, at most 1024"));
  REQUIRE_THROWS_WITH(OF_CUDA_LAUNCH(ThrowingKernel, 0, 32, 0, nullptr, out.data()),
                      Catch::Contains("grid of 0, needs 1 .. 2^31-1"));
  REQUIRE_THROWS_WITH(OF_CUDA_LAUNCH(ThrowingKernel, int64_t(1) << 31, 32, 0, nullptr, out.data()),
                      Catch::Contains("grid of 2147483648"));
  REQUIRE_THROWS_WITH(OF_CUDA_LAUNCH(ThrowingKernel, dim3(1, 65536), 32, 0, nullptr, out.data()),
                      Catch::Contains("y and z in 1..65535"));
  std::vector<float> x(64), y(64);
  REQUIRE_THROWS_WITH(OF_CUDA_LAUNCH(ReverseKernel<float>, 1, 64, 49 * 1024, nullptr, int64_t(64),
                                     x.data(), y.data(), true),
                      Catch::Contains("50176 bytes of dynamic shared memory, at most 49152"));
  REQUIRE(cudaFuncSetAttribute(ReverseKernel<float>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               100 * 1024) == cudaSuccess);
  OF_CUDA_LAUNCH(ReverseKernel<float>, 1, 64, 49 * 1024, nullptr, int64_t(64), x.data(), y.data(),
                 true);
  REQUIRE(cudaFuncSetAttribute(ReverseKernel<float>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               228 * 1024) == cudaErrorInvalidValue);
  // 2-D blocks: warps are runs of 32 linear thread ids.
  OF_CUDA_LAUNCH(PartialWarpKernel, 1, dim3(16, 4), 0, nullptr, y.data());
  REQUIRE(y[0] == 32.f);
}

// Broken on purpose (check.sh): without the barrier, warp 1 reads what warp 0 writes.
TEST_CASE("a missing __syncthreads is a data race", "[.race]") {
  std::vector<float> x(64, 1.f), y(64);
  OF_CUDA_LAUNCH(ReverseKernel<float>, 1, 64, 64 * sizeof(float), nullptr, int64_t(64), x.data(),
                 y.data(), false);
}

// Broken on purpose (check.sh): 64 threads write 64 floats into 63 floats of shared memory.
TEST_CASE("a shared memory overrun is reported", "[.overrun]") {
  std::vector<float> x(64, 1.f), y(64);
  OF_CUDA_LAUNCH(ReverseKernel<float>, 1, 64, 63 * sizeof(float), nullptr, int64_t(64), x.data(),
                 y.data(), true);
}

}  // namespace
}  // namespace cuda
}  // namespace oneflow
