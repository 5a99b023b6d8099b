"""Creation functions: flow.tensor, zeros, ones, empty, full and their *_like, arange, eye,
logspace, hann_window (random creation is in _random).

    x = flow.tensor([[1, 2], [3, 4]], dtype=flow.float32)
    flow.zeros(2, 3), flow.full((2,), 7), flow.arange(0, 10, 2)
"""

import builtins
import math

import oneflow._oneflow_internal as _C
from oneflow import _api_util, _trace_state
from oneflow._api_util import _finish, _floating_default, _size

Tensor = _C.Tensor

__all__ = [
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "zeros_like",
    "ones_like", "full_like", "empty_like", "arange", "eye", "logspace", "hann_window",
]


def _has_tensor_or_numpy(data):
    if isinstance(data, (list, tuple)):
        return any(_has_tensor_or_numpy(d) for d in data)
    return isinstance(data, Tensor) or type(data).__module__ == "numpy"


def _plain(data):
    """Nested lists with their tensors and numpy scalars/arrays turned into Python values."""
    if isinstance(data, (list, tuple)):
        return [_plain(d) for d in data]
    if isinstance(data, Tensor):
        return data.detach().tolist()
    if type(data).__module__ == "numpy" and hasattr(data, "tolist"):
        return data.tolist()
    return data


def _no_pinning(op, pin_memory):
    if pin_memory:
        raise ValueError(f"{op}: pin_memory=True needs page-locked host memory for CUDA copies, "
                         f"which this build does not provide; pass pin_memory=False")


def _window_of(data):
    """Under a global build (flow.tensor(..., placement=, sbp=)), a numpy array's or a local
    tensor's part that this rank holds (a view: only it is converted); data otherwise (nested
    lists are converted whole, then sliced)."""
    is_array = type(data).__module__ == "numpy" and hasattr(data, "shape")
    if not (is_array or (isinstance(data, Tensor) and not data.is_global)):
        return data
    window = _C.take_shard_window([builtins.int(n) for n in data.shape])
    if window is None:
        return data
    start, shape = window
    return data[tuple(builtins.slice(b, b + n) for b, n in zip(start, shape))]


def tensor(data, dtype=None, device=None, requires_grad=False, placement=None, sbp=None,
           pin_memory=False):
    _no_pinning("flow.tensor", pin_memory)
    data = _window_of(data)
    try:
        t = _C.tensor(data, dtype, device, False)
    except Exception:
        # The binding cannot walk lists holding tensors (flow.tensor([loss1, loss2])) or numpy
        # scalars: retry on their Python values.
        if not (isinstance(data, (list, tuple)) and _has_tensor_or_numpy(data)):
            raise
        t = _C.tensor(_plain(data), dtype, device, False)
    if dtype is None and isinstance(data, (list, tuple)) and t.numel() == 0:
        t = t._to_dtype(_api_util._default_dtype)  # flow.tensor([]) is floating, as in PyTorch
    elif dtype is None and t.dtype == _C.float32 and _api_util._default_dtype != _C.float32 \
            and not _has_tensor_or_numpy(data):
        t = _C.tensor(data, _api_util._default_dtype, device, False)  # Python floats: every digit kept
    return _finish(t, requires_grad)


def as_tensor(data, dtype=None, device=None):
    if isinstance(data, Tensor) and (dtype is None or data.dtype == dtype):
        return data if device is None else data.to(device)
    return tensor(data, dtype, device)


def from_numpy(array):
    """A tensor over the array's own memory and strides (writes are seen by both), as OneFlow's;
    read-only arrays and negative strides are copied instead."""
    if type(array).__module__ != "numpy" or not hasattr(array, "dtype"):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(array).__name__}")
    if array.dtype.kind == "O":
        raise TypeError("from_numpy: got a numpy array of dtype object (ragged or mixed data); "
                        "expected a numeric dtype")
    return _C.from_numpy(array)


