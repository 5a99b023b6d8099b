// The multi-tensor SGD and Adam kernels (core/kernels/cuda/kernels/optim.cuh) on the host
// stand-in against a naive reference of core/optim.cc's update rules: many tensors of the
// lengths that reach every branch (1, 3, 4, 31, 32, 33, 127, 768, 1024, 1025, 4097, a chunk
// and a chunk + 1), lists that overflow their tensor and block limits, float32, float64, float16
// and bfloat16 parameters (the half types computed in float).
#include "core/kernels/cuda/kernels/optim.cuh"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tests/cuda_host/standin_test_util.h"

namespace oneflow {
namespace cuda {
namespace {

using cuda_host::FromDouble;
using cuda_host::ToDouble;

// |got - want| within the type's tolerance relative to max(1, |want|).
template <typename T>
double Tol() {
  if constexpr (std::is_same_v<T, double>) return 1e-12;
  if constexpr (std::is_same_v<T, float>) return 2e-6;
  return 1e-2;  // one rounding of a half type, on values near 1
}

// Parameters of the lengths every branch needs, with grad and state.
template <typename T>
struct Params {
  std::vector<std::vector<T>> p, g, m, v, vmax;
  std::vector<double> step;
};

template <typename T>
Params<T> MakeParams(const std::vector<int64_t>& lengths, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1, 1), pos(0, 1);
  Params<T> r;
  for (int64_t n : lengths) {
    auto fill = [&](bool positive) {
      std::vector<T> x(n);
      for (T& e : x) e = FromDouble<T>(positive ? pos(gen) : u(gen));
      return x;
    };
    r.p.push_back(fill(false));
    r.g.push_back(fill(false));
    r.m.push_back(fill(false));
    r.v.push_back(fill(true));
    r.vmax.push_back(fill(true));
    r.step.push_back(static_cast<double>(r.step.size() % 3));  // counts before this step
  }
  return r;
}

const std::vector<int64_t> kLengths = {
    1, 3, 4, 31, 32, 33, 127, 768, 1024, 1025, 4097, kOptimChunk, kOptimChunk + 1};

struct AdamCase {
  bool amsgrad, decoupled, correct;
  double sign;
};

// Runs the kernel over every tensor of `a` through ForEachOptimLaunch.
template <typename T, bool kAmsgrad>
void RunAdam(Params<T>* a, const AdamCase& c, const double* hyper) {
  constexpr int kState = kAmsgrad ? 3 : 2;
  using List = OptimList<T, kState>;
  // Steps are incremented first, as optim.cu does.
  std::vector<double*> steps;
  for (double& s : a->step) steps.push_back(&s);
  for (size_t first = 0; first < steps.size(); first += kOptimMaxSteps) {
    StepList sl{};
    for (size_t k = first; k < steps.size() && sl.count < kOptimMaxSteps; ++k) {
      sl.step[sl.count++] = steps[k];
    }
    OF_CUDA_LAUNCH(IncrementStepsKernel, 1, kOptimMaxSteps, 0, nullptr, sl);
  }
  AdamHyper h{&hyper[0], &hyper[1], &hyper[2],   &hyper[3],
              &hyper[4], c.sign,    c.decoupled, c.correct};
  int launches = 0;
  ForEachOptimLaunch<List>(
      static_cast<int64_t>(a->p.size()), [&](int64_t k) { return int64_t(a->p[k].size()); },
      [&](List* l, int s, int64_t k) {
        l->p[s] = a->p[k].data();
        l->g[s] = a->g[k].data();
        l->state[0][s] = a->m[k].data();
        l->state[1][s] = a->v[k].data();
        if constexpr (kAmsgrad) l->state[2][s] = a->vmax[k].data();
        l->step[s] = &a->step[k];
        l->n[s] = static_cast<int64_t>(a->p[k].size());
      },
      [&](const List& l, int blocks) {
        auto* kernel = AdamMultiKernel<T, kAmsgrad>;
        OF_CUDA_LAUNCH(kernel, blocks, kOptimThreads, 0, nullptr, l, h);
        ++launches;
      });
  REQUIRE(launches >= 1);
}

// core/optim.cc's Adam, element by element in the compute type.
template <typename T>
void ReferenceAdam(Params<T>* a, const AdamCase& c, const double* hyper) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const double lr = hyper[0], db1 = hyper[1], db2 = hyper[2], wd = hyper[4];
  for (size_t k = 0; k < a->p.size(); ++k) {
    const double step = a->step[k] += 1;
    const A b1 = A(db1), b2 = A(db2), c1 = A(1 - db1), c2 = A(1 - db2);
    const A bc1 = A(c.correct ? 1 - std::pow(db1, step) : 1.0);
    const A sq_bc2 = A(std::sqrt(c.correct ? 1 - std::pow(db2, step) : 1.0));
    const A eps = A(hyper[3]), tlr = A(lr), sign = A(c.sign);
    const A l2 = c.decoupled ? A(0) : A(wd), dwd = c.decoupled ? A(lr * wd) : A(0);
    for (size_t i = 0; i < a->p[k].size(); ++i) {
      const A pi = ToDouble(a->p[k][i]);
      const A d = sign * A(ToDouble(a->g[k][i])) + l2 * pi;
      const A mi = b1 * A(ToDouble(a->m[k][i])) + c1 * d;
      const A vi = b2 * A(ToDouble(a->v[k][i])) + c2 * d * d;
      a->m[k][i] = FromDouble<T>(mi);
      a->v[k][i] = FromDouble<T>(vi);
      A vv = vi;
      if (c.amsgrad) {
        vv = std::max(A(ToDouble(a->vmax[k][i])), vi);
        a->vmax[k][i] = FromDouble<T>(vv);
      }
      a->p[k][i] =
          FromDouble<T>(pi - tlr * ((mi / bc1) / (std::sqrt(vv) / sq_bc2 + eps)) - dwd * pi);
    }
  }
}

template <typename T>
void CheckSame(const std::vector<std::vector<T>>& got, const std::vector<std::vector<T>>& want,
               const char* what) {
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    int64_t bad = -1;
    for (size_t i = 0; i < got[k].size() && bad < 0; ++i) {
      const double g = ToDouble(got[k][i]), w = ToDouble(want[k][i]);
      if (!(std::abs(g - w) <= Tol<T>() * std::max(1.0, std::abs(w)))) bad = i;
    }
    INFO(what << " of tensor " << k << " (length " << got[k].size() << ") first differs at " << bad
              << (bad < 0 ? "" : ": got ") << (bad < 0 ? 0 : ToDouble(got[k][bad]))
              << (bad < 0 ? "" : ", want ") << (bad < 0 ? 0 : ToDouble(want[k][bad])));
    CHECK(bad < 0);
  }
}

