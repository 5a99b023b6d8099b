"""oneflow.framework: OneFlow's module path for the tensor class (framework.tensor.Tensor)."""

from oneflow.framework import tensor  # noqa: F401