def zeros(*size, dtype=None, device=None, requires_grad=False):
    return _finish(_C.full(_size(size, "zeros"), 0.0, _floating_default(dtype), device), requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    return _finish(_C.full(_size(size, "ones"), 1.0, _floating_default(dtype), device), requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    return _finish(_C.empty(_size(size, "empty"), _floating_default(dtype), device), requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    if isinstance(fill_value, builtins.complex):
        return _finish(_C.complex_full(_size((size,), "full"), fill_value, dtype, device),
                       requires_grad)
    if dtype is None:
        if isinstance(fill_value, builtins.bool):
            dtype = _C.bool
        elif isinstance(fill_value, builtins.int):
            dtype = _C.int64
        else:
            dtype = _api_util._default_dtype
    if isinstance(fill_value, _C.Tensor) and _trace_state.is_tracing():
        # Inside nn.Graph's build the value stays a tensor input (reading it would bake the
        # trace's value into every replay).
        value = _C.to_local(fill_value).reshape([]).to(dtype)
        zeros = _C.full(_size((size,), "full"), 0.0, dtype, device)
        return _finish(zeros + value.to(zeros._device), requires_grad)
    return _finish(_C.full(_size((size,), "full"), builtins.float(fill_value), dtype, device), requires_grad)


def _like(x, dtype, device):
    return (dtype if dtype is not None else x.dtype), (device if device is not None else x._device)


def zeros_like(x, dtype=None, device=None, requires_grad=False):
    d, dev = _like(x, dtype, device)
    return _finish(_C.full(list(x._shape), 0.0, d, dev), requires_grad)


def ones_like(x, dtype=None, device=None, requires_grad=False):
    d, dev = _like(x, dtype, device)
    return _finish(_C.full(list(x._shape), 1.0, d, dev), requires_grad)


def full_like(x, fill_value, dtype=None, device=None, requires_grad=False):
    d, dev = _like(x, dtype, device)
    return _finish(_C.full(list(x._shape), builtins.float(fill_value), d, dev), requires_grad)


def empty_like(x, dtype=None, device=None, requires_grad=False):
    d, dev = _like(x, dtype, device)
    return _finish(_C.empty(list(x._shape), d, dev), requires_grad)


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    """steps values base ** e for e evenly spaced from start to end (both included)."""
    steps = _api_util._int_arg(steps, "logspace", "steps")
    dtype = dtype or _C.float32
    _api_util._check_tensor_size("logspace", (steps,), dtype)
    start, end, base = builtins.float(start), builtins.float(end), builtins.float(base)
    step = (end - start) / (steps - 1) if steps > 1 else 0.0
    # the exponents as linspace gives them: the second half counted back from end
    # Under a placement i is this rank's shard (arange takes the window): the exponents are made
    # in i's own memory and the powers in rounds, so a rank holds its result, i and a round.
    i = _C.arange(0.0, builtins.float(steps), 1.0, _C.float64, None)
    if i.is_meta:  # under the meta device: the shape only
        return _finish(_C.empty(list(i.shape), dtype, None), requires_grad)
    # the first half i * step + start, the rest end - (steps - 1 - i) * step (the same
    # roundings in place); one step: start alone (i < 1). i increases: the first half is a prefix.
    half = builtins.max(steps // 2, 1)
    if _trace_state.is_tracing():  # nn.Graph's build: no value read (the where form)
        i = _C.where(i < half, i * step + start, end - (steps - 1 - i) * step)
    else:
        k = builtins.int((i < half).sum().item())
        i[:k].mul_(step).add_(start)
        i[k:].sub_(steps - 1).mul_(step).add_(end)
    n = i.shape[0]
    values = _C.empty([n], dtype, None)
    base_t = _C.full([], base, _C.float64, None)
    chunk = builtins.max(1 << 16, n // 16)
    for b in range(0, n, chunk):
        values[b:b + chunk] = _C.pow(base_t, i[b:b + chunk]).to(dtype)
    return _finish(values if device is None else values.to(device), requires_grad)


def hann_window(window_length, periodic=True, *, dtype=None, device=None, requires_grad=False):
    """0.5 - 0.5 cos(2 pi n / N), n < window_length, N = window_length (periodic) or
    window_length - 1."""
    n = _api_util._int_arg(window_length, "hann_window", "window_length")
    dtype = dtype or _C.float32
    if not dtype.is_floating_point:
        raise TypeError(f"hann_window: dtype must be a floating point dtype, got {dtype}")
    _api_util._check_tensor_size("hann_window", (n,), dtype)
    if n <= 1:
        return _finish(_C.full([n], 1.0, dtype, device), requires_grad)
    denom = n if periodic else n - 1
    i = _C.arange(0.0, builtins.float(n), 1.0, _C.float64, None)
    # in place (the same roundings as 0.5 - 0.5 * cos(i * 2 pi / N)): under a placement i is
    # this rank's shard, and float64 temporaries are what a rank holds beyond its result
    values = i.mul_(2 * math.pi).div_(denom).cos_().mul_(-0.5).add_(0.5).to(dtype)
    return _finish(values if device is None else values.to(device), requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    if dtype is None:
        is_int = all(isinstance(v, builtins.int) for v in (start, end, step))
        dtype = _C.int64 if is_int else _api_util._default_dtype
    return _finish(_C.arange(builtins.float(start), builtins.float(end), builtins.float(step), dtype, device),
                   requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    n = _api_util._int_arg(n, "eye", "n")
    m = n if m is None else _api_util._int_arg(m, "eye", "m")
    return _finish(_C.eye(n, m, _floating_default(dtype), device), requires_grad)
