#include "boxing/plan.h"

#include <catch2/catch.hpp>

#include "sbp/deduce.h"

namespace oneflow {
namespace boxing {
namespace {

TEST_CASE("a plan costs what deduction charges for the same change (one step table)") {
  const Sbp all[] = {Sbp::Split(0), Sbp::Split(1), Sbp::Broadcast(), Sbp::PartialSum()};
  const Shape shape({6, 4});
  const double bytes = 6 * 4 * 4;
  for (int n : {2, 3}) {
    std::vector<int> ranks;
    for (int r = 0; r < n; ++r) ranks.push_back(r);
    const Placement pl(DeviceType::kCPU, ranks);
    for (const Sbp& from : all) {
      for (const Sbp& to : all) {
        INFO(from.ToString() << "->" << to.ToString() << " over " << n);
        Plan p = PlanBoxing(pl, {from}, pl, {to}, shape, DType::kFloat32);
        CHECK(p.cost == sbp::BoxingCost(from, to, bytes, n));
        CHECK(p.steps.size() == (from == to ? 0u : 1u));
        if (from != to) CHECK(p.steps[0].kind == sbp::StepFor(from, to).kind);
      }
    }
  }
}

TEST_CASE("plans print each step with its kind's name") {
  const Placement pl(DeviceType::kCPU, {0, 1});
  const Shape shape({4, 4});
  CHECK(PlanBoxing(pl, {Sbp::PartialSum()}, pl, {Sbp::Broadcast()}, shape, DType::kFloat32)
            .ToString() == "P->B: all_reduce over cpu:[0, 1]");
  CHECK(PlanBoxing(pl, {Sbp::Split(0)}, pl, {Sbp::Split(1)}, shape, DType::kFloat32).ToString() ==
        "S(0)->S(1): all_to_all over cpu:[0, 1]");
  CHECK(
      PlanBoxing(pl, {Sbp::Broadcast()}, pl, {Sbp::Split(0)}, shape, DType::kFloat32).ToString() ==
      "B->S(0): local slice over cpu:[0, 1]");
  const Placement other(DeviceType::kCPU, {2, 3}, {1, 2});
  Plan p = PlanBoxing(pl, {Sbp::Broadcast()}, other, {Sbp::Broadcast(), Sbp::Broadcast()}, shape,
                      DType::kFloat32);
  // Each destination takes the whole from its own source (2 <- 0, 3 <- 1): 2 x 64 bytes.
  CHECK(p.ToString() ==
        "(B)->(B, B): point-to-point pieces to the ranks of cpu:[[2, 3]] (128 bytes)");
  CHECK(p.cost == 128);
  // From a 2x2 mesh's (S(0), S(0)) rows to S(1) columns on 2 ranks: each destination gets the
  // half-rows it lacks from the three other ranks, nothing gathered first: 2 x 3 x 2 floats.
  const Placement mesh(DeviceType::kCPU, {0, 1, 2, 3}, {2, 2});
  Plan q =
      PlanBoxing(mesh, {Sbp::Split(0), Sbp::Split(0)}, pl, {Sbp::Split(1)}, shape, DType::kFloat32);
  CHECK(q.ToString() ==
        "(S(0), S(0))->(S(1)): point-to-point pieces to the ranks of cpu:[0, 1] (48 bytes)");
  // A partial source dimension is reduced first; a partial destination one is made locally.
  Plan r = PlanBoxing(mesh, {Sbp::PartialSum(), Sbp::Split(1)}, pl, {Sbp::PartialSum()}, shape,
                      DType::kFloat32);
  CHECK(r.steps.size() == 3);
  CHECK(r.steps[0].kind == sbp::BoxingKind::kAllReduce);
  CHECK(r.steps[1].kind == sbp::BoxingKind::kRoute);
  CHECK(r.steps[2].kind == sbp::BoxingKind::kKeepOnFirst);
}

}  // namespace
}  // namespace boxing
}  // namespace oneflow
