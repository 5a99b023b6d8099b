// Every op sample as a global call on a cuda placement, on the stand-in CUDA device
// (ONEFLOW_FAKE_CUDA=1, set by the target; core/device.h): no GPU needed.
//
// For each sample call of tests/op_samples.cc the inputs become broadcast global tensors on
// placement cuda:[0] of a one-rank world (0-dim inputs stay local CPU scalars, as Python numbers
// arrive, and join the call as broadcast), and the op runs through the global interpreter. Then
// every tensor the global layer made must sit on the placement's device: each output's local on
// cuda:0, and after backward of sum_k sum(out_k) (seeded by the global layer's full_like hook)
// each input's gradient's local too. A composite, rule rewrite or hook that makes a CPU tensor
// for a cuda input fails here by name (GlobalFullLike's CPU seed before the fix failed 156
// checks: "op 'exp', sample [5, 7] f32: backward threw: mul: expected all tensors on one device,
// ..."; neg's gradient "has its local on cpu"). Values are compared with the same call on local
// CPU tensors.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/dispatch.h"
#include "core/functional.h"
#include "core/op_registry.h"
#include "oneflow/global/global_tensor.h"
#include "tests/op_samples.h"
#include "tests/test_util.h"

namespace oneflow {
namespace {

using testing::Sample;

const Device kCuda = Device::CUDA(0);

// Empty when `got` (global, on the cuda placement) holds `want`'s values on cuda:0.
std::string Problem(const Tensor& got, const Tensor& want) {
  if (!got.is_global()) return "is a local tensor, expected a global one";
  const Tensor& local = global::Meta(got).local;
  if (local.device() != kCuda) return StrCat("has its local on ", local.device().ToString());
  if (local.shape() != want.shape() || local.dtype() != want.dtype()) {
    return StrCat("is ", local.shape(), " ", DTypeName(local.dtype()), ", expected ", want.shape(),
                  " ", DTypeName(want.dtype()));
  }
  const std::vector<double> g = testing::ToVector(fn::to_device(local, Device::CPU()));
  const std::vector<double> w = testing::ToVector(want);
  for (size_t i = 0; i < w.size(); ++i) {
    if (g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i]))) continue;
    if (std::abs(g[i] - w[i]) <= 1e-5 * std::max(1.0, std::abs(w[i]))) continue;
    return StrCat("differs at element ", i, ": ", g[i], ", expected ", w[i]);
  }
  return "";
}

bool Differentiable(const OpDef& op) {
  return op.differentiable && op.grad != nullptr && op.grad != &NoDoubleBackward;
}

// The sample's inputs as this test hands them to the op: broadcast on cuda:[0], 0-dim ones as
// local CPU scalars; floating ones of a differentiable op are leaves that require grad.
std::vector<Tensor> Inputs(const Sample& s, const OpDef& op, bool global, bool grad) {
  static const sbp::Placement kPlacement(DeviceType::kCUDA, {0});
  std::vector<Tensor> in;
  for (size_t i = 0; i < s.in.size(); ++i) {
    Tensor x = fn::contiguous_copy(s.in[i]);
    const bool nondiff =
        std::count(op.nondiff_inputs.begin(), op.nondiff_inputs.end(), static_cast<int>(i)) > 0;
    if (grad && IsFloating(x.dtype()) && !nondiff) x.set_requires_grad(true);
    if (global && x.ndim() > 0) {
      Tensor leaf = x;
      x = global::MakeGlobal(fn::to_device(x.detach(), kCuda), x.shape(), kPlacement,
                             {sbp::Sbp::Broadcast()});
      if (leaf.requires_grad()) x.set_requires_grad(true);
    }
    in.push_back(x);
  }
  return in;
}

Tensor SumOfOutputs(const std::vector<Tensor>& out) {
  Tensor loss;
  for (const Tensor& o : out) {
    if (!IsFloating(o.dtype())) continue;
    Tensor term = fn::sum(o);
    loss = loss.defined() ? fn::add(loss, term) : term;
  }
  return loss;
}

TEST_CASE("global ops on a cuda placement keep every tensor on its device") {
  REQUIRE(FakeCuda());
  int64_t calls = 0, outputs = 0, grads = 0;
  for (const Sample& s : testing::Samples()) {
    const OpDef& op = OpRegistry::Global().Get(s.op);
    const bool any_tensor =
        std::any_of(s.in.begin(), s.in.end(), [](const Tensor& t) { return t.ndim() > 0; });
    if (!any_tensor) continue;  // creation ops: no input to be global
    const std::string where = StrCat("op '", s.op, "', sample ", s.what);
    INFO(where);
    std::vector<Tensor> want;
    try {
      want = CallOp(op, Inputs(s, op, false, false), s.attrs);
    } catch (const std::exception& e) {
      FAIL_CHECK(where << ": fails on local cpu tensors: " << e.what());
      continue;
    }
    std::vector<Tensor> got;
    try {
      got = CallOp(op, Inputs(s, op, true, false), s.attrs);
    } catch (const std::exception& e) {
      FAIL_CHECK(where << ": threw: " << e.what());
      continue;
    }
    ++calls;
    REQUIRE(got.size() == want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      const std::string p = Problem(got[k], want[k]);
      INFO("output " << k << " " << p);
      CHECK(p.empty());
      ++outputs;
    }
    if (!Differentiable(op)) continue;
    std::vector<Tensor> cpu_in = Inputs(s, op, false, true), cuda_in = Inputs(s, op, true, true);
    Tensor cpu_loss = SumOfOutputs(CallOp(op, cpu_in, s.attrs));
    if (!cpu_loss.defined() || !cpu_loss.requires_grad()) continue;
    try {
      cpu_loss.backward();
      SumOfOutputs(CallOp(op, cuda_in, s.attrs)).backward();
    } catch (const std::exception& e) {
      FAIL_CHECK(where << ": backward threw: " << e.what());
      continue;
    }
    for (size_t i = 0; i < cuda_in.size(); ++i) {
      if (!cuda_in[i].requires_grad() || !cuda_in[i].is_global()) continue;
      const Tensor g = cuda_in[i].grad(), w = cpu_in[i].grad();
      INFO("gradient of input " << i);
      REQUIRE(g.defined() == w.defined());
      if (!g.defined()) continue;
      const std::string p = Problem(g, w);
      INFO(p);
      CHECK(p.empty());
      ++grads;
    }
  }
  std::printf("fake_cuda_global_test: %lld global calls, %lld outputs, %lld input gradients\n",
              static_cast<long long>(calls), static_cast<long long>(outputs),
              static_cast<long long>(grads));
  CHECK(calls > 200);
}

}  // namespace
}  // namespace oneflow
