// nn.Graph's plan (oneflow/graph/plan.h) without Python: what a trace records, what a replay
// computes on new inputs, fresh random numbers, in-place writes, and the host-read refusal.
#include "oneflow/graph/plan.h"

#include "core/functional.h"
#include "tests/test_util.h"

namespace oneflow {
namespace {

using graph::GraphPlan;
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

}  // namespace
}  // namespace oneflow
