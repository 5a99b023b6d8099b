// nn.Graph's plan (oneflow/graph/plan.h) without Python: what a trace records, what a replay
// computes on new inputs, fresh random numbers, in-place writes, and the host-read refusal.
#include "oneflow/graph/plan.h"

#include <cmath>
#include <functional>
#include <limits>

#include "core/functional.h"
#include "core/inplace.h"
#include "core/optim.h"
#include "oneflow/graph/passes.h"
#include "tests/test_util.h"

namespace oneflow {
namespace {

using graph::GraphPlan;
using graph::PlanPassesOff;
using testing::CheckClose;
using testing::FromVector;

std::vector<float> Values(const Tensor& t) {
  Tensor c = fn::contiguous_copy(t);
  return std::vector<float>(c.data<float>(), c.data<float>() + c.numel());
}

TEST_CASE("a replay computes the traced ops on new inputs with the captured weights") {
  Tensor w = FromVector({1, 2, 3, 4}, {2, 2});
  Tensor x = FromVector({1, 1}, {1, 2});
  GraphPlan plan("T");
  plan.BeginTrace({x});
  Tensor y = fn::relu(fn::matmul(x, w));
  plan.EndTrace({y});
  CHECK(plan.num_steps() == 2);
  CHECK(plan.StepName(0) == "matmul");
  Tensor x2 = FromVector({1, -1}, {1, 2});
  REQUIRE(plan.Matches({x2}));
  CHECK_FALSE(plan.Matches({FromVector({1, 1, 1}, {1, 3})}));
  CheckClose(plan.Replay({x2})[0], {0, 0});  // relu([1 - 3, 2 - 4])
  fn::fill_(w, 1.0);                         // captured by reference: the replay sees it
  CheckClose(plan.Replay({FromVector({2, 3}, {1, 2})})[0], {5, 5});
  CHECK(plan.Describe().find("%2 = matmul(%0, %1)") != std::string::npos);
}

TEST_CASE("random ops draw new numbers on every replay, as eager calls would") {
  fn::manual_seed(3);
  Tensor eager1 = fn::rand(Shape({4}));
  Tensor eager2 = fn::rand(Shape({4}));
  fn::manual_seed(3);
  Tensor x = fn::zeros(Shape({4}));
  GraphPlan plan("R");
  plan.BeginTrace({x});
  Tensor y = fn::add(x, fn::rand(Shape({4})));
  plan.EndTrace({y});
  CHECK(Values(y) == Values(eager1));
  CHECK(Values(plan.Replay({x})[0]) == Values(eager2));
}

TEST_CASE("in-place writes are replayed and intermediates are dropped") {
  Tensor x = FromVector({1, 2}, {2});
  GraphPlan plan("W");
  plan.BeginTrace({x});
  Tensor y = fn::mul_scalar(x, 2);
  fn::fill_(fn::select(y, 0, 0), 7.0);
  Tensor z = fn::add_scalar(fn::exp(fn::mul_scalar(y, 0.0)), 1.0);
  plan.EndTrace({y, z});
  std::vector<Tensor> out = plan.Replay({FromVector({5, 6}, {2})});
  CheckClose(out[0], {7, 12});
  CheckClose(out[1], {2, 2});
  CHECK(plan.peak_live() < plan.num_steps());
}

TEST_CASE("host code reading a traced tensor fails while tracing, naming the op") {
  Tensor x = FromVector({1, -2}, {2});
  GraphPlan plan("H");
  plan.BeginTrace({x});
  Tensor y = fn::relu(x);
  CHECK_THROWS_WITH(y.data<float>(), Catch::Contains("nn.Graph H: module '<graph>' reads the "
                                                     "data of op 'relu' (step 0) on the host"));
  plan.AbortTrace();
  CHECK(y.data<float>()[0] == 1);  // no trace: an ordinary read
}

// ---------------------------------------------------------------- passes (oneflow/graph/passes.h)

// The fused GEMM may sum in another order than sgemm: float rounding, relative to the size of
// the terms (these layers' sums cancel down to 1e-2 from terms near 10).
constexpr double kRounding = 1e-4;

// Traces fn(inputs) into a plan with the passes (fused; update_fusion: the model-update fusion
// too, nn.Graph's allow_fuse_model_update_ops) or without them (plain).
std::unique_ptr<GraphPlan> Trace(const std::vector<Tensor>& inputs,
                                 const std::function<std::vector<Tensor>()>& fn, bool fused,
                                 bool update_fusion = true) {
  auto plan = std::make_unique<GraphPlan>(fused ? "Fused" : "Plain");
  plan->SetFuseModelUpdates(update_fusion);
  std::unique_ptr<PlanPassesOff> off(fused ? nullptr : new PlanPassesOff);
  plan->BeginTrace(inputs);
  std::vector<Tensor> out = fn();
  plan->EndTrace(out);
  return plan;
}

void CheckSame(const std::vector<Tensor>& got, const std::vector<Tensor>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("output " << i);
    CheckClose(got[i], want[i], tol);
  }
}

TEST_CASE("linear -> relu replays as one fused step, as the unfused plan and eager compute") {
  fn::manual_seed(5);
  Tensor w = fn::randn(Shape({48, 40})), b = fn::randn(Shape({48}));
  Tensor x = fn::randn(Shape({12, 40}));
  auto build = [&](const Tensor& in) {
    Tensor h = fn::relu(fn::linear(in, w, b));
    return std::vector<Tensor>{fn::relu(fn::linear(h, fn::transpose(w, 0, 1), Tensor()))};
  };
  auto fused = Trace(
      {x}, [&] { return build(x); }, true);
  auto plain = Trace(
      {x}, [&] { return build(x); }, false);
  const std::string text = fused->Describe();
  INFO(text);
  CHECK(text.find("linear+relu(%0, %1, %2)") != std::string::npos);
  CHECK(text.find("relu()  (fused into step 0)") != std::string::npos);
  // The second layer reads w transposed and has no bias: fused as well.
  CHECK(fused->StepName(3) == "linear+relu");
  CHECK(plain->Describe().find("linear+relu") == std::string::npos);
  CHECK(fused->num_steps() == plain->num_steps());  // indices stay (updates are set by index)
  for (int k = 0; k < 3; ++k) {
    Tensor x2 = fn::randn(Shape({12, 40}));
    CheckSame(fused->Replay({x2}), plain->Replay({x2}), kRounding);
    CheckSame(fused->Replay({x2}), build(x2), kRounding);
  }
  // A transposed view as the input (the GEMM reads it transposed).
  Tensor xt = fn::randn(Shape({40, 12}));
  auto fused_t = Trace(
      {xt}, [&] { return build(fn::transpose(xt, 0, 1)); }, true);
  CHECK(fused_t->Describe().find("linear+relu") != std::string::npos);
  Tensor xt2 = fn::randn(Shape({40, 12}));
  CheckSame(fused_t->Replay({xt2}), build(fn::transpose(xt2, 0, 1)), kRounding);
}

TEST_CASE("a fused training step (forward, backward, update) replays as the unfused one") {
  auto step = [](const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& w2) {
    Tensor h = fn::relu(fn::linear(x, w, b));
    Tensor loss = fn::sum(fn::mul(fn::linear(h, w2, Tensor()), fn::linear(h, w2, Tensor())));
    loss.backward();
    std::vector<Tensor> out = {loss, w.grad(), b.grad(), w2.grad()};
    for (Tensor p : {w, b, w2}) p.set_grad(Tensor());
    return out;
  };
  std::vector<std::unique_ptr<GraphPlan>> plans;
  std::vector<std::vector<Tensor>> params;
  Tensor x = fn::randn(Shape({16, 24}));
  for (bool fused : {true, false}) {
    fn::manual_seed(9);
    std::vector<Tensor> p = {fn::randn(Shape({32, 24})), fn::randn(Shape({32})),
                             fn::randn(Shape({8, 32}))};
    for (Tensor& t : p) t.set_requires_grad(true);
    plans.push_back(Trace(
        {x}, [&] { return step(x, p[0], p[1], p[2]); }, fused));
    params.push_back(p);
  }
  CHECK(plans[0]->Describe().find("linear+relu") != std::string::npos);
  for (int k = 0; k < 3; ++k) {
    Tensor x2 = fn::randn(Shape({16, 24}));
    CheckSame(plans[0]->Replay({x2}), plans[1]->Replay({x2}), kRounding);
  }
}

TEST_CASE("linear -> relu stays unfused where a precondition fails") {
  Tensor w = fn::randn(Shape({6, 5})), b = fn::randn(Shape({6}));
  Tensor x = fn::randn(Shape({4, 5}));
  SECTION("the linear's output has another reader") {
    auto plan = Trace(
        {x},
        [&] {
          Tensor y = fn::linear(x, w, b);
          return std::vector<Tensor>{fn::add(fn::relu(y), y)};
        },
        true);
    CHECK(plan->Describe().find("linear+relu") == std::string::npos);
    Tensor x2 = fn::randn(Shape({4, 5}));
    Tensor y2 = fn::linear(x2, w, b);
    CheckClose(plan->Replay({x2})[0], fn::add(fn::relu(y2), y2));
  }
  SECTION("the linear's output is a graph output") {
    Tensor xl = fn::randn(Shape({32, 40})), wl = fn::randn(Shape({48, 40}));
    Tensor bl = fn::randn(Shape({48}));
    auto plan = Trace(
        {xl},
        [&] {
          Tensor y = fn::linear(xl, wl, bl);
          return std::vector<Tensor>{y, fn::relu(y)};
        },
        true);
    const std::string text = plan->Describe();
    CHECK(text.find("linear+relu") == std::string::npos);
    // The linear alone still runs as the oneDNN primitive.
    CHECK(text.find("linear(%0, %1, %2)  (oneDNN matmul, the bias as its post-op)") !=
          std::string::npos);
    Tensor x2 = fn::randn(Shape({32, 40}));
    std::vector<Tensor> out = plan->Replay({x2});
    CheckClose(out[0], fn::linear(x2, wl, bl), kRounding);
    CheckClose(out[1], fn::relu(fn::linear(x2, wl, bl)), kRounding);
    // A tiny one (4x5 by 5x6) stays the op: the primitive's call costs more there.
    auto tiny = Trace(
        {x},
        [&] {
          Tensor y = fn::linear(x, w, b);
          return std::vector<Tensor>{y, fn::relu(y)};
        },
        true);
    CHECK(tiny->Describe().find("oneDNN") == std::string::npos);
  }
  SECTION("float64") {
    Tensor x64 = fn::to_dtype(x, DType::kFloat64);
    Tensor w64 = fn::to_dtype(w, DType::kFloat64), b64 = fn::to_dtype(b, DType::kFloat64);
    auto plan = Trace(
        {x64}, [&] { return std::vector<Tensor>{fn::relu(fn::linear(x64, w64, b64))}; }, true);
    CHECK(plan->Describe().find("linear+relu") == std::string::npos);
  }
  SECTION("relu_ writes the linear's output in place") {
    auto plan = Trace(
        {x},
        [&] {
          Tensor y = fn::linear(x, w, b);
          InPlace(
              y, [](const Tensor& t) { return fn::relu(t); }, "relu_");
          return std::vector<Tensor>{y};
        },
        true);
    CHECK(plan->Describe().find("linear+relu") == std::string::npos);
  }
}

TEST_CASE("the fused linear -> relu maps nan and infinities as relu does") {
  Tensor w = FromVector({1, 0, 0, 1, 1, 1}, {3, 2});
  Tensor x = FromVector({1, 2, 3, 4}, {2, 2});
  auto build = [&](const Tensor& in) {
    return std::vector<Tensor>{fn::relu(fn::linear(in, w, Tensor()))};
  };
  auto fused = Trace(
      {x}, [&] { return build(x); }, true);
  REQUIRE(fused->Describe().find("linear+relu") != std::string::npos);
  const double inf = std::numeric_limits<double>::infinity();
  Tensor x2 = FromVector({std::nan(""), -1, inf, -inf}, {2, 2});
  std::vector<double> got = testing::ToVector(fused->Replay({x2})[0]);
  std::vector<double> want = testing::ToVector(build(x2)[0]);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": fused " << got[i] << ", eager " << want[i]);
    CHECK((got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))));
  }
}

