// The random ops' CUDA kernels (core/kernels/cuda/kernels/random.cuh) on the host stand-in,
// bit for bit against the CPU's generator written out here as random.cc had it (SplitMix64 of
// seed ^ SplitMix64(counter), 53 bits): every element, every row length of kRowLengths, the
// half types through float as the CPU stores them, shard windows, seeds and offsets from
// device memory (an RngCapture's state), and the lazy index checks' value capture
// (kernels/bad_index.cuh).
#include "core/kernels/cuda/kernels/random.cuh"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/kernels/cuda/kernels/bad_index.cuh"
#include "tests/cuda_host/standin_test_util.h"

namespace oneflow {
namespace cuda {
namespace {

using cuda_host::kRowLengths;
using cuda_host::ToDouble;

uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
double RefU01(uint64_t seed, uint64_t i) {
  return static_cast<double>(Mix(seed ^ Mix(i)) >> 11) / 9007199254740992.0;
}
// Each product rounded before the sum (volatile: no fused multiply-add).
double RefUniform(uint64_t seed, uint64_t c, double low, double high) {
  volatile double prod = (high - low) * RefU01(seed, c);
  return low + prod;
}

template <typename T>
bool SameBits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// The storage of v as the CPU stores a draw of dtype T (half types through float).
template <typename T>
T AsStored(double v) {
  return cuda_host::FromDouble<T>(v);
}

template <typename T>
void CheckUniform(const rng::Source& src, uint64_t seed, uint64_t off) {
  for (int64_t n : kRowLengths) {
    std::vector<T> got(n);
    OF_CUDA_LAUNCH(UniformKernel<T>, 2, 64, 0, nullptr, n, got.data(), src, rng::Window{}, -2.0,
                   3.0);
    int64_t first_bad = -1;
    for (int64_t i = 0; i < n && first_bad < 0; ++i) {
      if (!SameBits(got[i], AsStored<T>(RefUniform(seed, off + i, -2.0, 3.0)))) first_bad = i;
    }
    INFO("n=" << n);
    REQUIRE(first_bad == -1);
  }
}

TEST_CASE("uniform draws the CPU's numbers bit for bit", "[random]") {
  rng::Source src;
  src.seed = 0x2545F4914F6CDD1Dull;
  src.offset = 1234;
  CheckUniform<float>(src, src.seed, src.offset);
  CheckUniform<double>(src, src.seed, src.offset);
  CheckUniform<__half>(src, src.seed, src.offset);
  CheckUniform<__nv_bfloat16>(src, src.seed, src.offset);
}

TEST_CASE("the seed and offset come from device memory during a capture", "[random]") {
  const int64_t state[2] = {77, 1000};  // {seed, base}
  rng::Source src;
  src.state = state;
  src.offset = 24;  // relative to the base
  CheckUniform<float>(src, 77, 1024);
}

TEST_CASE("randint, dropout and randperm are the CPU's", "[random]") {
  rng::Source src;
  src.seed = 5;
  src.offset = 40;
  for (int64_t n : kRowLengths) {
    INFO("n=" << n);
    std::vector<int64_t> ints(n);
    OF_CUDA_LAUNCH(RandintKernel<int64_t>, 3, 32, 0, nullptr, n, ints.data(), src, rng::Window{},
                   int64_t{-5}, int64_t{9});
    std::vector<__half> mask(n);
    OF_CUDA_LAUNCH(DropoutMaskKernel<__half>, 1, 128, 0, nullptr, n, mask.data(), src,
                   rng::Window{}, 0.3, 1.0 / 0.7);
    int64_t bad_int = -1, bad_mask = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (bad_int < 0 && ints[i] != -5 + static_cast<int64_t>(RefU01(5, 40 + i) * 14)) bad_int = i;
      const __half want = AsStored<__half>(RefU01(5, 40 + i) >= 0.3 ? 1.0 / 0.7 : 0.0);
      if (bad_mask < 0 && !SameBits(mask[i], want)) bad_mask = i;
    }
    REQUIRE(bad_int == -1);
    REQUIRE(bad_mask == -1);
    std::vector<int64_t> perm(n), ref(n);
    OF_CUDA_LAUNCH(RandpermKernel, 1, 32, 0, nullptr, n, perm.data(), src);
    for (int64_t i = 0; i < n; ++i) ref[i] = i;
    for (int64_t i = n - 1; i > 0; --i) {
      std::swap(ref[i], ref[static_cast<int64_t>(RefU01(5, 40 + i) * (i + 1))]);
    }
    REQUIRE(perm == ref);
  }
}

TEST_CASE("normal is Box-Muller on two counters per element", "[random]") {
  rng::Source src;
  src.seed = 9;
  src.offset = 6;
  const int64_t n = 1025;
  std::vector<double> got(n);
  OF_CUDA_LAUNCH(NormalKernel<double>, 4, 256, 0, nullptr, n, got.data(), src, rng::Window{}, 1.0,
                 2.0);
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double u1 = 1.0 - RefU01(9, 2 * (6 + i)), u2 = RefU01(9, 2 * (6 + i) + 1);
    const double want = 1.0 + 2.0 * std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * M_PI * u2);
    worst = std::max(worst, std::abs(got[i] - want) / (1.0 + std::abs(want)));
  }
  REQUIRE(worst < 1e-14);
}

