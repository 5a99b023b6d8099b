// Every CUDA kernel against the CPU kernel on the same inputs, forward and gradient.
//
// For each sample call of tests/op_samples.cc the op's local kernel runs on the CPU inputs and
// on the same inputs moved to cuda:0 (creation ops: attr device "cuda:0"). The outputs, and the
// inputs after the call (sgd_update and adam_update write into theirs; no other op may), must
// agree: same number, shape and dtype, CUDA outputs on cuda:0, integers and bools exactly, floats
// within a tolerance of their dtype (Tolerance below), NaN where the CPU has NaN. Random ops
// draw on the host generator from their seed and offset on both devices, so they must match
// exactly. Each sample whose op updates no input also runs on cuda with its inputs as
// non-contiguous views of the same values: CUDA kernels take any strides, as the CPU ones do.
//
// Gradients: for each sample of a differentiable op (not one that is itself another op's
// gradient), its floating inputs become leaves that require grad on each device; the graph
// sum_k sum(out_k * w_k), with a fixed random w_k per floating output, is differentiated and
// the leaves' gradients compared. The gradient formulas are the same op calls on both devices,
// so this checks the CUDA kernels of the ops the formulas use, on the values they really see.
//
// TF32 is switched off for the test (matmul's is off by default, cuDNN's on): it rounds float32
// operands to 10 mantissa bits, far outside the float32 tolerance.
//
// Under the stand-in CUDA device (ONEFLOW_FAKE_CUDA=1: the target cuda_kernels_fake_test) the
// same suite runs without a GPU: the CPU kernels on "cuda" tensors, which checks that every op,
// its gradient formula and the composites inside them leave their tensors on cuda:0 (a tensor
// made on the CPU for a cuda input fails the device check), not the CUDA kernels.
//
// Without a GPU the suite passes, printing "cuda_kernels_test: SKIPPED: <why>": a build without
// CUDA or a machine without a device cannot run it, which is not a failure of the kernels. With
// ONEFLOW_REQUIRE_CUDA=1 (set it on a GPU machine; .bazelrc passes it to the test) it fails
// instead, with the same reason (the driver's and runtime's versions included), so a broken
// driver cannot pass as a skip.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "core/dispatch.h"
#include "core/functional.h"
#include "core/op_registry.h"
#include "core/ops/op_util.h"
#include "tests/op_samples.h"
#include "tests/test_util.h"

#ifdef ONEFLOW_WITH_CUDA
#include "core/kernels/cuda/cuda_util.h"
#endif

namespace oneflow {
namespace {

using testing::Sample;
using testing::Samples;

// Empty when the suite can run here, else why not.
std::string WhyNoCuda() {
  if (FakeCuda()) return "";
#ifdef ONEFLOW_WITH_CUDA
  if (cuda::DeviceCount() > 0) return "";
  const std::string why = cuda::Unavailable();
  return why.empty() ? "no CUDA device" : why;
#else
  return "built without CUDA";
#endif
}

// Turns TF32 off for its lifetime and restores the previous switches.
class NoTf32 {
 public:
#ifdef ONEFLOW_WITH_CUDA
  NoTf32() : matmul_(cuda::AllowTf32()), cudnn_(cuda::AllowCudnnTf32()) {
    cuda::SetAllowTf32(false);
    cuda::SetAllowCudnnTf32(false);
  }
  ~NoTf32() {
    cuda::SetAllowTf32(matmul_);
    cuda::SetAllowCudnnTf32(cudnn_);
  }

