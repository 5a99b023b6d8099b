"""The core operators of the everyday API with PyTorch's signatures over the binding's ops
(arithmetic, comparisons, reductions, shape ops, masking), also Tensor methods with self first.

    flow.add(x, y, alpha=2), flow.sum(x, dim=1, keepdim=True), flow.max(x, dim=0).values
"""

import builtins
import warnings

import oneflow._oneflow_internal as _C
from oneflow._api_util import _MinMax, _scalar_on, _size
from oneflow._creation import zeros

Tensor = _C.Tensor

__all__ = [
    "add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
    "logical_and", "logical_or", "logical_not", "where", "neg", "negative", "exp", "log", "sqrt",
    "rsqrt", "abs", "sign", "square", "relu", "sigmoid", "tanh", "gelu", "clamp", "clip", "sum",
    "mean", "max", "min", "argmax", "argmin", "matmul", "bmm", "reshape", "view", "permute",
    "transpose", "squeeze", "unsqueeze", "flatten", "cat", "concat", "stack", "index_select",
    "gather", "softmax", "log_softmax", "numel", "is_tensor", "is_floating_point", "nonzero",
    "argwhere", "remainder", "masked_fill", "masked_select",
]


def add(input, other, *, alpha=1):
    """input + alpha * other (torch.add's alpha=)."""
    return _C.add(input, other if alpha == 1 else other * alpha)


def sub(input, other, *, alpha=1):
    """input - alpha * other (torch.sub's alpha=)."""
    return _C.sub(input, other if alpha == 1 else other * alpha)


mul = _C.mul
div = _C.div
maximum = _C.maximum
minimum = _C.minimum
eq = _C.eq
ne = _C.ne
lt = _C.lt
le = _C.le
gt = _C.gt
ge = _C.ge
logical_and = _C.logical_and
logical_or = _C.logical_or
logical_not = _C.logical_not
neg = negative = _C.neg
exp = _C.exp
log = _C.log
sqrt = _C.sqrt
rsqrt = _C.rsqrt
abs = _C.abs
sign = _C.sign
square = _C.square
relu = _C.relu
sigmoid = _C.sigmoid
tanh = _C.tanh
gelu = _C.gelu
matmul = bmm = _C.matmul


def index_select(input, dim, index):
    return _C.index_select(input, dim, index)


def gather(input, dim, index):
    """index may be smaller than input in the dims other than dim (OneFlow and PyTorch): input
    is then read over index's extent there."""
    n = len(input._shape)
    if len(index._shape) == n and n > 0:
        d = dim % n if -n <= dim < n else dim
        for k in range(n):
            if k != d and index._shape[k] < input._shape[k]:
                input = input.narrow(k, 0, index._shape[k])
    return _C.gather(input, dim, index)


def pow(x, exponent):
    if not isinstance(x, Tensor):
        if not isinstance(exponent, Tensor):  # two numbers: Python's pow could run for ever
            raise TypeError(f"pow: expected a Tensor as input or exponent, got "
                            f"{type(x).__name__} and {type(exponent).__name__}")
        return exponent.__rpow__(x)
    return _C.pow(x, exponent)


def where(condition, x=None, y=None):
    if x is None and y is None:
        return nonzero(condition, as_tuple=True)
    if x is None or y is None:
        raise TypeError("where: pass both x and y, or neither (the nonzero form)")
    return _C.where(condition, x, y)


def nonzero(input, *, as_tuple=False):
    """Coordinates of the nonzero elements: an (n, ndim) int64 tensor, or with as_tuple one
    1-d tensor per dim (what x[...] takes)."""
    coords = _C.nonzero(input)
    if not as_tuple:
        return coords
    if input.ndim == 0:  # one coordinate per nonzero element: 0 when it is nonzero
        return (zeros(coords._shape[0], dtype=_C.int64, device=coords._device),)
    return tuple(coords[:, d] for d in range(input.ndim))


def argwhere(input):
    return _C.nonzero(input)


