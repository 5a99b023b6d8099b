"""Gaussian elimination with partial pivoting, composed from tensor ops (so gradients, batching
and every device come from them): linalg.inv (Gauss-Jordan on [A | I]) and linalg.det (the
product of the pivots, signed by the row swaps), over (..., n, n).

    inv(A) @ A ~= I;  det(A) == prod(pivots) * (-1) ** swaps
"""

import oneflow._oneflow_internal as _C
from oneflow import _trace_state


def _square(op, A):
    if len(A._shape) < 2 or A._shape[-1] != A._shape[-2]:
        raise RuntimeError(f"linalg.{op}: A must be batches of square matrices, but they are "
                           f"{A._shape[-2] if len(A._shape) > 1 else ''} by "
                           f"{A._shape[-1] if A._shape else ''} matrices")
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"linalg.{op}: expected a floating point input, got {A.dtype}")


def _rows(M, k, n):
    """The row index tensor (..., n) that swaps row k with the pivot row of column k."""
    col = M[..., k:, k].abs()
    p = col.argmax(-1) + k  # (...)
    idx = _C.arange(0.0, float(n), 1.0, _C.int64, M._device)
    idx = idx.reshape([1] * (len(M._shape) - 2) + [n]).expand(*(list(M._shape[:-2]) + [n]))
    pk = p.unsqueeze(-1)
    swapped = _C.where(idx == k, pk, _C.where(idx == pk, _C.full([], float(k), _C.int64,
                                                                  M._device), idx))
    return swapped, p


def _eliminate(M, n, jordan):
    """M (..., n, m) after elimination on its first n columns; returns (M, pivots, swaps)."""
    batch = list(M._shape[:-2])
    m = M._shape[-1]
    pivots, swaps = [], None
    for k in range(n):
        rows, p = _rows(M, k, n)
        M = M.gather(-2, rows.unsqueeze(-1).expand(*(batch + [n, m])))
        moved = (p != k).to(M.dtype)
        swaps = moved if swaps is None else swaps + moved
        pivot = M[..., k:k + 1, k:k + 1]  # (..., 1, 1)
        pivots.append(pivot.reshape(batch))
        safe = _C.where(pivot == 0, _C.full([], 1.0, M.dtype, M._device), pivot)
        row = M[..., k:k + 1, :] / safe  # the pivot row, normalised
        factor = M[..., :, k:k + 1]  # (..., n, 1)
        if not jordan:  # below the pivot only
            below = (_C.arange(0.0, float(n), 1.0, _C.int64, M._device) > k).to(M.dtype)
            factor = factor * below.reshape([n, 1])
        here = (_C.arange(0.0, float(n), 1.0, _C.int64, M._device) == k).reshape([n, 1])
        updated = M - factor * row
        M = _C.where(here, row.expand(*M._shape) if jordan else M, updated)
    return M, pivots, swaps


def inv(A):
    _square("inv", A)
    n = A._shape[-1]
    eye = _C.eye(n, n, A.dtype, A._device).expand(*(list(A._shape[:-2]) + [n, n]))
    M, pivots, _ = _eliminate(_C.cat([A, eye], -1), n, jordan=True)
    if n and not _trace_state.is_tracing() and bool((_C.stack(pivots, -1) == 0).any().item()):
        raise RuntimeError("linalg.inv: the input is singular (a zero pivot), it has no inverse")
    return M[..., n:]


def det(A):
    _square("det", A)
    n = A._shape[-1]
    if n == 0:
        return _C.full(list(A._shape[:-2]), 1.0, A.dtype, A._device)
    _, pivots, swaps = _eliminate(A, n, jordan=False)
    prod = pivots[0]
    for p in pivots[1:]:
        prod = prod * p
    sign = 1.0 - 2.0 * (swaps - 2.0 * _C.floor(swaps / 2.0))  # (-1) ** swaps
    return prod * sign