 private:
  bool matmul_, cudnn_;
#endif
};

void Synchronize() {
#ifdef ONEFLOW_WITH_CUDA
  // Kernel faults surface at the next synchronisation: make it this call's, not a later one's.
  if (!FakeCuda()) cuda::Synchronize(0);
#endif
}

const Device kCuda = Device::CUDA(0);

// ---------------------------------------------------------------- comparing

// |cuda - cpu| <= atol * scale + rtol * |cpu|, where scale is the largest finite |cpu| of the
// tensor (at least 1): reductions, cuBLAS and cuDNN add in other orders, and the rounding error
// of a sum follows the size of its terms, not of a result that cancels towards zero.
struct Tolerance {
  double rtol = 0, atol = 0;
};

Tolerance ToleranceFor(DType dtype, bool exact) {
  if (exact) return {};
  switch (dtype) {
    case DType::kFloat64:
      return {1e-10, 1e-12};
    case DType::kFloat32:
      return {1e-4, 1e-5};
    case DType::kFloat16:
    case DType::kBFloat16:
      return {1e-2, 1e-3};
    default:  // integers and bool
      return {};
  }
}

// Compares a CUDA result with the CPU one; empty when they agree, else what differs (with the
// max abs error and the first element out of tolerance).
std::string Compare(const Tensor& cuda_result, const Tensor& cpu, bool exact) {
  if (cuda_result.device() != kCuda) {
    return StrCat("is on ", cuda_result.device().ToString(), ", expected ", kCuda.ToString());
  }
  if (cuda_result.shape() != cpu.shape() || cuda_result.dtype() != cpu.dtype()) {
    return StrCat("is ", cuda_result.shape(), " ", DTypeName(cuda_result.dtype()), " on cuda, ",
                  cpu.shape(), " ", DTypeName(cpu.dtype()), " on cpu");
  }
  const std::vector<double> g = testing::ToVector(fn::to_device(cuda_result, Device::CPU()));
  const std::vector<double> w = testing::ToVector(cpu);
  const Tolerance tol = ToleranceFor(cpu.dtype(), exact);
  double scale = 1;
  for (double v : w) {
    if (std::isfinite(v)) scale = std::max(scale, std::abs(v));
  }
  double max_err = 0;
  int64_t bad = -1;
  for (size_t i = 0; i < w.size(); ++i) {
    if (g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i]))) continue;
    const double err = std::abs(g[i] - w[i]);  // NaN or inf when only one side is
    if (!(err <= max_err)) max_err = err;
    if (!(err <= tol.atol * scale + tol.rtol * std::abs(w[i])) && bad < 0) {
      bad = static_cast<int64_t>(i);
    }
  }
  if (bad < 0) return "";
  return StrCat("differs: max abs error ", max_err, " (", DTypeName(cpu.dtype()), " tolerance ",
                exact ? "exact" : StrCat(tol.atol, " * ", scale, " + ", tol.rtol, " |cpu|"),
                "), first at element ", bad, ": cuda ", g[bad], ", cpu ", w[bad]);
}

// ---------------------------------------------------------------- running a sample

Attrs OnCuda(Attrs a) {
  if (a.Has("device")) a.Set("device", kCuda.ToString());
  return a;
}

std::vector<Tensor> ToCuda(const std::vector<Tensor>& xs) {
  std::vector<Tensor> out;
  for (const Tensor& x : xs) out.push_back(fn::to_device(x, kCuda));
  return out;
}

// The same values as a view with other strides (a transposed copy transposed back).
Tensor NonContiguous(const Tensor& x) {
  if (x.ndim() < 2) return x;
  const int64_t last = x.ndim() - 1;
  return fn::transpose(fn::contiguous_copy(fn::transpose(x, 0, last)), 0, last);
}

bool AnyNonContiguous(const std::vector<Tensor>& xs) {
  return std::any_of(xs.begin(), xs.end(), [](const Tensor& x) { return !x.is_contiguous(); });
}

std::string Where(const Sample& s) { return StrCat("op '", s.op, "', sample ", s.what); }

struct Counts {
  std::set<std::string> ops;
  int64_t samples = 0, outputs = 0, strided = 0, grads = 0, grad_samples = 0;
};

// Checks `got` (CUDA) against `want` (CPU) one by one, as `what` i.
void CheckAll(const std::string& where, const char* what, const std::vector<Tensor>& got,
              const std::vector<Tensor>& want, bool exact, int64_t* count) {
  INFO(where);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const std::string problem = Compare(got[i], want[i], exact);
    INFO(what << " " << i << " " << problem);
    CHECK(problem.empty());
    ++*count;
  }
}