def _check_mask(mask, op):
    if not isinstance(mask, Tensor) or mask.dtype != _C.bool:
        got = mask.dtype if isinstance(mask, Tensor) else type(mask).__name__
        raise TypeError(f"{op}: expected a bool mask tensor, got {got}")
    return mask


def masked_fill(input, mask, value):
    """input with value where mask (broadcast to input's shape) is True; autograd flows to
    input where it is False (and to value when it is a tensor)."""
    _check_mask(mask, "masked_fill")
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise ValueError(f"masked_fill: value must be a number or a 0-dim tensor, got shape {tuple(value.shape)}")
        value = value.to(input.dtype)
    else:
        value = _scalar_on(value, input.dtype, input._device)
    shape = list(input._shape)
    return _C.where(_C.expand(mask, shape) if list(mask._shape) != shape else mask, value, input)


def masked_select(input, mask):
    """The elements of input where mask is True (both broadcast to one shape), as a 1-d tensor.
    As OneFlow, an integer or floating mask selects where it is non-zero."""
    if isinstance(mask, Tensor) and mask.dtype != _C.bool:
        mask = mask != 0
    _check_mask(mask, "masked_select")
    a, b = list(input._shape), list(mask._shape)
    n = builtins.max(len(a), len(b))
    a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
    if builtins.any(x != y and 1 not in (x, y) for x, y in zip(a, b)):
        raise RuntimeError(f"masked_select: the mask of shape {tuple(mask.shape)} does not "
                           f"broadcast with the input of shape {tuple(input.shape)}")
    shape = [builtins.max(x, y) for x, y in zip(a, b)] or [1]  # 0-dim: one element
    x = input if list(input._shape) == shape else _C.expand(_C.reshape(input, a or [1]), shape)
    m = mask if list(mask._shape) == shape else _C.expand(_C.reshape(mask, b or [1]), shape)
    return x[m]


def clamp(x, min=None, max=None):
    """min/max are numbers or tensors (broadcast against x). With tensor bounds the gradient goes
    to x where min <= x <= max, to min where x < min and to max where the result exceeds max."""
    if not isinstance(min, Tensor) and not isinstance(max, Tensor):
        return _C.clamp(x, None if min is None else builtins.float(min),
                        None if max is None else builtins.float(max))
    if min is not None and not isinstance(min, Tensor):
        x, min = _C.clamp(x, builtins.float(min), None), None
    out = x
    if min is not None:
        out = _C.where(_C.lt(out, min), min.to(out.dtype), out)
    if max is not None:
        m = max.to(out.dtype) if isinstance(max, Tensor) else \
            _scalar_on(builtins.float(max), out.dtype, out.device)
        out = _C.where(_C.gt(out, m), m, out)
    return out


clip = clamp


def _dims(dim):
    if dim is None:
        return []
    if isinstance(dim, builtins.int):
        return [dim]
    return list(dim)


def sum(x, dim=None, keepdim=False, dtype=None):
    if dtype is not None:
        x = x.to(dtype)
    return _C.sum(x, _dims(dim), keepdim)


def mean(x, dim=None, keepdim=False, dtype=None):
    if dtype is not None:
        x = x.to(dtype)
    return _C.mean(x, _dims(dim), keepdim)


def max(x, dim=None, keepdim=False):
    if isinstance(dim, Tensor):
        return _C.maximum(x, dim)
    if dim is None:
        return _C.max_all(x)
    return _MinMax(_C.max_dim(x, dim, keepdim))


def min(x, dim=None, keepdim=False):
    if isinstance(dim, Tensor):
        return _C.minimum(x, dim)
    if dim is None:
        return _C.min_all(x)
    return _MinMax(_C.min_dim(x, dim, keepdim))


def argmax(x, dim=None, keepdim=False):
    return _C.argmax(x, dim, keepdim)


def argmin(x, dim=None, keepdim=False):
    return _C.argmin(x, dim, keepdim)


def reshape(x, *shape, **kw):
    """x.reshape(2, 3), x.reshape((2, 3)) or x.reshape(shape=(2, 3)) (OneFlow's keyword)."""
    return _C.reshape(x, _size(_shape_arg(shape, kw, "shape", "reshape"), "reshape", infer=True))


