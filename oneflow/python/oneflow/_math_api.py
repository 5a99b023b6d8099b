"""Math, activations and reductions of the everyday API: the module-level functions
(flow.sin, flow.var, ...) and the Tensor methods with self first (x.sin(), x.var(), ...).

    import oneflow as flow
    y = flow.logsumexp(x, dim=-1)
    z = x.erfinv().clamp(-3, 3)
"""

import builtins
import math

import oneflow._oneflow_internal as _C
from oneflow._api_util import _inplace, _method, _scalar_on, _tensor_arg

Tensor = _C.Tensor

_UNARY = (
    "log1p", "expm1", "log2", "log10", "reciprocal", "sin", "cos", "tan", "asin", "acos", "atan",
    "sinh", "cosh", "asinh", "atanh", "erf", "erfc", "erfinv", "floor", "ceil", "round", "trunc",
    "lgamma", "digamma",
)

__all__ = list(_UNARY) + [
    "arcsin", "arccos", "arctan", "arcsinh", "arctanh", "fix", "isnan", "isinf", "isfinite",
    "isposinf", "isneginf", "nan_to_num", "logical_xor", "lerp", "addcmul", "addcdiv",
    "floor_divide", "true_divide", "div", "divide", "var", "std", "var_mean", "std_mean", "prod",
    "amax", "amin", "aminmax", "logsumexp", "norm", "count_nonzero", "xlogy", "hypot", "atan2",
    "sigmoid", "silu", "selu", "celu", "mish", "softplus", "logit",
]

for _name in _UNARY:
    globals()[_name] = getattr(_C, _name)
arcsin, arccos, arctan = _C.asin, _C.acos, _C.atan
arcsinh, arctanh = _C.asinh, _C.atanh
fix = _C.trunc
sigmoid = _C.sigmoid
silu = _C.silu
selu = _C.selu
mish = _C.mish


def round(input, *, decimals=0):
    """Half to even; decimals= rounds to that many decimal places (negative: to tens, hundreds),
    computed as torch does: round(x * 10^d) / 10^d, or round(x / 10^-d) * 10^-d."""
    if decimals == 0:
        return _C.round(input)
    if not _is_float(input):
        raise TypeError(f"round: decimals= needs a floating point tensor, got {input.dtype}")
    scale = builtins.float(10 ** builtins.abs(builtins.int(decimals)))
    if decimals > 0:
        return _C.div(_C.round(_C.mul(input, scale)), scale)
    return _C.mul(_C.round(_C.div(input, scale)), scale)


def celu(input, alpha=1.0):
    return _C.celu(input, builtins.float(alpha))


def softplus(input, beta=1.0, threshold=20.0):
    return _C.softplus(input, builtins.float(beta), builtins.float(threshold))


def _is_float(x):
    return x.dtype.is_floating_point


def _scalar(v, like):
    return _scalar_on(v, like.dtype, like.device)


# ---------------------------------------------------------------- predicates


def isnan(input):
    return _C.ne(input, input)  # only NaN differs from itself (all False for integers)


def isinf(input):
    if not _is_float(input):
        return _C.ne(input, input)
    return _C.eq(_C.abs(input), math.inf)


def isposinf(input):
    return _C.eq(input, math.inf) if _is_float(input) else _C.ne(input, input)


def isneginf(input):
    return _C.eq(input, -math.inf) if _is_float(input) else _C.ne(input, input)