void CheckForward(const Sample& sample, const OpDef& op, Counts* counts) {
  const std::string where = Where(sample);
  // Random ops draw the same numbers on both devices: exact; but not float64 normal (the
  // platforms' log and cos may differ in the last bit) nor ops that compute with their draws
  // (attention's dropout mask is exact, its arithmetic is not).
  const bool exact = sample.attrs.Has("seed") && !sample.attrs.Has("dropout_p") &&
                     !(op.name == "normal" && sample.attrs.Has("dtype") &&
                       sample.attrs.Get<DType>("dtype") == DType::kFloat64);
  std::vector<Tensor> cpu_in, cpu_out;
  for (const Tensor& t : sample.in) cpu_in.push_back(fn::contiguous_copy(t));
  try {
    cpu_out = RunLocalKernel(op, cpu_in, sample.attrs);
  } catch (const std::exception& e) {
    FAIL_CHECK(where << ": the sample fails on cpu: " << e.what());
    return;
  }
  bool updates_inputs = false;
  for (size_t i = 0; i < sample.in.size(); ++i) {
    updates_inputs |= testing::ToVector(cpu_in[i]) != testing::ToVector(sample.in[i]);
  }

  std::vector<Tensor> cuda_in, cuda_out;
  try {
    cuda_in = ToCuda(sample.in);
    cuda_out = RunLocalKernel(op, cuda_in, OnCuda(sample.attrs));
    Synchronize();
  } catch (const std::exception& e) {
    FAIL_CHECK(where << ": cuda threw: " << e.what());
    return;
  }
  CheckAll(where, "output", cuda_out, cpu_out, exact, &counts->outputs);
  CheckAll(where, "input after the call", cuda_in, cpu_in, exact, &counts->outputs);

  if (updates_inputs) return;  // the optimizer updates take their parameters contiguous
  std::vector<Tensor> strided_in;
  for (const Tensor& t : cuda_in) strided_in.push_back(NonContiguous(t));
  if (!AnyNonContiguous(strided_in)) return;
  try {
    cuda_out = RunLocalKernel(op, strided_in, OnCuda(sample.attrs));
    Synchronize();
  } catch (const std::exception& e) {
    FAIL_CHECK(where << " with non-contiguous inputs: cuda threw: " << e.what());
    return;
  }
  CheckAll(where + " with non-contiguous inputs", "output", cuda_out, cpu_out, exact,
           &counts->strided);
}

// Whether the gradient check applies, and to which inputs.
std::vector<bool> GradInputs(const Sample& sample, const OpDef& op) {
  std::vector<bool> leaf(sample.in.size(), false);
  // A gradient op's own gradient throws by design; it is checked as the forward of the
  // op whose gradient it is.
  if (!op.differentiable || op.grad == nullptr || op.grad == &NoDoubleBackward) return leaf;
  for (size_t i = 0; i < sample.in.size(); ++i) {
    const bool nondiff =
        std::count(op.nondiff_inputs.begin(), op.nondiff_inputs.end(), static_cast<int>(i)) > 0;
    leaf[i] = IsFloating(sample.in[i].dtype()) && !nondiff;
  }
  return leaf;
}

struct GradRun {
  std::vector<Tensor> leaves;
  std::vector<Tensor> out;
};

GradRun Forward(const Sample& sample, const OpDef& op, const std::vector<bool>& leaf,
                const Device& device) {
  GradRun r;
  for (size_t i = 0; i < sample.in.size(); ++i) {
    Tensor x = device == Device::CPU() ? fn::contiguous_copy(sample.in[i])
                                       : fn::to_device(sample.in[i], device);
    if (leaf[i]) x.set_requires_grad(true);
    r.leaves.push_back(x);
  }
  r.out = CallOp(op, r.leaves, device == Device::CPU() ? sample.attrs : OnCuda(sample.attrs));
  return r;
}

// Backward of sum_k sum(out_k * w_k) over the floating outputs; the leaves' gradients.
std::vector<Tensor> Backward(const GradRun& r, const std::vector<Tensor>& weights,
                             const std::vector<bool>& leaf) {
  Tensor loss;
  for (size_t k = 0; k < r.out.size(); ++k) {
    if (!weights[k].defined()) continue;
    Tensor term = fn::sum(fn::mul(r.out[k], fn::to_device(weights[k], r.out[k].device())));
    loss = loss.defined() ? fn::add(loss, term) : term;
  }
  loss.backward();
  std::vector<Tensor> grads;
  for (size_t i = 0; i < leaf.size(); ++i) {
    if (leaf[i]) grads.push_back(r.leaves[i].grad());
  }
  return grads;
}

