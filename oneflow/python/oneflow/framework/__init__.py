"""oneflow.framework: OneFlow's module paths for the tensor class (framework.tensor.Tensor), the
nested-argument walker (framework.args_tree) and the split rule (framework.balanced_splitter)."""

from oneflow.framework import args_tree, balanced_splitter, tensor  # noqa: F401
