"""Everyday helpers of the top-level namespace: print options, closeness tests, dtype limits and
the default floating dtype.

    flow.set_printoptions(precision=2, sci_mode=False)
    flow.isclose(a, b, rtol=1e-5, atol=1e-8), flow.allclose(a, b)
    flow.finfo(flow.float16).eps, flow.iinfo(flow.int32).max
    flow.set_default_dtype(flow.float64); flow.tensor(0.1).dtype   # oneflow.float64
"""

import builtins
import math

import oneflow._oneflow_internal as _C
from oneflow import _api_util, _tensor_str
from oneflow._dtype_util import dtype_name, is_floating

Tensor = _C.Tensor

# ---------------------------------------------------------------- print options

_PROFILES = {
    "default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
    "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
    "full": dict(precision=4, threshold=math.inf, edgeitems=3, linewidth=80),
}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None,
                     sci_mode=None):
    """PyTorch's print options: digits after the point, the element count above which tensors
    are summarised, the elements kept at each end when summarised, the line width, a profile
    ("default", "short", "full") setting the first four, and sci_mode (True / False forces
    scientific notation on or off; None lets the values decide)."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: profile must be one of {sorted(_PROFILES)}, got {profile!r}")
        p = _PROFILES[profile]
        _tensor_str._PRECISION = p["precision"]
        _tensor_str._THRESHOLD = p["threshold"]
        _tensor_str._EDGEITEMS = p["edgeitems"]
        _tensor_str._LINEWIDTH = p["linewidth"]
    for name, value in (("precision", precision), ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is not None and (isinstance(value, builtins.bool) or not isinstance(value, builtins.int)
                                  or value < 0):
            raise ValueError(f"set_printoptions: {name} must be a non-negative int, got {value!r}")
    if threshold is not None and (isinstance(threshold, builtins.bool) or
                                  not isinstance(threshold, (builtins.int, builtins.float)) or threshold < 0):
        raise ValueError(f"set_printoptions: threshold must be a non-negative number, got {threshold!r}")
    if sci_mode is not None and not isinstance(sci_mode, builtins.bool):
        raise ValueError(f"set_printoptions: sci_mode must be True, False or None, got {sci_mode!r}")
    if precision is not None:
        _tensor_str._PRECISION = precision
    if threshold is not None:
        _tensor_str._THRESHOLD = threshold
    if edgeitems is not None:
        _tensor_str._EDGEITEMS = edgeitems
    if linewidth is not None:
        _tensor_str._LINEWIDTH = linewidth
    # As in PyTorch, sci_mode is set on every call (None returns to automatic).
    _tensor_str._SCI_MODE = sci_mode


# ---------------------------------------------------------------- isclose / allclose

def _isfinite(x):
    return (x == x) & (x.abs() != math.inf)


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise |input - other| <= atol + rtol * |other| (infinities close only to themselves;
    NaNs close to each other only with equal_nan), as a bool tensor of the broadcast shape."""
    for name, t in (("input", input), ("other", other)):
        if not isinstance(t, Tensor):
            raise TypeError(f"isclose: {name} must be a Tensor, got {type(t).__name__}")
    if input.dtype != other.dtype:
        raise TypeError(f"isclose: input and other must have the same dtype, got {dtype_name(input.dtype)} "
                        f"and {dtype_name(other.dtype)}")
    if rtol < 0:
        raise ValueError(f"isclose: rtol must be >= 0, got {rtol}")
    if atol < 0:
        raise ValueError(f"isclose: atol must be >= 0, got {atol}")
    close = input == other
    floating = is_floating(input.dtype)
    if equal_nan and floating:
        close = close | ((input != input) & (other != other))
    if rtol == 0 and atol == 0:
        return close
    if not floating:
        a, b = input.to(_api_util._default_dtype), other.to(_api_util._default_dtype)
    else:
        a, b = input, other
    allowed = (b * float(rtol)).abs() + float(atol)
    actual = (a - b).abs()
    return close | (_isfinite(actual) & (actual <= allowed))


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True when every element of isclose(input, other, ...) is."""
    return builtins.bool(isclose(input, other, rtol, atol, equal_nan).all())


# ---------------------------------------------------------------- finfo / iinfo

# name: (bits, mantissa bits, exponent bits)
_FLOAT_FORMATS = {"float16": (16, 10, 5), "bfloat16": (16, 7, 8), "float32": (32, 23, 8), "float64": (64, 52, 11)}
_INT_FORMATS = {"uint8": (8, False), "int8": (8, True), "int32": (32, True), "int64": (64, True)}


def _dtype_arg(what, dtype):
    if not isinstance(dtype, _C.dtype):
        raise TypeError(f"{what}: expected a oneflow.dtype, got {type(dtype).__name__}")
    return dtype_name(dtype)


class finfo:
    """Limits of a floating dtype: bits, eps, max, min, tiny (= smallest_normal), resolution."""

    def __init__(self, type=None):
        name = _dtype_arg("finfo", _api_util._default_dtype if type is None else type)
        if name not in _FLOAT_FORMATS:
            raise TypeError(f"finfo: oneflow.{name} is not a floating point dtype (use oneflow.iinfo)")
        bits, mantissa, exponent = _FLOAT_FORMATS[name]
        emax = 2 ** (exponent - 1) - 1
        self.bits = bits
        self.eps = 2.0 ** -mantissa
        self.max = (2.0 - 2.0 ** -mantissa) * 2.0 ** emax
        self.min = -self.max
        self.tiny = self.smallest_normal = 2.0 ** (1 - emax)
        self.resolution = 10.0 ** -builtins.int(-math.log10(self.eps))
        self.dtype = name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.tiny:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Limits of an integer dtype: bits, max, min."""

    def __init__(self, type):
        name = _dtype_arg("iinfo", type)
        if name not in _INT_FORMATS:
            raise TypeError(f"iinfo: oneflow.{name} is not an integer dtype (use oneflow.finfo for "
                            "floating dtypes)")
        bits, signed = _INT_FORMATS[name]
        self.bits = bits
        self.min = -(2 ** (bits - 1)) if signed else 0
        self.max = 2 ** (bits - 1) - 1 if signed else 2 ** bits - 1
        self.dtype = name

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"


# ---------------------------------------------------------------- default dtype

def get_default_dtype():
    """The dtype of tensors created from Python floats and of floating creation functions."""
    return _api_util._default_dtype


def set_default_dtype(d):
    if not isinstance(d, _C.dtype):
        raise TypeError(f"set_default_dtype: expected a oneflow.dtype, got {type(d).__name__}")
    if not is_floating(d):
        raise TypeError(f"set_default_dtype: only floating-point dtypes can be the default, got "
                        f"oneflow.{dtype_name(d)}")
    if dtype_name(d) not in ("float32", "float64"):
        raise NotImplementedError(f"set_default_dtype: oneflow.{dtype_name(d)} as the default dtype is not "
                                  "supported (use oneflow.float32 or oneflow.float64)")
    _api_util._default_dtype = d


def _tensor_methods():
    """Tensor methods of this module (oneflow/_tensor_methods.py installs them with the others)."""
    return {"isclose": isclose, "allclose": allclose}
