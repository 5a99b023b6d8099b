"""oneflow.framework.tensor.Tensor is oneflow.Tensor (OneFlow's module path)."""

import oneflow

Tensor = oneflow.Tensor
