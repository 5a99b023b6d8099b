"""Grad mode: no_grad, enable_grad, set_grad_enabled, inference_mode (context managers and
decorators) and their queries.

    with flow.no_grad():
        y = model(x)            # records no graph
"""

import builtins
import functools

import oneflow._oneflow_internal as _C

__all__ = [
    "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
    "is_inference_mode_enabled",
]


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
