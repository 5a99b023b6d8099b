// dropout: x times a scaled keep-mask while training, x itself otherwise. A composition, so the
// gradient (dy times the same mask) comes from mul.

#include "core/error.h"
#include "core/functional.h"

namespace oneflow {
namespace fn {

Tensor dropout(const Tensor& x, double p, bool training) {
  if (!(p >= 0.0 && p <= 1.0)) {
    throw Error(StrCat("dropout: probability has to be between 0 and 1, got ", p));
  }
  if (!training || p == 0.0) return x;
  // The mask would scale by 1 / (1 - p) = inf; everything is dropped.
  if (p == 1.0) return mul_scalar(x, 0.0);
  return mul(x, dropout_mask(x, p));
}

}  // namespace fn
}  // namespace oneflow
