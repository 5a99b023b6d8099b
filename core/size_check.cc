#include "core/size_check.h"

#include <unistd.h>

#include <cstdlib>
#include <limits>

#include "core/error.h"

namespace oneflow {

namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

thread_local const char* t_op = nullptr;

int64_t ReadMaxAllocationBytes() {
  if (const char* env = std::getenv("ONEFLOW_MAX_ALLOC_BYTES")) {
    char* end = nullptr;
    long long v = std::strtoll(env, &end, 10);
    if (end != env && *end == '\0' && v > 0) return v;
    throw Error(StrCat("ONEFLOW_MAX_ALLOC_BYTES: expected a positive byte count, got '", env, "'"));
  }
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return kInt64Max;
  return pages > kInt64Max / page ? kInt64Max : static_cast<int64_t>(pages) * page;
}

// CheckShape's slow path: finds which rule the shape breaks and says so (or returns the element
// count of an empty shape whose other dims overflowed on their own).
int64_t CheckShapeSlow(const Shape& shape, DType dtype, const char* op) {
  int64_t numel = 1;
  bool overflow = false;
  for (int64_t d : shape.dims()) {
    if (d < 0) {
      throw Error(
          StrCat(op, ": negative dimension ", d, " in shape ", shape, " (sizes must be >= 0)"));
    }
    if (d == 0) numel = 0;
    overflow |= numel != 0 && d != 0 && numel > kInt64Max / d;
    if (!overflow) numel *= d;
  }
  overflow &= numel != 0;  // an empty tensor, whatever its other dims
  if (overflow) {
    throw Error(StrCat(op, ": shape ", shape,
                       " has more elements than int64 can count (at most 9223372036854775807)"));
  }
  const auto item = static_cast<int64_t>(SizeOf(dtype));
  if (numel > kInt64Max / item) {
    throw Error(StrCat(op, ": shape ", shape, " of ", DTypeName(dtype), " needs ", numel, " x ",
                       item, " bytes, more than int64 can count"));
  }
  return numel;
}

// Every tensor passes here (twice: its op's inference, then its allocation), so the common case
// is one multiply with an overflow flag per dim, no division: true and the element count when
// the shape breaks no rule.
bool CountsFit(const Shape& shape, DType dtype, int64_t* numel) {
  int64_t n = 1, bytes = 0;
  bool bad = false;
  for (int64_t d : shape.dims()) {
    bad |= d < 0;
    bad |= __builtin_mul_overflow(n, d, &n);
  }
  bad |= __builtin_mul_overflow(n, static_cast<int64_t>(SizeOf(dtype)), &bytes);
  *numel = n;
  return !bad;
}

}  // namespace

int64_t CheckShape(const Shape& shape, DType dtype, const char* op) {
  int64_t numel;
  return CountsFit(shape, dtype, &numel) ? numel : CheckShapeSlow(shape, dtype, op);
}

int64_t CheckAllocation(const Shape& shape, DType dtype, const char* op) {
  // The op's name is looked up (a thread-local read) only for a message.
  auto name = [op] {
    const char* current = op ? op : CurrentSizeCheckOp();
    return current ? current : "empty";
  };
  int64_t numel;
  if (!CountsFit(shape, dtype, &numel)) numel = CheckShapeSlow(shape, dtype, name());
  const int64_t bytes = numel * static_cast<int64_t>(SizeOf(dtype));
  const int64_t cap = MaxAllocationBytes();
  if (bytes > cap) {
    throw Error(StrCat(name(), ": cannot allocate ", bytes, " bytes for a ", DTypeName(dtype),
                       " tensor of shape ", shape, ": more than the ", cap,
                       " bytes of this machine's memory (ONEFLOW_MAX_ALLOC_BYTES sets the limit)"));
  }
  return bytes;
}

int64_t MaxAllocationBytes() {
  static const int64_t cap = ReadMaxAllocationBytes();
  return cap;
}

const char* CurrentSizeCheckOp() { return t_op; }

SizeCheckOpScope::SizeCheckOpScope(const char* op) : prev_(t_op) { t_op = op; }
SizeCheckOpScope::~SizeCheckOpScope() { t_op = prev_; }

}  // namespace oneflow