// An MLP training step with SGD momentum: forward, backward and the updates, traced.
struct MomentumModel {
  std::vector<Tensor> params, bufs;
  // The update's hyper-parameters, made before the trace so that the plan captures them.
  Tensor lr = optim::HyperLike(fn::zeros({1}), 1e-3), momentum = optim::HyperLike(lr, 0.9);
  Tensor dampening = optim::HyperLike(lr, 0.1), weight_decay = optim::HyperLike(lr, 0);
  std::unique_ptr<GraphPlan> plan;

  MomentumModel(const Tensor& x, const Tensor& target, bool fused, double decay = 0,
                bool update_fusion = true) {
    fn::fill_(weight_decay, decay);
    fn::manual_seed(11);
    for (const Shape& shape : {Shape({32, 24}), Shape({32}), Shape({8, 32})}) {
      params.push_back(fn::mul_scalar(fn::randn(shape), 0.2));
    }
    for (Tensor& p : params) {
      p.set_requires_grad(true);
      bufs.push_back(fn::mul_scalar(fn::randn(p.shape()), 0.1));
    }
    plan = Trace(
        {x, target}, [&] { return Step(x, target); }, fused, update_fusion);
  }
  std::vector<Tensor> Step(const Tensor& x, const Tensor& target) {
    Tensor h = fn::relu(fn::linear(x, params[0], params[1]));
    Tensor d = fn::sub(fn::linear(h, params[2], Tensor()), target);
    Tensor loss = fn::sum(fn::mul(d, d));
    loss.backward();
    NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) {
      optim::Update("sgd_update",
                    {params[i], params[i].grad(), bufs[i], lr, weight_decay, momentum, dampening},
                    Attrs().Set("momentum", true).Set("nesterov", false).Set("maximize", false));
      params[i].set_grad(Tensor());
    }
    return {loss};
  }
};

