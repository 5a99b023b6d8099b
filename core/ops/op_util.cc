#include "core/ops/op_util.h"

namespace oneflow {

std::vector<Tensor> NoDoubleBackward(const GradCtx&) {
  throw Error(
      "backward: this op belongs to another op's gradient; second derivatives through it are "
      "not supported");
}

}  // namespace oneflow