def view(x, *shape, **kw):
    """x.view(2, 3), x.view((2, 3)) or x.view(size=(2, 3))."""
    return _C.view(x, _size(_shape_arg(shape, kw, "size", "view"), "view", infer=True))


def _shape_arg(shape, kw, key, op):
    if not kw:
        return shape
    if shape or set(kw) != {key}:
        raise TypeError(f"{op}: give the shape positionally or as {key}=, got "
                        f"{len(shape)} positional and keywords {sorted(kw)}")
    return (kw[key],)


def permute(x, *dims):
    return _C.permute(x, _size(dims, "permute"))


def transpose(x, dim0, dim1):
    return _C.transpose(x, dim0, dim1)


def squeeze(x, dim=None):
    return _C.squeeze(x, dim)


def unsqueeze(x, dim):
    return _C.unsqueeze(x, dim)


def flatten(x, start_dim=0, end_dim=-1):
    n = len(x._shape)
    if n >= 1 and -n <= start_dim < n and -n <= end_dim < n and start_dim % n == end_dim % n:
        return x  # nothing to merge: the input itself, as OneFlow and PyTorch return it
    return _C.flatten(x, start_dim, end_dim)


def cat(tensors, dim=0):
    tensors = list(tensors)
    # OneFlow and PyTorch skip 1-D empty tensors (the legacy "no value yet") among others
    kept = [t for t in tensors if not (len(t._shape) == 1 and t._shape[0] == 0)]
    if kept and len(kept) < len(tensors) and builtins.any(len(t._shape) != 1 for t in kept):
        tensors = kept
    return _C.cat(tensors, dim)


concat = cat


def reshape_like(input, like):
    """input reshaped to like's shape (OneFlow's flow._C.reshape_like); the element counts must
    agree."""
    if not isinstance(input, Tensor) or not isinstance(like, Tensor):
        got = type(like if isinstance(input, Tensor) else input).__name__
        raise TypeError(f"reshape_like: expected two tensors, got {got}")
    if input.numel() != like.numel():
        raise RuntimeError(f"reshape_like: cannot reshape {tuple(input._shape)} "
                           f"({input.numel()} elements) like {tuple(like._shape)} "
                           f"({like.numel()} elements)")
    return _C.reshape(input, list(like._shape))


def stack(tensors, dim=0):
    return _C.stack(list(tensors), dim)


def _softmax_dim(op, ndim):
    # PyTorch's and OneFlow's legacy choice when no dim is given.
    warnings.warn(
        f"Implicit dimension choice for {op} has been deprecated. "
        "Change the call to include dim=X as an argument.",
        stacklevel=3,
    )
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, dtype=None):
    """flow.softmax, Tensor.softmax and nn.functional.softmax (one function): dtype= casts the
    input first."""
    if dim is None:
        dim = _softmax_dim("softmax", input.dim())
    if dtype is not None:
        input = input.to(dtype)
    return _C.softmax(input, dim)


def log_softmax(input, dim=None, dtype=None):
    """flow.log_softmax, Tensor.log_softmax and nn.functional.log_softmax (one function)."""
    if dim is None:
        dim = _softmax_dim("log_softmax", input.dim())
    if dtype is not None:
        input = input.to(dtype)
    return _C.log_softmax(input, dim)


def numel(x):
    return x.numel()


def is_tensor(x):
    return isinstance(x, Tensor)


def is_floating_point(x):
    return x.dtype.is_floating_point


def _floor_div(a, b):
    q = _C.div(a, b)
    r = q.long().to(q.dtype)  # truncates toward zero; floor is one lower for negatives
    r = _C.where(_C.gt(r, q), r - 1, r)
    return r if a.dtype.is_floating_point else r.to(a.dtype)


def remainder(input, other):
    """Python's %: the remainder with the sign of other (a zero integer divisor is an error)."""
    if not isinstance(input, Tensor):
        return _C.rremainder(other, input)
    return _C.remainder(input, other)