TEST_CASE("a gradient's matmul or batch sum accumulates into the SGD momentum buffer") {
  Tensor x = fn::randn(Shape({16, 24})), target = fn::randn(Shape({16, 8}));
  MomentumModel fused(x, target, true), plain(x, target, false);
  const std::string text = fused.plan->Describe();
  INFO(text);
  // Both weights' gradients are matmuls, the bias's a sum over the batch.
  auto count = [&](const std::string& what) {
    size_t at = 0, n = 0;
    while ((at = text.find(what, at)) != std::string::npos) ++n, ++at;
    return n;
  };
  CHECK(count("matmul+momentum(") == 2);
  CHECK(count("sum+momentum(") == 1);
  // The weight gradients' g.T: read transposed by the GEMM, no permute step of its own.
  CHECK(count("permute()  (fused into step ") == 2);
  // Nothing reads the parameters after their gradients: each update follows its GEMM.
  CHECK(count("(runs in step ") == 3);
  CHECK(plain.plan->Describe().find("+momentum") == std::string::npos);
  auto check_state = [&] {
    for (size_t i = 0; i < fused.params.size(); ++i) {
      INFO("parameter " << i);
      CheckClose(fused.params[i], plain.params[i], 1e-5);
      CheckClose(fused.bufs[i], plain.bufs[i], 1e-5);
    }
  };
  for (int k = 0; k < 3; ++k) {
    Tensor x2 = fn::randn(Shape({16, 24})), t2 = fn::randn(Shape({16, 8}));
    CheckClose(fused.plan->Replay({x2, t2})[0], plain.plan->Replay({x2, t2})[0], kRounding);
    check_state();
  }
  // A hyper-parameter that rules the fused form out (weight decay reads p) runs the steps as
  // traced.
  for (MomentumModel* m : {&fused, &plain}) fn::fill_(m->weight_decay, 0.05);
  for (int k = 0; k < 2; ++k) {
    Tensor x2 = fn::randn(Shape({16, 24})), t2 = fn::randn(Shape({16, 8}));
    fused.plan->Replay({x2, t2});
    plain.plan->Replay({x2, t2});
    check_state();
  }
}

