"""Helpers that the tensor API modules share (_creation, _random, _ops, _index_api, _math_api,
_misc, _tensor_methods): a leaf that imports none of them.

    _size((2, 3), "zeros") == _size(((2, 3),), "zeros") == [2, 3]
    Tensor.sin_ = _inplace("sin_", _C.sin)      # x.sin_() writes sin(x) into x
"""

import builtins
import operator

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


INT64_MAX = 2**63 - 1


def _size(args, what, infer=False):
    """The sizes of a creation call as a list of ints: each a non-negative int that fits int64,
    their product too; otherwise one line naming `what`. infer=True (reshape, view, expand)
    lets -1 through: the op infers that size (and checks the result)."""
    dims = args[0] if len(args) == 1 and not isinstance(args[0], builtins.int) else args
    try:
        dims = list(dims)
    except TypeError:
        raise TypeError(f"{what}: size must be ints or a sequence of ints, got "
                        f"{type(dims).__name__}") from None
    out, numel = [], 1
    for d in dims:
        try:
            d = operator.index(d)  # ints (Python, numpy, integer tensors); never a float's floor
        except TypeError:
            raise TypeError(f"{what}: size must be ints or a sequence of ints, got "
                            f"{type(d).__name__}") from None
        out.append(d)
        numel *= d
    for d in out:
        if d == -1 and infer:
            numel = 0  # the op infers it; the size check at dispatch sees the result
        elif d < 0:
            raise RuntimeError(f"{what}: negative dimension {d} in size {tuple(out)} "
                               f"(sizes must be >= 0)")
        if d > INT64_MAX:
            raise RuntimeError(f"{what}: dimension {d} in size {tuple(out)} does not fit int64 "
                               f"(at most {INT64_MAX})")
    if numel > INT64_MAX:
        raise RuntimeError(f"{what}: size {tuple(out)} has more elements than int64 can count "
                           f"(at most {INT64_MAX})")
    return out


def _int_arg(value, what, name, minimum=0, maximum=INT64_MAX):
    """An int argument (a count, a size) checked once at the front door: one line naming the op
    and the argument when it is not an int in [minimum, maximum]."""
    if isinstance(value, builtins.bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{what}: {name} must be an int, got {type(value).__name__}")
    value = value.__index__()
    if not minimum <= value <= maximum:
        raise ValueError(f"{what}: {name} must be in [{minimum}, {maximum}], got {value}")
    return value


def _check_tensor_size(what, shape, dtype=None):
    """Refuses, in one line naming `what`, a tensor of this shape and dtype that cannot exist
    (negative or int64-overflowing sizes, more bytes than the machine has: core/size_check.h),
    before a front door that builds it in steps starts any work."""
    _C._check_allocation(_size((shape,), what), _floating_default(dtype), what)


def _tensor_arg(value, what, name="input"):
    """value when it is a Tensor; else one line naming the op, the argument and what it got."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{what}: {name} must be a Tensor, got {type(value).__name__}")
    return value


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


def _scalar_on(value, dtype, device):
    """A 0-dim tensor of a Python number on device. Off the CPU it is filled there by a kernel
    taking the number as its argument: a host tensor copied over would make the host wait for
    the copy (flow.cuda.set_sync_debug_mode reports that). Integers beyond float64's 2**53
    take the exact host path."""
    if str(device) != "cpu" and not (isinstance(value, int) and builtins.abs(value) > 2**53):
        return _C.full([], builtins.float(value), dtype, device)
    return _C.tensor(value, dtype, None, False).to(device)