def isfinite(input):
    if not _is_float(input):
        return _C.eq(input, input)
    return _C.eq(_C.sub(input, input), 0.0)  # inf - inf and nan - nan are nan


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN -> nan, +inf -> posinf, -inf -> neginf (the dtype's largest/smallest by default)."""
    if not _is_float(input):
        return input.clone()
    from oneflow._misc import finfo

    info = finfo(input.dtype)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    out = _C.where(_C.ne(input, input), _scalar(nan, input), input)
    out = _C.where(_C.eq(out, math.inf), _scalar(posinf, input), out)
    return _C.where(_C.eq(out, -math.inf), _scalar(neginf, input), out)


# ---------------------------------------------------------------- binary composites


def logical_xor(input, other):
    a = input if input.dtype == _C.bool else _C.ne(input, 0)
    b = other if isinstance(other, Tensor) and other.dtype == _C.bool else _C.ne(other, 0) \
        if isinstance(other, Tensor) else _scalar(builtins.bool(other), a)
    return _C.ne(a, b)


def lerp(input, end, weight):
    """input + weight * (end - input)."""
    return input + weight * (end - input)


def addcmul(input, tensor1, tensor2, *, value=1):
    for name, t in (("input", input), ("tensor1", tensor1), ("tensor2", tensor2)):
        _tensor_arg(t, "addcmul", name)
    prod = tensor1 * tensor2
    return input + (prod if value == 1 else value * prod)


def addcdiv(input, tensor1, tensor2, *, value=1):
    for name, t in (("input", input), ("tensor1", tensor1), ("tensor2", tensor2)):
        _tensor_arg(t, "addcdiv", name)
    if not _is_float(tensor1) and not _is_float(tensor2):
        raise RuntimeError("addcdiv: integer division of tensors is not supported; "
                           "use floating point tensor1 or tensor2 (got "
                           f"{tensor1.dtype} and {tensor2.dtype})")
    quot = tensor1 / tensor2
    return input + (quot if value == 1 else value * quot)


def floor_divide(input, other):
    """Floor of input / other (PyTorch >= 1.13 rounds down, as Python's //)."""
    if isinstance(input, Tensor) and not _is_float(input) and \
            (not isinstance(other, Tensor) or not _is_float(other)) and \
            not isinstance(other, builtins.float):
        # integers: a // b = (a - a % b) / b exactly, with Python's sign rule of %.
        exact = _C.sub(input, _C.remainder(input, other))  # in the promoted integer dtype
        return _C.div(exact, other).to(exact.dtype)
    return _C.floor(_C.div(input, other))


def true_divide(input, other):
    return _C.div(input, other)


def _div(input, other, *, rounding_mode=None):
    if rounding_mode is None:
        return _C.div(input, other)
    if not isinstance(input, Tensor) and isinstance(other, Tensor):
        input = _C.add(input, other.new_zeros([]))  # a number first: a 0-dim tensor like other
    if rounding_mode == "floor":
        return floor_divide(input, other)
    if rounding_mode == "trunc":
        if not _is_float(input) and (not isinstance(other, Tensor) or not _is_float(other)) \
                and not isinstance(other, builtins.float):
            q = floor_divide(input, other)
            # floor and trunc differ where the exact quotient is negative and not whole
            r = _C.remainder(input, other)
            neg = _C.logical_and(_C.ne(r, 0), _C.lt(_C.mul(input, other), 0))
            return _C.where(neg, q + 1, q)
        return _C.trunc(_C.div(input, other))
    raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")


div = divide = _div  # flow.div(x, y, rounding_mode=...) as the method


def xlogy(input, other):
    """input * log(other), 0 where input == 0 (and other is not NaN)."""
    if not isinstance(input, Tensor):
        input = _scalar(input, other)
    if not isinstance(other, Tensor):
        other = _scalar(other, input)
    out = input * _C.log(other)
    zero = _C.logical_and(_C.eq(input, 0), _C.eq(other, other))
    return _C.where(zero, _C.mul(out, 0.0), out)


def hypot(input, other):
    return _C.sqrt(input * input + other * other)


def atan2(input, other):
    """The angle of (other, input) in (-pi, pi]."""
    base = _C.atan(input / other)
    pi = _C.where(_C.ge(input, 0), _scalar(math.pi, base), _scalar(-math.pi, base))
    return _C.where(_C.lt(other, 0), base + pi, _C.where(_C.eq(other, 0),
                    _C.sign(input) * (math.pi / 2), base))


def logit(input, eps=None):
    x = input if eps is None else _C.clamp(input, builtins.float(eps), 1.0 - builtins.float(eps))
    return _C.log(x / (1 - x))


# ---------------------------------------------------------------- reductions


def _dims(dim, ndim):
    if dim is None:
        return list(range(ndim))
    if isinstance(dim, builtins.int):
        return [dim]
    return list(dim)


def _count(x, dims):
    n = 1
    for d in dims:
        n *= x._shape[d]
    return n


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over dim (all dims by default), divided by N - correction (1: unbiased)."""
    _tensor_arg(input, "var")
    if unbiased is not None and correction is not None:
        raise ValueError("var: pass unbiased or correction, not both")
    c = 1 if unbiased is None and correction is None else (
        builtins.int(unbiased) if correction is None else correction)
    if isinstance(dim, builtins.bool):  # var(x, False): the unbiased flag given positionally
        c, dim = builtins.int(dim), None
    if not _is_float(input):
        raise TypeError(f"var: expected a floating point tensor, got {input.dtype}")
    dims = _dims(dim, input.ndim)
    mean = _C.mean(input, dims, True)
    d = input - mean
    n = _count(input, [x % builtins.max(input.ndim, 1) for x in dims]) if input.ndim else 1
    return _C.sum(d * d, dims, keepdim) / builtins.max(n - c, 0)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    _tensor_arg(input, "std")
    return _C.sqrt(var(input, dim, unbiased, keepdim, correction=correction))


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    v = var(input, dim, unbiased, keepdim, correction=correction)
    return v, _C.mean(input, _dims(dim, input.ndim), keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    v, m = var_mean(input, dim, unbiased, keepdim, correction=correction)
    return _C.sqrt(v), m


def prod(input, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    if dim is None:
        return _C.prod(input, [], False)
    return _C.prod(input, [dim], keepdim)


def amax(input, dim=(), keepdim=False):
    return _C.amax(input, _dims(dim, input.ndim) if dim != () else [], keepdim)


def amin(input, dim=(), keepdim=False):
    return _C.amin(input, _dims(dim, input.ndim) if dim != () else [], keepdim)


class _MinMax(tuple):
    @property
    def min(self):
        return self[0]

    @property
    def max(self):
        return self[1]


def aminmax(input, *, dim=None, keepdim=False):
    d = [] if dim is None else [dim]
    return _MinMax((_C.amin(input, d, keepdim), _C.amax(input, d, keepdim)))


def logsumexp(input, dim, keepdim=False):
    """log(sum(exp(x))) over dim, computed as m + log(sum(exp(x - m))) with m the max."""
    dims = _dims(dim, input.ndim)
    x = input if _is_float(input) else input.float()
    if x.numel() == 0:  # PyTorch's: an empty sum is 0, so an empty slice gives log(0) = -inf
        out = _C.log(_C.sum(_C.exp(x), dims, True))
    else:
        m = _C.amax(x, dims, True).detach()
        m = _C.where(_C.eq(_C.abs(m), math.inf), _C.mul(m, 0.0), m)  # all -inf or +inf slices
        out = _C.log(_C.sum(_C.exp(x - m), dims, True)) + m
    return out if keepdim else _C.reshape(out, [s for i, s in enumerate(out._shape)
                                                  if i not in [d % builtins.max(x.ndim, 1) for d in dims]])


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """torch.norm: vector p-norms over dim (all elements by default) and the Frobenius norm."""
    if dtype is not None:
        input = input.to(dtype)
    if p == "fro" or p is None:
        p = 2
    if p == "nuc":
        raise NotImplementedError("norm: the nuclear norm needs an SVD, which is not available")
    return vector_norm(input, p, dim, keepdim)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        x = x.to(dtype)
    if not _is_float(x):
        raise TypeError(f"linalg.vector_norm: expected a floating point tensor, got {x.dtype}")
    dims = _dims(dim, x.ndim)
    a = _C.abs(x)
    if ord == math.inf or ord == "inf":
        return _C.amax(a, dims, keepdim)
    if ord == -math.inf:
        return _C.amin(a, dims, keepdim)
    if ord == 0:  # the count of non-zeros (NaN counts); differentiable with a zero gradient
        return _C.sum(_C.where(_C.ne(x, 0), _scalar(1, x), _C.mul(x, 0.0)), dims, keepdim)
    if ord == 1:
        return _C.sum(a, dims, keepdim)
    # sum(|x|^p)^(1/p); as PyTorch, the gradient is 0 (not 0/0) where the norm is 0, and for
    # p < 1 where an element is 0: those places go through where() with a safe operand.
    p = builtins.float(ord)
    if p == 2:
        s = _C.sum(x * x, dims, keepdim)
    else:
        if p < 1:
            a0 = _C.eq(a, 0)
            a = _C.where(a0, _C.mul(a, 0.0), _C.pow(_C.where(a0, _C.add(a, 1.0), a), p))
        else:
            a = _C.pow(a, p)
        s = _C.sum(a, dims, keepdim)
    zero = _C.eq(s, 0)
    safe = _C.where(zero, _C.add(s, 1.0), s)
    root = _C.sqrt(safe) if p == 2 else _C.pow(safe, 1.0 / p)
    return _C.where(zero, _C.mul(s, 0.0), root)


def count_nonzero(input, dim=None):
    return _C.sum(_C.ne(input, 0), _dims(dim, input.ndim) if dim is not None else [], False)


def _tensor_methods():
    """Tensor methods: the functions above with self first (oneflow/_tensor_methods.py installs
    them with the others)."""
    methods = {}
    for name in _UNARY + ("arcsin", "arccos", "arctan", "arcsinh", "arctanh", "fix", "isnan",
                          "isinf", "isfinite", "isposinf", "isneginf", "nan_to_num",
                          "logical_xor", "lerp", "addcmul", "addcdiv", "floor_divide",
                          "true_divide", "var", "std", "prod", "amax", "amin", "aminmax",
                          "logsumexp", "norm", "count_nonzero", "xlogy", "hypot",
                          "atan2", "sigmoid", "logit"):
        f = globals()[name]
        methods[name] = _method(f) if type(f).__name__ == "builtin_function_or_method" else f
    methods["div"] = _div
    methods["divide"] = _div
    methods["__floordiv__"] = floor_divide
    methods["__rfloordiv__"] = lambda self, other: floor_divide(
        other if isinstance(other, Tensor) else _scalar(other, self), self)
    for name in ("sin", "cos", "floor", "ceil", "round", "trunc", "log1p", "expm1", "erf",
                 "reciprocal", "lerp", "addcmul", "addcdiv", "nan_to_num", "floor_divide"):
        methods[name + "_"] = _inplace(name + "_", globals()[name])
    return methods
