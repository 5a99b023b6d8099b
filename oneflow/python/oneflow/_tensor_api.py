"""Python signatures of the tensor API over the C++ functional ops, and the Tensor methods
that need PyTorch's flexible arguments (x.sum(dim=1, keepdim=True), x.view(2, -1), ...)."""

import builtins
import contextlib
import functools
import math
import os
import threading

import oneflow._oneflow_internal as _C
from oneflow import _global

Tensor = _C.Tensor

__all__ = [
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "zeros_like", "ones_like",
    "full_like", "empty_like", "rand", "randn", "randint", "randperm", "rand_like", "randn_like",
    "arange", "eye", "manual_seed", "initial_seed", "seed", "add", "sub", "mul", "div", "pow",
    "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
    "logical_not", "where", "neg", "negative", "exp", "log", "sqrt", "rsqrt", "abs", "sign",
    "square", "relu", "sigmoid", "tanh", "gelu", "clamp", "clip", "sum", "mean", "max", "min",
    "argmax", "argmin", "matmul", "mm", "bmm", "reshape", "view", "permute", "transpose",
    "squeeze", "unsqueeze", "flatten", "cat", "concat", "stack", "index_select", "gather",
    "softmax", "log_softmax", "numel", "is_tensor", "is_floating_point", "nonzero",
    "argwhere", "remainder", "masked_fill", "masked_select", "Generator", "default_generator",
    "normal", "randint_like", "logspace", "hann_window",
]


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


# ---------------------------------------------------------------- creation

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


def tensor(data, dtype=None, device=None, requires_grad=False, placement=None, sbp=None):
    try:
        t = _C.tensor(data, dtype, device, False)
    except Exception:
        # The binding cannot walk lists holding tensors (flow.tensor([loss1, loss2])) or numpy
        # scalars: retry on their Python values.
        if not (isinstance(data, (list, tuple)) and _has_tensor_or_numpy(data)):
            raise
        t = _C.tensor(_plain(data), dtype, device, False)
    if dtype is None and isinstance(data, (list, tuple)) and t.numel() == 0:
        t = t._to_dtype(_default_dtype)  # flow.tensor([]) is floating, as in PyTorch
    elif dtype is None and t.dtype == _C.float32 and _default_dtype != _C.float32 \
            and not _has_tensor_or_numpy(data):
        t = _C.tensor(data, _default_dtype, device, False)  # Python floats: every digit kept
    return _finish(t, requires_grad)


def as_tensor(data, dtype=None, device=None):
    if isinstance(data, Tensor) and (dtype is None or data.dtype == dtype):
        return data if device is None else data.to(device)
    return tensor(data, dtype, device)


def from_numpy(array):
    return _C.tensor(array, None, None, False)


