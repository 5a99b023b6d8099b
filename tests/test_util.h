// Test helpers: tensors from/to std::vector, closeness checks and finite-difference gradient
// checks, shared by every Catch2 suite.
//
//   Tensor x = FromVector({1, 2, 3}, {3}, DType::kFloat64).set_requires_grad(true);
//   CheckGradients([](const std::vector<Tensor>& in) { return fn::exp(in[0]); }, {x});
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <vector>

#include "core/functional.h"

namespace oneflow {
namespace testing {

inline std::vector<double> ToVector(const Tensor& t) {
  Tensor c = fn::contiguous(fn::to_dtype(t.detach(), DType::kFloat64));
  const double* p = c.data<double>();
  return std::vector<double>(p, p + c.numel());
}

inline Tensor FromVector(const std::vector<double>& v, const Shape& shape,
                         DType dtype = DType::kFloat32) {
  // A check that throws rather than REQUIRE: tools/op_facets builds the samples outside a test.
  ONEFLOW_CHECK(static_cast<int64_t>(v.size()) == shape.numel(), "FromVector: ", v.size(),
                " values for shape ", shape);
  Tensor d = fn::from_blob_copy(v.data(), shape, DType::kFloat64);
  return dtype == DType::kFloat64 ? d : fn::to_dtype(d, dtype);
}

inline void CheckClose(const Tensor& got, const std::vector<double>& want, double tol = 1e-5) {
  std::vector<double> g = ToVector(got);
  REQUIRE(g.size() == want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i << ": got " << g[i] << ", want " << want[i]);
    REQUIRE(std::abs(g[i] - want[i]) <= tol * (1.0 + std::abs(want[i])));
  }
}

inline void CheckClose(const Tensor& got, const Tensor& want, double tol = 1e-5) {
  REQUIRE(got.shape() == want.shape());
  CheckClose(got, ToVector(want), tol);
}

// Checks d(sum(f(inputs) * r))/d(input) for a fixed random r against central differences, for
// every input that requires grad. Inputs should be float64 for a tight tolerance.
inline void CheckGradients(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                           const std::vector<Tensor>& inputs, double eps = 1e-6,
                           double tol = 1e-5) {
  Tensor out = f(inputs);
  Tensor r = fn::to_dtype(fn::rand(out.shape(), DType::kFloat64), out.dtype());
  for (Tensor x : inputs) {
    if (x.requires_grad()) x.set_grad(Tensor());
  }
  fn::sum(fn::mul(out, r)).backward();
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.requires_grad()) continue;
    REQUIRE(x.grad().defined());
    std::vector<double> analytic = ToVector(x.grad());
    Tensor xc = fn::contiguous(x);
    REQUIRE(xc.dtype() == DType::kFloat64);
    REQUIRE(xc.is_same(x));  // perturbs x in place
    double* p = xc.data<double>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      double saved = p[i];
      auto eval = [&](double v) {
        p[i] = v;
        NoGradGuard ng;
        return ToVector(fn::sum(fn::mul(f(inputs), r)))[0];
      };
      double numeric = (eval(saved + eps) - eval(saved - eps)) / (2 * eps);
      p[i] = saved;
      INFO("input " << k << " element " << i << ": analytic " << analytic[i] << ", numeric "
                    << numeric);
      REQUIRE(std::abs(analytic[i] - numeric) <= tol * (1.0 + std::abs(numeric)));
    }
  }
}

}  // namespace testing
}  // namespace oneflow
