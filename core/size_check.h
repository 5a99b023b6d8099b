// The one size check every tensor passes before it exists: each dim non-negative, the element
// and byte counts within int64, and an allocation no larger than the machine's memory. Op
// dispatch checks every output shape an op infers; Tensor::Empty checks every allocation,
// naming the op that dispatch is running (SizeCheckOpScope).
//
//   CheckShape(Shape({-2}), DType::kFloat32, "zeros");
//   // throws "zeros: negative dimension -2 in shape (-2,) (sizes must be >= 0)"
//   SizeCheckOpScope scope("eye");  // allocations below are refused in eye's name
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/shape.h"

namespace oneflow {

// Throws a one-line Error naming op when a dim is negative or the element count or the byte
// count (numel * SizeOf(dtype)) does not fit int64. Returns the element count.
int64_t CheckShape(const Shape& shape, DType dtype, const char* op);

// CheckShape, then refuses more bytes than MaxAllocationBytes(). Returns the byte count. A null
// op names the op of the enclosing SizeCheckOpScope (else "empty"), read only for a message.
int64_t CheckAllocation(const Shape& shape, DType dtype, const char* op);

// The largest allocation CheckAllocation allows: the machine's physical memory, or the
// environment variable ONEFLOW_MAX_ALLOC_BYTES when set (read once).
int64_t MaxAllocationBytes();

// The op on whose behalf this thread allocates, for CheckAllocation's message (nullptr: none).
const char* CurrentSizeCheckOp();
class SizeCheckOpScope {
 public:
  explicit SizeCheckOpScope(const char* op);
  ~SizeCheckOpScope();
  SizeCheckOpScope(const SizeCheckOpScope&) = delete;
  SizeCheckOpScope& operator=(const SizeCheckOpScope&) = delete;

 private:
  const char* prev_;
};

}  // namespace oneflow