TEST_CASE("a shard window draws the whole tensor's numbers at its place", "[random]") {
  // The window [1, 3) x [2, 7) of a (4, 9) draw.
  rng::Window w;
  w.ndim = 2;
  w.local[0] = 2, w.local[1] = 5;
  w.logical[0] = 4, w.logical[1] = 9;
  w.start[0] = 1, w.start[1] = 2;
  rng::Source src;
  src.seed = 3;
  std::vector<float> whole(36), part(10);
  OF_CUDA_LAUNCH(UniformKernel<float>, 1, 64, 0, nullptr, 36, whole.data(), src, rng::Window{}, 0.0,
                 1.0);
  OF_CUDA_LAUNCH(UniformKernel<float>, 1, 64, 0, nullptr, 10, part.data(), src, w, 0.0, 1.0);
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 5; ++c) REQUIRE(SameBits(part[r * 5 + c], whole[(1 + r) * 9 + 2 + c]));
  }
}

// Records every out-of-range index of idx (one thread per element, many racing).
__global__ void CheckIndexKernel(BadSlot slot, const int32_t* idx, int64_t n, int64_t bound) {
  for (int64_t e = blockIdx.x * blockDim.x + threadIdx.x; e < n; e += gridDim.x * blockDim.x) {
    if (idx[e] < -bound || idx[e] >= bound) RecordBad(slot, e);
  }
}

TEST_CASE("the bad-index slot keeps the first bad position and its value", "[random][index]") {
  for (int64_t n : kRowLengths) {
    INFO("n=" << n);
    std::vector<int32_t> index(n, 2);
    for (int64_t e = n / 3; e < n; e += 7) index[e] = static_cast<int32_t>(e + 5);  // >= bound
    unsigned long long slot[2] = {~0ull, 0};
    OF_CUDA_LAUNCH(CheckIndexKernel, 2, 64, 0, nullptr, slot, index.data(), n, int64_t{5});
    OF_CUDA_LAUNCH(CaptureBadValueKernel<ContiguousIndexReader<int32_t>>, 1, 1, 0, nullptr, slot,
                   ContiguousIndexReader<int32_t>{index.data()});
    const int64_t first = n / 3;  // index[first] = first + 5 >= 5: the first bad one
    REQUIRE(slot[0] == static_cast<unsigned long long>(first));
    REQUIRE(static_cast<int64_t>(slot[1]) == first + 5);
  }
  unsigned long long clean[2] = {~0ull, 0};
  const int32_t fine[3] = {0, 1, -2};
  OF_CUDA_LAUNCH(CheckIndexKernel, 1, 32, 0, nullptr, clean, fine, int64_t{3}, int64_t{5});
  OF_CUDA_LAUNCH(CaptureBadValueKernel<ContiguousIndexReader<int32_t>>, 1, 1, 0, nullptr, clean,
                 ContiguousIndexReader<int32_t>{fine});
  REQUIRE(clean[0] == ~0ull);
  REQUIRE(clean[1] == 0);  // no bad position: nothing captured
}

}  // namespace
}  // namespace cuda
}  // namespace oneflow