TEST_CASE("the momentum fusion leaves a gradient that is read twice or decayed alone") {
  Tensor x = fn::randn(Shape({16, 24})), target = fn::randn(Shape({16, 8}));
  MomentumModel decayed(x, target, true, /*weight_decay=*/0.01);
  CHECK(decayed.plan->Describe().find("+momentum") == std::string::npos);
  // Without allow_fuse_model_update_ops the updates stay apart (the linear+relu still fuses).
  MomentumModel unfused(x, target, true, 0, /*update_fusion=*/false);
  CHECK(unfused.plan->Describe().find("+momentum") == std::string::npos);
  CHECK(unfused.plan->Describe().find("linear+relu(") != std::string::npos);
  fn::manual_seed(2);
  Tensor w = fn::randn(Shape({8, 24})).set_requires_grad(true);
  Tensor buf = fn::zeros(Shape({8, 24}));
  auto plan = Trace(
      {x, target},
      [&] {
        Tensor d = fn::sub(fn::linear(x, w, Tensor()), target);
        fn::sum(fn::mul(d, d)).backward();
        Tensor g = w.grad();
        NoGradGuard no_grad;
        Tensor norm = fn::sum(fn::mul(g, g));  // a second reader of the gradient
        optim::SgdUpdate(w, g, buf, 0.01, 0.9, 0, false, 0);
        w.set_grad(Tensor());
        return std::vector<Tensor>{norm};
      },
      true);
  CHECK(plan->Describe().find("matmul+momentum") == std::string::npos);
}