def zeros(*size, dtype=None, device=None, requires_grad=False):
    return _finish(_C.full(_size(size, "zeros"), 0.0, _floating_default(dtype), device), requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    return _finish(_C.full(_size(size, "ones"), 1.0, _floating_default(dtype), device), requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    return _finish(_C.empty(_size(size, "empty"), _floating_default(dtype), device), requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    if dtype is None:
        if isinstance(fill_value, builtins.bool):
            dtype = _C.bool
        elif isinstance(fill_value, builtins.int):
            dtype = _C.int64
        else:
            dtype = _default_dtype
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


class Generator:
    """A random stream of its own: flow.randn(..., generator=g) draws from g and leaves the
    default stream (flow.manual_seed's) where it was. Every stream is a (seed, counter) pair of
    the same counter-based generator, so g.manual_seed(s) then a draw gives the numbers that
    flow.manual_seed(s) then the same draw gives (also for global tensors: every rank draws the
    logical value and keeps its own part)."""

    _DEFAULT_SEED = 67280421310721  # OneFlow's and PyTorch's default seed

    def __init__(self, device="cpu"):
        self.device = device if isinstance(device, _C.device) else _C.device(device)
        if self.device.type != "cpu":
            raise NotImplementedError(f"Generator: only CPU generators are supported, got device "
                                      f"{self.device}")
        self._seed, self._offset = self._DEFAULT_SEED, 0

    def manual_seed(self, seed):
        self._seed, self._offset = builtins.int(seed) & 0xFFFFFFFFFFFFFFFF, 0
        return self

    def initial_seed(self):
        return self._seed

    def seed(self):
        """Seeds from the operating system's entropy and returns the seed."""
        s = builtins.int.from_bytes(os.urandom(8), "little") >> 1
        self.manual_seed(s)
        return s

    def get_state(self):
        """The state as a uint8 tensor (seed and counter, 8 bytes each, little-endian)."""
        raw = self._seed.to_bytes(8, "little") + self._offset.to_bytes(8, "little")
        return tensor(list(raw), dtype=_C.uint8)

    def set_state(self, state):
        raw = bytes(builtins.int(v) for v in state.tolist()) if isinstance(state, Tensor) else None
        if raw is None or len(raw) != 16:
            raise ValueError(f"Generator.set_state: expected a uint8 tensor of 16 bytes from "
                             f"get_state(), got {state!r}"[:300])
        self._seed = builtins.int.from_bytes(raw[:8], "little")
        self._offset = builtins.int.from_bytes(raw[8:], "little")
        return self

    def __repr__(self):
        return f"<oneflow.Generator device={self.device} seed={self._seed}>"


class _DefaultGenerator(Generator):
    """flow.default_generator: the default stream itself (flow.manual_seed's)."""

    def __init__(self):
        self.device = _C.device("cpu")

    @property
    def _seed(self):
        return _C.generator_state()[0]

    @property
    def _offset(self):
        return _C.generator_state()[1]

    def manual_seed(self, seed):
        manual_seed(seed)
        return self

    def set_state(self, state):
        g = Generator().set_state(state)
        _C.set_generator_state(g._seed, g._offset)
        return self


default_generator = _DefaultGenerator()
_generator_lock = threading.RLock()


@contextlib.contextmanager
def _drawing_from(generator, op):
    """Runs the draws inside on generator's stream (the default one when None)."""
    if generator is None or isinstance(generator, _DefaultGenerator):
        yield
        return
    if not isinstance(generator, Generator):
        raise TypeError(f"{op}: generator must be a oneflow.Generator, got "
                        f"{type(generator).__name__}")
    with _generator_lock:
        saved = _C.generator_state()
        _C.set_generator_state(generator._seed, generator._offset)
        try:
            yield
        finally:
            generator._offset = _C.generator_state()[1]
            _C.set_generator_state(*saved)


def _size_arg(args, kw, op):
    """The shape of f(2, 3), f((2, 3)) or f(size=(2, 3)) (OneFlow's keyword form)."""
    if "size" in kw:
        if args:
            raise TypeError(f"{op}: got the size both as arguments and as size=")
        args = (kw.pop("size"),)
    if kw:
        raise TypeError(f"{op}() got an unexpected keyword argument {next(iter(kw))!r}")
    return _size(args, op)


def rand(*size, dtype=None, device=None, requires_grad=False, generator=None, **kw):
    size = _size_arg(size, kw, "rand")
    with _drawing_from(generator, "rand"):
        return _finish(_C.rand(size, _floating_default(dtype), device), requires_grad)


def randn(*size, dtype=None, device=None, requires_grad=False, generator=None, **kw):
    size = _size_arg(size, kw, "randn")
    with _drawing_from(generator, "randn"):
        return _finish(_C.randn(size, _floating_default(dtype), device), requires_grad)


def rand_like(x, dtype=None, device=None, requires_grad=False, generator=None):
    d, dev = _like(x, dtype, device)
    with _drawing_from(generator, "rand_like"):
        return _finish(_C.rand(list(x._shape), d, dev), requires_grad)


def randn_like(x, dtype=None, device=None, requires_grad=False, generator=None):
    d, dev = _like(x, dtype, device)
    with _drawing_from(generator, "randn_like"):
        return _finish(_C.randn(list(x._shape), d, dev), requires_grad)


def randint(low, high=None, size=None, dtype=None, device=None, requires_grad=False, generator=None):
    if size is None:  # randint(high, size)
        if high is None:
            raise TypeError("randint: expected randint(low, high, size) or randint(high, size)")
        low, high, size = 0, low, high
    with _drawing_from(generator, "randint"):
        t = _C.randint(builtins.int(low), builtins.int(high), _size((size,), "randint"), dtype, device)
    return _finish(t, requires_grad)


def randint_like(input, low, high=None, *, dtype=None, device=None, requires_grad=False,
                 generator=None):
    """Random integers in [low, high) (or [0, low)) with input's shape."""
    if high is None:
        low, high = 0, low
    d, dev = _like(input, dtype, device)
    return randint(low, high, list(input._shape), dtype=d, device=dev, requires_grad=requires_grad,
                   generator=generator)


def randperm(n, generator=None, dtype=None, device=None, requires_grad=False):
    with _drawing_from(generator, "randperm"):
        t = _C.randperm(builtins.int(n), device)
    return _finish(t if dtype is None else t.to(dtype), requires_grad)


def normal(mean, std, size=None, *, generator=None, dtype=None, device=None,
           requires_grad=False):
    """Draws from N(mean, std^2): numbers mean and std with size, or tensors (broadcast to one
    shape, each element its own mean and std)."""
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        if size is not None:
            raise TypeError("normal: give size only with number mean and std; tensor mean or std "
                            "give the shape")
        like = mean if isinstance(mean, Tensor) else std
        import numpy as np  # numpy is optional: imported where it is used

        shape = [builtins.int(d) for d in np.broadcast_shapes(
            tuple(mean._shape) if isinstance(mean, Tensor) else (),
            tuple(std._shape) if isinstance(std, Tensor) else ())]
        with _drawing_from(generator, "normal"):
            z = _C.randn(shape, dtype or like.dtype, device or like._device)
        return _finish(z * std + mean, requires_grad)
    if size is None:
        raise TypeError("normal: with number mean and std, size is required, e.g. "
                        "normal(0.0, 1.0, (2, 3))")
    with _drawing_from(generator, "normal"):
        z = _C.randn(_size((size,), "normal"), dtype, device)
    if std != 1 or mean != 0:
        z = z * builtins.float(std) + builtins.float(mean)
    return _finish(z, requires_grad)


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    """steps values base ** e for e evenly spaced from start to end (both included)."""
    steps = builtins.int(steps)
    if steps < 0:
        raise ValueError(f"logspace: steps must be non-negative, got {steps}")
    start, end, base = builtins.float(start), builtins.float(end), builtins.float(base)
    step = (end - start) / (steps - 1) if steps > 1 else 0.0
    # the exponents as linspace gives them: the second half counted back from end
    exps = [start + i * step if i < steps // 2 else end - (steps - 1 - i) * step
            for i in range(steps)]
    values = [base ** e for e in exps]
    return _finish(_C.tensor(values, dtype or _C.float32, device, False), requires_grad)


def hann_window(window_length, periodic=True, *, dtype=None, device=None, requires_grad=False):
    """0.5 - 0.5 cos(2 pi n / N), n < window_length, N = window_length (periodic) or
    window_length - 1."""
    n = builtins.int(window_length)
    if n < 0:
        raise ValueError(f"hann_window: window_length must be non-negative, got {n}")
    dtype = dtype or _C.float32
    if not dtype.is_floating_point:
        raise TypeError(f"hann_window: dtype must be a floating point dtype, got {dtype}")
    if n <= 1:
        values = [1.0] * n
    else:
        denom = n if periodic else n - 1
        values = [0.5 - 0.5 * math.cos(2 * math.pi * i / denom) for i in range(n)]
    return _finish(_C.tensor(values, dtype, device, False), requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    if dtype is None:
        is_int = all(isinstance(v, builtins.int) for v in (start, end, step))
        dtype = _C.int64 if is_int else _default_dtype
    return _finish(_C.arange(builtins.float(start), builtins.float(end), builtins.float(step), dtype, device),
                   requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    return _finish(_C.eye(n, n if m is None else m, _floating_default(dtype), device), requires_grad)


_seedings = 0  # manual_seed calls so far: DataLoader workers' seeds restart with each


def manual_seed(seed):
    global _seedings
    _C.manual_seed(builtins.int(seed) & 0xFFFFFFFFFFFFFFFF)
    _seedings += 1


def initial_seed():
    return _C.initial_seed()


def seed():
    return _C.initial_seed()


# ---------------------------------------------------------------- grad mode

class no_grad:
    """Context manager and decorator that disables graph recording."""

    def __enter__(self):
        self.prev = _C.is_grad_enabled()
        _C.set_grad_enabled(False)

    def __exit__(self, *exc):
        _C.set_grad_enabled(self.prev)
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return func(*args, **kwargs)
        return wrapper


class enable_grad(no_grad):
    def __enter__(self):
        self.prev = _C.is_grad_enabled()
        _C.set_grad_enabled(True)


class set_grad_enabled(no_grad):
    """set_grad_enabled(mode) switches at once (a function call); as a context manager it
    restores the previous mode on exit; as a decorator (@set_grad_enabled(False)) it runs each
    call of the function in that mode and leaves the mode around the decoration alone."""

    def __init__(self, mode):
        self.prev = _C.is_grad_enabled()
        self.mode = builtins.bool(mode)
        _C.set_grad_enabled(self.mode)

    def __enter__(self):
        pass

    def __call__(self, func):
        _C.set_grad_enabled(self.prev)  # decorating only: undo the switch __init__ made
        mode = self.mode

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return func(*args, **kwargs)
        return wrapper


_inference_mode = [False]


class inference_mode(no_grad):
    """Context manager and decorator (@inference_mode() or @inference_mode) for code that
    never needs gradients: graph recording is off inside, as under no_grad.
    inference_mode(False) leaves the grad mode as it is. Unlike PyTorch, tensors made inside
    are ordinary tensors (no 'inference tensor' restrictions afterwards)."""

    def __new__(cls, mode=True):
        if callable(mode) and not isinstance(mode, builtins.bool):
            return cls()(mode)  # bare @inference_mode
        return super().__new__(cls)

    def __init__(self, mode=True):
        if not isinstance(mode, builtins.bool):
            raise TypeError(f"inference_mode: mode must be a bool, got {type(mode).__name__}")
        self.mode = mode

    def __enter__(self):
        self.prev = _C.is_grad_enabled()
        self.prev_inference = _inference_mode[0]
        if self.mode:
            _C.set_grad_enabled(False)
            _inference_mode[0] = True

    def __exit__(self, *exc):
        _C.set_grad_enabled(self.prev)
        _inference_mode[0] = self.prev_inference
        return False

    def __call__(self, func):
        mode = self.mode

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return func(*args, **kwargs)
        return wrapper


def is_inference_mode_enabled():
    return _inference_mode[0]


is_grad_enabled = _C.is_grad_enabled

# ---------------------------------------------------------------- ops



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
matmul = mm = bmm = _C.matmul


def index_select(input, dim, index):
    return _C.index_select(input, dim, index)


def gather(input, dim, index):
    return _C.gather(input, dim, index)


def pow(x, exponent):
    if not isinstance(x, Tensor):
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
        value = _C.tensor(value, input.dtype, None, False).to(input._device)
    shape = list(input._shape)
    return _C.where(_C.expand(mask, shape) if list(mask._shape) != shape else mask, value, input)


def masked_select(input, mask):
    """The elements of input where mask is True (both broadcast to one shape), as a 1-d tensor."""
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
            _C.tensor(builtins.float(max), out.dtype, None, False).to(out.device)
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


class _MinMax(tuple):
    """(values, indices) with named fields, as torch.return_types.max."""

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]


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


def reshape(x, *shape):
    return _C.reshape(x, _size(shape, "reshape"))


def view(x, *shape):
    return _C.view(x, _size(shape, "view"))


def permute(x, *dims):
    return _C.permute(x, _size(dims, "permute"))


def transpose(x, dim0, dim1):
    return _C.transpose(x, dim0, dim1)


def squeeze(x, dim=None):
    return _C.squeeze(x, dim)


def unsqueeze(x, dim):
    return _C.unsqueeze(x, dim)


def flatten(x, start_dim=0, end_dim=-1):
    return _C.flatten(x, start_dim, end_dim)


def cat(tensors, dim=0):
    return _C.cat(list(tensors), dim)


concat = cat


def stack(tensors, dim=0):
    return _C.stack(list(tensors), dim)


def softmax(x, dim=None, dtype=None):
    return _C.softmax(x, -1 if dim is None else dim)


def log_softmax(x, dim=None, dtype=None):
    return _C.log_softmax(x, -1 if dim is None else dim)


def numel(x):
    return x.numel()


def is_tensor(x):
    return isinstance(x, Tensor)


def is_floating_point(x):
    return x.dtype.is_floating_point


# ---------------------------------------------------------------- Tensor methods

def _to(self, *args, **kwargs):
    """to(device), to(dtype), to(device, dtype), to(other_tensor)."""
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    for a in args:
        if isinstance(a, _C.dtype):
            dtype = a
        elif isinstance(a, Tensor):
            dtype, device = a.dtype, a._device
        elif a is not None:
            device = a
    t = self
    if device is not None:
        t = t._to_device(device)
    if dtype is not None:
        t = t._to_dtype(dtype)
    return t


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


def _install_tensor_methods():
    """The one place that installs Tensor methods (oneflow/__init__.py calls it once the API
    modules are imported)."""
    T = Tensor
    T.shape = property(lambda self: Size(self._shape))

    def size(self, dim=None):
        s = self._shape
        return Size(s) if dim is None else s[dim]
    T.size = size
    T.to = _to
    T.cpu = lambda self: self._to_device("cpu")
    T.cuda = lambda self, device=None: self._to_device("cuda" if device is None else device)
    T.float = lambda self: self._to_dtype(_C.float32)
    T.double = lambda self: self._to_dtype(_C.float64)
    T.half = lambda self: self._to_dtype(_C.float16)
    T.bfloat16 = lambda self: self._to_dtype(_C.bfloat16)
    T.long = lambda self: self._to_dtype(_C.int64)
    T.int = lambda self: self._to_dtype(_C.int32)
    T.bool = lambda self: self._to_dtype(_C.bool)
    def type_as(self, other):
        """self in other's dtype; with a global other, global on other's placement as OneFlow
        does (a local self becomes broadcast there, a global one keeps its sbp)."""
        if other.is_global:
            from oneflow import sbp as flow_sbp
            if self.is_global:
                t = self.to_global(placement=other.placement)
            else:
                t = self.to_global(placement=other.placement,
                                   sbp=[flow_sbp.broadcast] * len(other.placement.hierarchy))
            return t._to_dtype(other.dtype)
        return self._to_dtype(other.dtype)
    T.type_as = type_as
    T.is_floating_point = lambda self: self.dtype.is_floating_point

    def __array__(self, dtype=None, copy=None):
        """numpy.asarray(t), np.allclose(t, ...): the values, also of a tensor that requires grad
        (OneFlow's numpy() does the same)."""
        a = (self.detach() if self.requires_grad else self).numpy()
        return a if dtype is None else a.astype(dtype, copy=False)
    T.__array__ = __array__
    T.reshape = reshape
    T.view = view
    T.view_as = lambda self, other: _C.view(self, list(other._shape))
    T.reshape_as = lambda self, other: _C.reshape(self, list(other._shape))
    T.permute = permute
    T.transpose = transpose
    T.t = lambda self: _C.transpose(self, 0, 1) if self.ndim == 2 else self
    T.T = property(lambda self: _C.permute(self, list(range(self.ndim - 1, -1, -1))))
    T.squeeze = squeeze
    T.unsqueeze = unsqueeze
    T.flatten = flatten

    def expand(self, *sizes):
        return _C.expand(self, _size(sizes, "expand"))
    T.expand = expand
    T.expand_as = lambda self, other: _C.expand(self, list(other._shape))
    T.sum = sum
    T.mean = mean
    T.max = max
    T.min = min
    T.argmax = argmax
    T.argmin = argmin
    # Methods that are the functional op with self first.
    for name in (
        "matmul", "mul", "div", "neg", "rsqrt", "sign", "square", "gelu", "eq",
        "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and", "logical_or", "maximum", "minimum",
    ):
        setattr(T, name, _method(getattr(_C, name)))
    T.add = add
    T.sub = sub
    T.mm = _method(_C.matmul)
    T.pow = pow
    T.clamp = clamp
    T.clip = clamp
    T.softmax = softmax
    T.log_softmax = log_softmax
    T.index_select = index_select
    T.gather = gather
    T.all = lambda self: _C.min_all(self.bool().long()).bool() if self.numel() else _C.tensor(True, None, None, False)
    T.any = lambda self: _C.max_all(self.bool().long()).bool() if self.numel() else _C.tensor(False, None, None, False)
    T.nonzero = nonzero
    T.argwhere = argwhere
    T.masked_fill = masked_fill
    T.masked_fill_ = _inplace("masked_fill_", masked_fill)
    T.masked_select = masked_select
    T.add_ = _inplace("add_", lambda self, other, alpha=1: _C.add(self, other if alpha == 1 else other * alpha))
    T.sub_ = _inplace("sub_", lambda self, other, alpha=1: _C.sub(self, other if alpha == 1 else other * alpha))
    T.mul_ = _inplace("mul_", _C.mul)
    T.div_ = _inplace("div_", _C.div)
    T.clamp_ = _inplace("clamp_", clamp)
    T.__iadd__ = T.add_
    T.__isub__ = T.sub_
    T.__imul__ = T.mul_
    T.__itruediv__ = T.div_

    def uniform_(self, a=0.0, b=1.0, *, generator=None):
        with _drawing_from(generator, "uniform_"):
            _C.uniform_(self, builtins.float(a), builtins.float(b))
        return self

    def normal_(self, mean=0.0, std=1.0, *, generator=None):
        with _drawing_from(generator, "normal_"):
            _C.normal_(self, builtins.float(mean), builtins.float(std))
        return self
    T.uniform_ = uniform_
    T.normal_ = normal_

    _c_setitem = T.__setitem__

    def __setitem__(self, index, value):
        # The binding writes through x[index] as a view, but an int index on a strided view (a
        # column, x[:, 1]) yields a copy: the write would be lost. Write through length-1
        # slices instead, which are always views, reshaping the value to match.
        items = index if isinstance(index, tuple) else (index,)
        is_int = [isinstance(i, builtins.int) and not isinstance(i, builtins.bool) for i in items]
        special = [i is None or i is Ellipsis or isinstance(i, slice) or k for i, k in zip(items, is_int)]
        if not builtins.all(special) or not builtins.any(k or i is None for i, k in zip(items, is_int)):
            return _c_setitem(self, index, value)  # no int or None, or an index tensor/list
        if self.is_contiguous() and None not in items and builtins.all(is_int[:builtins.sum(is_int)]):
            return _c_setitem(self, index, value)  # leading ints of a contiguous tensor: views
        shape = self._shape
        consumed = builtins.sum(1 for i in items if i is not None and i is not Ellipsis)
        if consumed > len(shape):
            raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
        write_index, dim = [], 0
        for i, k in zip(items, is_int):
            if i is Ellipsis:
                write_index.append(i)
                dim += len(shape) - consumed
            elif k:
                n = shape[dim]
                if not -n <= i < n:
                    raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {n}")
                i %= n
                write_index.append(slice(i, i + 1))
                dim += 1
            elif i is not None:
                write_index.append(i)
                dim += 1
        write_index = tuple(write_index)
        if isinstance(value, Tensor):
            view_shape = _C.Tensor.__getitem__(self.detach(), write_index)._shape
            # The shape x[index] has: the int dims dropped, a 1 for each None.
            target, dim = [], 0
            for i, k in zip(items, is_int):
                if i is Ellipsis:
                    target.extend(view_shape[dim:dim + len(shape) - consumed])
                    dim += len(shape) - consumed
                elif i is None:
                    target.append(1)
                else:
                    if not k:
                        target.append(view_shape[dim])
                    dim += 1
            target.extend(view_shape[dim:])
            v = value  # reshaped with autograd: the write is followed when value requires grad
            lead = 0
            while v.ndim - lead > len(target) and v._shape[lead] == 1:
                lead += 1  # PyTorch drops leading size-1 dims of the value
            if lead:
                v = _C.reshape(v, list(v._shape[lead:]))
            value = _C.reshape(_C.expand(v, target), list(view_shape))
        return _c_setitem(self, write_index, value)
    T.__setitem__ = __setitem__

    _c_requires_grad_ = T.requires_grad_

    def requires_grad_(self, requires_grad=True):
        if requires_grad and self.requires_grad and not self.is_leaf:
            return self  # already requires grad: a no-op on non-leaves too, as in PyTorch
        return _c_requires_grad_(self, requires_grad)
    T.requires_grad_ = requires_grad_

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._shape[0]))
    T.__iter__ = __iter__

    def __repr__(self):
        from oneflow import _tensor_str
        return _tensor_str._repr(self)
    T.__repr__ = __repr__
    T.__str__ = __repr__

    def __format__(self, spec):
        if self.ndim == 0:
            return format(self.item(), spec)
        return format(repr(self), spec)
    T.__format__ = __format__
    T.__mod__ = lambda self, other: remainder(self, other)
    T.__rmod__ = lambda self, other: _C.rremainder(self, other)
    T.remainder = remainder
    T.__floordiv__ = lambda self, other: _floor_div(self, other)
    T.__rfloordiv__ = lambda self, other: _floor_div(_C.tensor(other, self.dtype, None, False), self)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = self.detach().clone()
        if self.requires_grad:
            result.requires_grad_(True)
        memo[id(self)] = result
        return result
    T.__deepcopy__ = __deepcopy__

    def __reduce_ex__(self, protocol):
        return (_rebuild_tensor, (self._raw_bytes(), tuple(self._shape), self.dtype.name, self.requires_grad))
    T.__reduce_ex__ = __reduce_ex__

    @staticmethod
    def _make_subclass(cls, data, requires_grad=False):
        obj = Tensor.__new__(cls)
        Tensor.__init__(obj, data.detach())
        if requires_grad:
            obj.requires_grad_(True)
        return obj
    T._make_subclass = _make_subclass

    _wrap = T.__init__  # the binding's: wraps an existing tensor

    def __init__(self, *args, dtype=None, device=None, placement=None, sbp=None,
                 requires_grad=False):
        """The legacy constructor forms OneFlow and PyTorch accept: flow.Tensor(2, 3) or
        flow.Tensor(flow.Size([2, 3])) (zeros of the default dtype unless dtype), flow.Tensor(data)
        (a copy in the default dtype of a list, array or tensor), any of them with device= or
        placement=/sbp=."""
        if len(args) == 1 and isinstance(args[0], T) and dtype is device is placement is sbp \
                is None and not requires_grad:
            return _wrap(self, args[0])  # wraps, sharing data (what Parameter and subclasses do)
        sizes = args[0] if len(args) == 1 and isinstance(args[0], Size) else args
        is_shape = all(isinstance(a, builtins.int) and not isinstance(a, builtins.bool)
                       for a in sizes)
        if (placement is None) != (sbp is None):
            raise ValueError("Tensor: placement and sbp go together (got only one of them)")
        if placement is not None and device is not None:
            raise ValueError("Tensor: give device or placement, not both")
        if not is_shape and len(args) != 1:
            raise TypeError(f"Tensor: expected sizes (ints) or one data argument, got {args!r}")
        data = None if is_shape else args[0]
        if isinstance(data, T) and data.is_global:
            # OneFlow: a global tensor with device= gives this rank's local tensor there, with
            # placement= / sbp= the tensor laid out anew
            if placement is not None:
                t = data.to_global(placement=placement, sbp=sbp)
            else:
                t = data.to_local()
                t = t.to(device) if device is not None else t
            t = t._to_dtype(_floating_default(dtype))
        elif placement is not None:
            # the sizes or data are the logical (global) tensor's, as in flow.zeros / flow.tensor
            import oneflow as flow
            if is_shape:
                t = flow.zeros(*sizes, dtype=_floating_default(dtype), placement=placement, sbp=sbp)
            else:
                t = flow.tensor(data, dtype=_floating_default(dtype), placement=placement, sbp=sbp)
        else:
            if is_shape:
                t = zeros(*sizes, dtype=_floating_default(dtype))
            else:
                t = tensor(data, dtype=_floating_default(dtype))
            if device is not None:
                t = t.to(device)
        _wrap(self, t.detach())
        if requires_grad:
            self.requires_grad_(True)
    T.__init__ = __init__

    def register_hook(self, hook):
        """hook(grad) runs on each gradient computed for this tensor and may return a
        replacement; returns a handle whose remove() takes the hook off."""
        return _RemovableHandle(self, self._register_hook(hook))
    T.register_hook = register_hook

    def register_post_accumulate_grad_hook(self, hook):
        self._register_post_accumulate_grad_hook(hook)
    T.register_post_accumulate_grad_hook = register_post_accumulate_grad_hook

    # Global tensors (oneflow/_global.py): the same methods serve local and global tensors;
    # numpy(), item(), tolist() and the number conversions gather a global tensor in C++.
    T.is_consistent = T.is_global
    T.is_local = property(lambda self: not self.is_global)
    T.placement = property(_global._placement)
    T.sbp = property(_global._sbp)
    T.device = property(_global._device)
    T.to_global = T.to_consistent = _global._to_global
    T.to_local = _global._to_local
    T.global_id = _global._global_id
    T.check_meta_consistency = _global._check_meta_consistency
    T._tensor_buffer_shapes_and_dtypes = property(_global._tensor_buffer_meta)
    # The other API modules' methods, in the order that settles names defined twice.
    from oneflow import _index_api, _math_api, _misc
    for module in (_index_api, _misc, _math_api):
        for name, method in module._tensor_methods().items():
            setattr(T, name, method)


class _RemovableHandle:
    """What register_hook returns: remove() unregisters the hook (once)."""

    def __init__(self, tensor, hook_id):
        self._tensor, self.id = tensor, hook_id

    def remove(self):
        if self._tensor is not None:
            self._tensor._remove_hook(self.id)
            self._tensor = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


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


def _rebuild_tensor(raw, shape, dtype_name, requires_grad):
    t = _C.from_bytes(raw, list(shape), getattr(_C, dtype_name))
    if requires_grad:
        t.requires_grad_(True)
    return t

