"""Random numbers: flow.Generator and the default stream, the seed functions and the random
creation functions (rand, randn, randint, randperm, normal and their *_like).

    flow.manual_seed(0); a = flow.randn(2, 3)
    g = flow.Generator().manual_seed(0); b = flow.randn(2, 3, generator=g)   # a's values
"""

import builtins
import contextlib
import os
import threading

import oneflow._oneflow_internal as _C
from oneflow._api_util import _finish, _floating_default, _size
from oneflow._creation import _like, tensor

Tensor = _C.Tensor

__all__ = [
    "Generator", "default_generator", "manual_seed", "initial_seed", "seed", "rand", "randn",
    "rand_like", "randn_like", "randint", "randint_like", "randperm", "normal",
]


class Generator:
    """A random stream of its own: flow.randn(..., generator=g) draws from g and leaves the
    default stream (flow.manual_seed's) where it was. Every stream is a (seed, counter) pair of
    the same counter-based generator, so g.manual_seed(s) then a draw gives the numbers that
    flow.manual_seed(s) then the same draw gives (also for global tensors: every rank draws the
    logical value and keeps its own part)."""

    _DEFAULT_SEED = 67280421310721  # OneFlow's and PyTorch's default seed

    def __init__(self, device="cpu"):
        # "auto" (OneFlow): one generator for whichever device draws from it; every stream here
        # is device-independent already, so it is the CPU one.
        if device == "auto":
            device = "cpu"
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
    with _drawing_from(generator, "normal"):  # one tensor of the size (a shard's, if global)
        z = _C.normal(_size((size,), "normal"), builtins.float(mean), builtins.float(std), dtype,
                      device)
    return _finish(z, requires_grad)


_seedings = 0  # manual_seed calls so far: DataLoader workers' seeds restart with each


def manual_seed(seed):
    global _seedings
    _C.manual_seed(builtins.int(seed) & 0xFFFFFFFFFFFFFFFF)
    _seedings += 1


def initial_seed():
    return _C.initial_seed()


def seed():
    return _C.initial_seed()