TEST_CASE("a step's numeric attrs are read and replaced by name; anything else is one line") {
  Tensor x = fn::randn(Shape({3, 4}));
  auto plan = Trace(
      {x},
      [&] { return std::vector<Tensor>{fn::sum(fn::leaky_relu(x, 0.5), {1}, /*keepdim=*/true)}; },
      false);
  REQUIRE(plan->StepName(0) == "leaky_relu");
  CHECK(plan->GetAttr(0, "negative_slope") == 0.5);
  CHECK(plan->GetAttr(1, "keepdim") == 1.0);
  plan->SetAttr(0, "negative_slope", 0.25);
  plan->SetAttr(1, "keepdim", 0.0);
  CHECK(plan->GetAttr(0, "negative_slope") == 0.25);
  CHECK(plan->GetAttr(1, "keepdim") == 0.0);
  Tensor x2 = fn::randn(Shape({3, 4}));
  CheckClose(plan->Replay({x2})[0], fn::sum(fn::leaky_relu(x2, 0.25), {1}, false));
  CHECK_THROWS_WITH(plan->GetAttr(0, "alpha"),
                    "nn.Graph Plain: op 'leaky_relu' has no attr 'alpha'");
  CHECK_THROWS_WITH(plan->SetAttr(1, "dims", 1.0),
                    "nn.Graph Plain: attr 'dims' of 'sum' is not a number");
  CHECK_THROWS_WITH(plan->GetAttr(9, "keepdim"), "nn.Graph Plain: step 9 is not an op call");
}

}  // namespace
}  // namespace oneflow
