// Sample calls of every registered op (inputs and attrs), shared by the suites that run every op:
// the SBP rule validation (tests/sbp/rules_validation_test.cc) and the CUDA-against-CPU kernel
// comparison (tests/core/cuda_kernels_test.cc). Inputs are CPU tensors drawn from a fixed seed,
// so every run and every suite sees the same numbers.
//
//   for (const testing::Sample& s : testing::Samples())
//     RunLocalKernel(OpRegistry::Global().Get(s.op), s.in, s.attrs);
//
// A new op must add a sample to MakeSamples(): both suites fail, naming the op, until it does.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/attrs.h"
#include "core/tensor.h"

namespace oneflow {
namespace testing {

// Deterministic random tensors (CPU).
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  double Uniform(double lo, double hi);
  int64_t Int(int64_t lo, int64_t hi);  // [lo, hi)
  Tensor Floats(const Shape& s, double lo = -2, double hi = 2, DType dt = DType::kFloat32);
  // Whole numbers in [lo, hi) of any dtype (float ones give ties for compare and max ops).
  Tensor Ints(const Shape& s, int64_t lo, int64_t hi, DType dt = DType::kInt64);
  Tensor Bools(const Shape& s) { return Ints(s, 0, 2, DType::kBool); }

 private:
  std::mt19937_64 gen_;
};

struct Sample {
  std::string op;
  std::string what;  // tells samples of one op apart in messages
  std::vector<Tensor> in;
  Attrs attrs;
  std::string at;  // where it is made ("tests/op_samples.cc:70"), for tools/op_facets
};

// Every registered op at least once; creation ops have no inputs and the attr device "cpu".
// Inputs are shared between callers of Samples(): copy those an op updates in place.
std::vector<Sample> MakeSamples();
const std::vector<Sample>& Samples();  // MakeSamples(), built once

}  // namespace testing
}  // namespace oneflow
