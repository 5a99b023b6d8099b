// The one size check (core/size_check.h) at the two places every tensor passes: op dispatch
// (each inferred output shape) and Tensor::Empty (each allocation), on its one-line messages.
#include "core/size_check.h"

#include "core/functional.h"
#include "tests/test_util.h"

namespace oneflow {
namespace {

TEST_CASE("CheckShape refuses negative dims and int64 overflow in one line") {
  CHECK(CheckShape(Shape({2, 3}), DType::kFloat32, "op") == 6);
  CHECK(CheckShape(Shape({4611686018427387904, 0}), DType::kFloat32, "op") == 0);
  CHECK(CheckShape(Shape(), DType::kFloat32, "op") == 1);
  CHECK_THROWS_WITH(CheckShape(Shape({-2, 3}), DType::kFloat32, "zeros"),
                    "zeros: negative dimension -2 in shape (-2, 3) (sizes must be >= 0)");
  CHECK_THROWS_WITH(CheckShape(Shape({0, -1}), DType::kFloat32, "zeros"),
                    "zeros: negative dimension -1 in shape (0, -1) (sizes must be >= 0)");
  CHECK_THROWS_WITH(CheckShape(Shape({4611686018427387904, 4}), DType::kFloat32, "zeros"),
                    "zeros: shape (4611686018427387904, 4) has more elements than int64 can "
                    "count (at most 9223372036854775807)");
  CHECK_THROWS_WITH(CheckShape(Shape({4611686018427387904}), DType::kFloat32, "zeros"),
                    "zeros: shape (4611686018427387904,) of float32 needs 4611686018427387904 x "
                    "4 bytes, more than int64 can count");
}

TEST_CASE("CheckAllocation refuses more bytes than the machine has") {
  const int64_t cap = MaxAllocationBytes();
  CHECK(cap > 0);
  CHECK(CheckAllocation(Shape({8}), DType::kFloat64, "op") == 64);
  CHECK_THROWS_WITH(CheckAllocation(Shape({cap}), DType::kFloat32, "eye"),
                    Catch::Matchers::StartsWith(StrCat("eye: cannot allocate ", cap * 4,
                                                       " bytes for a float32 tensor of shape (",
                                                       cap, ",): more than the ", cap, " bytes")));
}

TEST_CASE("every op's output shape and every allocation pass the check, named by the op") {
  CHECK_THROWS_WITH(fn::zeros(Shape({4611686018427387904, 4})),
                    Catch::Matchers::StartsWith("full: shape (4611686018427387904, 4) has more"));
  CHECK_THROWS_WITH(fn::eye(9223372036854775807, 9223372036854775807),
                    Catch::Matchers::StartsWith("eye: shape (9223372036854775807, "));
  CHECK_THROWS_WITH(fn::zeros(Shape({int64_t{1} << 40})),
                    Catch::Matchers::StartsWith("full: cannot allocate 4398046511104 bytes"));
  CHECK_THROWS_WITH(Tensor::Empty(Shape({-1}), DType::kFloat32, Device::CPU()),
                    Catch::Matchers::StartsWith("empty: negative dimension -1"));
  {
    SizeCheckOpScope scope("my_op");
    CHECK_THROWS_WITH(Tensor::Empty(Shape({-1}), DType::kFloat32, Device::CPU()),
                      Catch::Matchers::StartsWith("my_op: negative dimension -1"));
  }
  CHECK(CurrentSizeCheckOp() == nullptr);
}

}  // namespace
}  // namespace oneflow
