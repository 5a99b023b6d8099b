"""oneflow.linalg: vector and matrix norms (torch.linalg's names)."""

from oneflow._math_api import vector_norm

__all__ = ["vector_norm", "norm"]


def norm(input, ord=None, dim=None, keepdim=False, *, dtype=None):
    """Vector 2-norm over dim (all elements by default); ord as vector_norm for vectors."""
    if ord in ("fro", None):
        ord = 2
    if ord == "nuc":
        raise NotImplementedError("linalg.norm: the nuclear norm needs an SVD, which is not available")
    return vector_norm(input, ord, dim, keepdim, dtype=dtype)
