"""Helpers that the tensor API modules share (_creation, _random, _ops, _index_api, _math_api,
_misc, _tensor_methods): a leaf that imports none of them.

    _size((2, 3), "zeros") == _size(((2, 3),), "zeros") == [2, 3]
    Tensor.sin_ = _inplace("sin_", _C.sin)      # x.sin_() writes sin(x) into x
"""

import builtins

import oneflow._oneflow_internal as _C

Tensor = _C.Tensor


class Size(tuple):
    """A tensor's shape: a tuple of ints that prints as oneflow.Size([2, 3])."""

    def __repr__(self):
        return "oneflow.Size([" + ", ".join(str(d) for d in self) + "])"

    def numel(self):
        n = 1
        for d in self:
            n *= d
        return n


def _size(args, what):
    if len(args) == 1 and not isinstance(args[0], builtins.int):
        return [builtins.int(d) for d in args[0]]
    return [builtins.int(d) for d in args]


# The dtype of tensors made from Python floats and of floating creation functions when no dtype
# is given (flow.set_default_dtype; float32 or float64).
_default_dtype = _C.float32


def _floating_default(dtype):
    return _default_dtype if dtype is None else dtype


def _finish(t, requires_grad):
    if requires_grad:
        t.requires_grad_(True)
    return t


class _MinMax(tuple):
    """(values, indices) with named fields, as torch.return_types.max."""

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]


def _method(fn):
    """A Tensor method over a binding function. Functions of the extension module are builtins,
    which are not descriptors: assigned to the class as they are, x.add(y) would call add(y)."""
    def method(self, *args):
        return fn(self, *args)
    method.__name__ = method.__qualname__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


def _inplace(op_name, fn):
    """x.op_(...) writes fn(x, ...) into x; autograd follows the write (x's history becomes
    fn's, as PyTorch's in-place ops)."""
    def method(self, *args, **kwargs):
        return self._inplace_(lambda s: fn(s, *args, **kwargs), op_name)
    method.__name__ = op_name
    return method
