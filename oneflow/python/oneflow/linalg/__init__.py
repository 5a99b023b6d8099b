"""oneflow.linalg: vector and matrix norms, inv and det (torch.linalg's names)."""

import math

import oneflow._oneflow_internal as _C
from oneflow._math_api import vector_norm
from oneflow.linalg._elimination import det, inv

__all__ = ["vector_norm", "matrix_norm", "norm", "inv", "det"]


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """The matrix norm over the two dims: 'fro', or 1 / -1 (max / min column sum of |A|) and
    inf / -inf (max / min row sum). 2, -2 and 'nuc' need an SVD, which is not available."""
    if dtype is not None:
        A = A.to(dtype)
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple, got {dim!r}")
    if A.ndim < 2:
        raise RuntimeError(f"linalg.matrix_norm: the input must have at least 2 dims, got shape "
                           f"{tuple(A.shape)}")
    d0, d1 = (d % A.ndim for d in dim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different, got {tuple(dim)}")
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord in (2, -2, "nuc"):
        raise NotImplementedError(f"linalg.matrix_norm: ord={ord!r} needs an SVD, which is not available")
    if ord in (1, -1):
        summed, over = d0, d1  # column sums, then the max / min over the columns
    elif ord in (math.inf, -math.inf):
        summed, over = d1, d0
    else:
        raise RuntimeError(f"linalg.matrix_norm: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, "
                           f"got {ord!r}")
    s = _C.sum(_C.abs(A), [summed], True)
    out = _C.amax(s, [over], True) if ord > 0 else _C.amin(s, [over], True)
    if keepdim:
        return out
    return _C.reshape(out, [n for i, n in enumerate(out._shape) if i not in (d0, d1)])


def norm(input, ord=None, dim=None, keepdim=False, *, dtype=None):
    """As torch.linalg.norm: with ord=None the 2-norm of the flattened input (or over dim);
    a matrix norm when dim is a 2-tuple, or when ord is given and the input is 2-D; a vector
    norm otherwise."""
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 2 or (dim is None and ord is not None and input.ndim == 2):
        return matrix_norm(input, "fro" if ord is None else ord, (-2, -1) if dim is None else dim,
                           keepdim, dtype=dtype)
    if ord is not None and dim is None and input.ndim != 1:
        raise RuntimeError(f"linalg.norm: with ord={ord!r} and no dim the input must be 1-D or 2-D, "
                           f"got shape {tuple(input.shape)}")
    if ord in ("fro", "nuc"):
        raise RuntimeError(f"linalg.norm: ord={ord!r} is a matrix norm; give a 2-D input or a 2-tuple dim")
    return vector_norm(input, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