template <typename T>
void CheckAdam(const AdamCase& c, const std::vector<int64_t>& lengths) {
  const double hyper[5] = {1e-2, 0.9, 0.999, 1e-8, 0.05};
  Params<T> got = MakeParams<T>(lengths, 7), want = got;
  if (c.amsgrad) {
    RunAdam<T, true>(&got, c, hyper);
  } else {
    RunAdam<T, false>(&got, c, hyper);
  }
  ReferenceAdam(&want, c, hyper);
  CHECK(got.step == want.step);
  CheckSame(got.p, want.p, "param");
  CheckSame(got.m, want.m, "exp_avg");
  CheckSame(got.v, want.v, "exp_avg_sq");
  if (c.amsgrad) CheckSame(got.vmax, want.vmax, "max_exp_avg_sq");
}

TEST_CASE("AdamMultiKernel matches the reference on every length", "[optim][adam]") {
  for (const AdamCase& c : {AdamCase{false, true, true, 1}, AdamCase{true, false, true, -1},
                            AdamCase{false, false, false, 1}}) {
    INFO("amsgrad " << c.amsgrad << " decoupled " << c.decoupled << " correct " << c.correct);
    CheckAdam<float>(c, kLengths);
    CheckAdam<double>(c, kLengths);
    CheckAdam<__half>(c, kLengths);
    CheckAdam<__nv_bfloat16>(c, kLengths);
  }
}

