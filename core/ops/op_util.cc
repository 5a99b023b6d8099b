#include "core/ops/op_util.h"

#include "core/functional.h"

namespace oneflow {

void CheckNoIntegerZero(const Tensor& divisor, const char* op) {
  if (IsFloating(divisor.dtype())) return;
  NoGradGuard no_grad;
  Tensor d = fn::contiguous(divisor.is_cpu() ? divisor : fn::to_device(divisor, Device::CPU()));
  DispatchAll(d.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = d.data<T>();
    for (int64_t i = 0; i < d.numel(); ++i) {
      if (p[i] == T(0)) throw Error(StrCat(op, ": integer division by zero"));
    }
  });
}

}  // namespace oneflow
