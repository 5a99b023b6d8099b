// The counter-based generator behind every random op, as functions that compile for the host
// and for CUDA devices (nvcc sees __host__ __device__), so the CPU kernels (core/ops/random.cc)
// and the CUDA kernels (core/kernels/cuda/kernels/random.cuh) compute the same numbers
// bit for bit: element g of a draw at counter offset o is a hash of (seed, o + g).
//
//   double u = rng::Uniform01(seed, offset + g);               // in [0, 1), 53 random bits
//   float v = static_cast<float>(rng::UniformValue(seed, offset + g, low, high));
//
// Products and sums round separately (MulRn, AddRn): a fused multiply-add, which nvcc and an
// FMA-capable host compiler may otherwise form, would change the last bit on one side only.
// normal's log and cos are the platform's (glibc's and CUDA's libdevice, both within 1 ulp but
// not correctly rounded), so a float64 normal draw may differ in its last bits between CPU and
// CUDA; float32 and the half types round those bits away (except in the rare case where the
// double lies on a rounding boundary).
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define ONEFLOW_RNG_HD __host__ __device__ __forceinline__
#else
#define ONEFLOW_RNG_HD inline
#endif

namespace oneflow {
namespace rng {

ONEFLOW_RNG_HD uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) from counter i: the hash's top 53 bits times 2^-53 (exact).
ONEFLOW_RNG_HD double Uniform01(uint64_t seed, uint64_t i) {
  return static_cast<double>(SplitMix64(seed ^ SplitMix64(i)) >> 11) * (1.0 / 9007199254740992.0);
}

// a * b and a + b, each rounded to double (never contracted into a fused multiply-add).
ONEFLOW_RNG_HD double MulRn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  double p = a * b;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __asm__("" : "+x"(p));  // the product leaves the expression: no fma with what follows
#elif defined(__GNUC__)
  __asm__("" : "+w"(p));
#endif
  return p;
#endif
}
ONEFLOW_RNG_HD double AddRn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

// uniform(low, high): low + (high - low) * u.
ONEFLOW_RNG_HD double UniformValue(uint64_t seed, uint64_t counter, double low, double high) {
  return AddRn(low, MulRn(high - low, Uniform01(seed, counter)));
}

// normal(mean, std) by Box-Muller on counters 2c and 2c + 1.
ONEFLOW_RNG_HD double NormalValue(uint64_t seed, uint64_t c, double mean, double std) {
  const double u1 = 1.0 - Uniform01(seed, 2 * c);
  const double u2 = Uniform01(seed, 2 * c + 1);
  const double r = sqrt(MulRn(-2.0, log(u1)));
  return AddRn(mean, MulRn(MulRn(std, r), cos(MulRn(2 * M_PI, u2))));
}

// randint(low, high): low + floor(u * (high - low)).
ONEFLOW_RNG_HD int64_t RandintValue(uint64_t seed, uint64_t counter, int64_t low, int64_t high) {
  return low +
         static_cast<int64_t>(MulRn(Uniform01(seed, counter), static_cast<double>(high - low)));
}

// randperm's Fisher-Yates step i (from n - 1 down to 1) swaps element i with this one.
ONEFLOW_RNG_HD int64_t PermutationPick(uint64_t seed, uint64_t counter, int64_t i) {
  return static_cast<int64_t>(MulRn(Uniform01(seed, counter), static_cast<double>(i + 1)));
}

// dropout: an element is kept (scaled by 1 / (1 - p)) when its draw is >= p.
ONEFLOW_RNG_HD bool DropoutKeep(uint64_t seed, uint64_t counter, double p) {
  return Uniform01(seed, counter) >= p;
}

// Where a draw's seed and counter offset come from: the op's attributes (state == nullptr), or
// device memory {seed, base offset} that a captured CUDA graph's replay rewrites before each
// launch (then offset is relative to the base). See core/kernels/cuda/rng_state.h.
struct Source {
  const int64_t* state = nullptr;
  uint64_t seed = 0;
  uint64_t offset = 0;
  ONEFLOW_RNG_HD uint64_t Seed() const { return state ? static_cast<uint64_t>(state[0]) : seed; }
  ONEFLOW_RNG_HD uint64_t Offset() const {
    return state ? static_cast<uint64_t>(state[1]) + offset : offset;
  }
};

// Element i of a draw (row-major in the tensor made) to its index g in the logical tensor: the
// identity, or under a shard window (core/shard_window.h) i's position in the window shifted by
// the window's start, in the logical shape.
constexpr int kMaxWindowDims = 8;
struct Window {
  int ndim = 0;  // 0: the identity
  int64_t local[kMaxWindowDims] = {};
  int64_t logical[kMaxWindowDims] = {};
  int64_t start[kMaxWindowDims] = {};
  ONEFLOW_RNG_HD int64_t Logical(int64_t i) const {
    if (ndim == 0) return i;
    int64_t g = 0, stride = 1;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t idx = i % local[d];
      i /= local[d];
      g += (start[d] + idx) * stride;
      stride *= logical[d];
    }
    return g;
  }
};

}  // namespace rng
}  // namespace oneflow