TEST_CASE("AdamMultiKernel lists overflow their tensor and block limits", "[optim][adam]") {
  // More tensors than a list holds, then one tensor of more chunks than a launch's blocks.
  std::vector<int64_t> lengths(kOptimMaxTensors + 5, 33);
  lengths.push_back(kOptimChunk * kOptimMaxBlocks + 7);
  lengths.push_back(5);
  CheckAdam<float>(AdamCase{false, true, true, 1}, lengths);
}

// core/optim.cc's SGD.
template <typename T>
void ReferenceSgd(Params<T>* a, bool momentum, bool nesterov, const double* hyper, double sign) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const A lr = A(hyper[0] * sign), wd = A(hyper[1]);
  const A beta = A(hyper[2]), keep = A(1 - hyper[3]);
  for (size_t k = 0; k < a->p.size(); ++k) {
    for (size_t i = 0; i < a->p[k].size(); ++i) {
      const A pi = ToDouble(a->p[k][i]);
      const A d = A(ToDouble(a->g[k][i])) + wd * pi;
      if (!momentum) {
        a->p[k][i] = FromDouble<T>(pi - lr * d);
        continue;
      }
      const A b = beta * A(ToDouble(a->m[k][i])) + keep * d;
      a->m[k][i] = FromDouble<T>(b);
      a->p[k][i] = FromDouble<T>(pi - lr * (nesterov ? d + beta * b : b));
    }
  }
}

template <typename T>
void CheckSgd(bool momentum, bool nesterov, double sign) {
  const double hyper[4] = {0.1, 0.01, 0.9, 0.1};
  Params<T> got = MakeParams<T>(kLengths, 11), want = got;
  SgdHyper h{&hyper[0], &hyper[1], momentum ? &hyper[2] : nullptr, momentum ? &hyper[3] : nullptr,
             sign,      nesterov};
  using List = OptimList<T, 1>;
  ForEachOptimLaunch<List>(
      static_cast<int64_t>(got.p.size()), [&](int64_t k) { return int64_t(got.p[k].size()); },
      [&](List* l, int s, int64_t k) {
        l->p[s] = got.p[k].data();
        l->g[s] = got.g[k].data();
        l->state[0][s] = momentum ? got.m[k].data() : nullptr;
        l->step[s] = nullptr;
        l->n[s] = static_cast<int64_t>(got.p[k].size());
      },
      [&](const List& l, int blocks) {
        if (momentum) {
          auto* kernel = SgdMultiKernel<T, true>;
          OF_CUDA_LAUNCH(kernel, blocks, kOptimThreads, 0, nullptr, l, h);
        } else {
          auto* kernel = SgdMultiKernel<T, false>;
          OF_CUDA_LAUNCH(kernel, blocks, kOptimThreads, 0, nullptr, l, h);
        }
      });
  ReferenceSgd(&want, momentum, nesterov, hyper, sign);
  CheckSame(got.p, want.p, "param");
  if (momentum) CheckSame(got.m, want.m, "momentum_buffer");
}

TEST_CASE("SgdMultiKernel matches the reference on every length", "[optim][sgd]") {
  for (auto [momentum, nesterov, sign] :
       {std::tuple{false, false, 1.0}, std::tuple{true, false, -1.0},
        std::tuple{true, true, 1.0}}) {
    INFO("momentum " << momentum << " nesterov " << nesterov << " sign " << sign);
    CheckSgd<float>(momentum, nesterov, sign);
    CheckSgd<double>(momentum, nesterov, sign);
    CheckSgd<__half>(momentum, nesterov, sign);
    CheckSgd<__nv_bfloat16>(momentum, nesterov, sign);
  }
}

}  // namespace
}  // namespace cuda
}  // namespace oneflow