void CheckGradients(const Sample& sample, const OpDef& op, testing::Rng& rng, Counts* counts) {
  const std::vector<bool> leaf = GradInputs(sample, op);
  if (std::count(leaf.begin(), leaf.end(), true) == 0) return;
  const std::string where = Where(sample) + " gradient";
  GradRun cpu;
  std::vector<Tensor> weights, cpu_grads;
  try {
    cpu = Forward(sample, op, leaf, Device::CPU());
    bool any = false;
    for (const Tensor& o : cpu.out) {
      any |= IsFloating(o.dtype());
      weights.push_back(IsFloating(o.dtype()) ? rng.Floats(o.shape(), -1, 1, o.dtype()) : Tensor());
    }
    if (!any) return;  // nothing to differentiate (a cast to an integer dtype)
    cpu_grads = Backward(cpu, weights, leaf);
  } catch (const std::exception& e) {
    FAIL_CHECK(where << ": the sample's backward fails on cpu: " << e.what());
    return;
  }
  std::vector<Tensor> cuda_grads;
  try {
    cuda_grads = Backward(Forward(sample, op, leaf, kCuda), weights, leaf);
    Synchronize();
  } catch (const std::exception& e) {
    FAIL_CHECK(where << ": cuda threw: " << e.what());
    return;
  }
  ++counts->grad_samples;
  INFO(where);
  REQUIRE(cuda_grads.size() == cpu_grads.size());
  size_t k = 0;
  for (size_t i = 0; i < leaf.size(); ++i) {
    if (!leaf[i]) continue;
    const Tensor& g = cuda_grads[k];
    const Tensor& want = cpu_grads[k];
    ++k;
    INFO("gradient of input " << i);
    CHECK(g.defined() == want.defined());
    if (!g.defined() || !want.defined()) continue;
    const std::string problem = Compare(g, want, /*exact=*/false);
    INFO(problem);
    CHECK(problem.empty());
    ++counts->grads;
  }
}

// ---------------------------------------------------------------- the suite

// ONEFLOW_REQUIRE_CUDA set to anything but "" or "0".
bool CudaRequired() {
  const char* v = std::getenv("ONEFLOW_REQUIRE_CUDA");
  return v && *v && std::string(v) != "0";
}

TEST_CASE("every CUDA kernel matches the CPU kernel, forward and gradient") {
  const std::string why = WhyNoCuda();
  if (!why.empty()) {
    if (CudaRequired()) {
      std::printf("cuda_kernels_test: FAILED: ONEFLOW_REQUIRE_CUDA=1 but CUDA is not usable: %s\n",
                  why.c_str());
      FAIL("cuda_kernels_test: ONEFLOW_REQUIRE_CUDA=1 but CUDA is not usable: " << why);
    }
    std::printf("cuda_kernels_test: SKIPPED: %s\n", why.c_str());
    WARN("cuda_kernels_test: SKIPPED: " << why);
    return;
  }
  [[maybe_unused]] NoTf32 no_tf32;

  SECTION("every registered op has a CUDA kernel and a sample") {
    std::set<std::string> sampled;
    for (const Sample& s : Samples()) sampled.insert(s.op);
    for (const auto& [name, def] : OpRegistry::Global().ops()) {
      {
        INFO("op '" << name << "' has no CUDA kernel (ONEFLOW_REGISTER_KERNEL(" << name
                    << ", kCUDA, ...))");
        CHECK(def.kernels[static_cast<int>(DeviceType::kCUDA)] != nullptr);
      }
      INFO("op '" << name << "' has no sample in tests/op_samples.cc");
      CHECK(sampled.count(name) == 1);
    }
  }

  SECTION("outputs and gradients on cuda equal the cpu's") {
    testing::Rng rng(20240612);
    Counts counts;
    for (const Sample& sample : Samples()) {
      const OpDef* op = nullptr;
      try {
        op = &OpRegistry::Global().Get(sample.op);
      } catch (const std::exception& e) {
        FAIL_CHECK(Where(sample) << ": " << e.what());
        continue;
      }
      if (op->kernels[static_cast<int>(DeviceType::kCUDA)] == nullptr) continue;  // named above
      counts.ops.insert(sample.op);
      ++counts.samples;
      CheckForward(sample, *op, &counts);
      CheckGradients(sample, *op, rng, &counts);
    }
    std::printf(
        "cuda_kernels_test: %zu ops, %lld samples, %lld comparisons: %lld outputs and inputs "
        "after the call, %lld outputs from non-contiguous inputs, %lld input gradients (of %lld "
        "samples)\n",
        counts.ops.size(), static_cast<long long>(counts.samples),
        static_cast<long long>(counts.outputs + counts.strided + counts.grads),
        static_cast<long long>(counts.outputs), static_cast<long long>(counts.strided),
        static_cast<long long>(counts.grads), static_cast<long long>(counts.grad_samples));
  }
}

}  // namespace
}  // namespace oneflow
