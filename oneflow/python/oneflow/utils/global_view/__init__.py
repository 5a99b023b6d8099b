"""oneflow.utils.global_view: global tensors for whole structures, as in OneFlow.

    sd = flow.utils.global_view.to_global(model.state_dict(), placement=P, sbp=flow.sbp.broadcast)
    local = flow.utils.global_view.to_local(sd)          # the same structure, local tensors
    with flow.utils.global_view.global_mode(True, placement=P, sbp=B):
        x = flow.randn(4, 4)                              # global on P with sbp B

to_global / to_local walk dicts, lists and tuples (nested) and convert each tensor; anything
else is kept as it is (with a warning, as OneFlow does). sbp may be a function
sbp(input, tensor) choosing each tensor's sbp. Every rank calls them with the same structure.
"""

import warnings

import oneflow as flow
from oneflow import _global

__all__ = ["to_global", "to_local", "global_mode", "current_global_mode"]


def _map(input, fn):
    if isinstance(input, flow.Tensor):
        return fn(input)
    if isinstance(input, dict):
        out = type(input)() if type(input) is not dict else {}
        for k, v in input.items():
            out[k] = _map(v, fn)
        return out
    if isinstance(input, tuple) and hasattr(input, "_fields"):  # namedtuple
        return type(input)(*[_map(v, fn) for v in input])
    if isinstance(input, (list, tuple)):
        return type(input)(_map(v, fn) for v in input)
    if input is not None:
        warnings.warn(f"global_view: a {type(input).__name__} is not a tensor, it stays the same")
    return input


def _tensors(input):
    found = []

    def grab(t):
        found.append(t)
        return t
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _map(input, grab)
    return found


def to_global(input, placement=None, sbp=None, **kwargs):
    """input (a tensor, or dicts / lists / tuples holding tensors) with every tensor global:
    local ones through Tensor.to_global (placement and sbp both needed), global ones laid out
    anew (placement or sbp may be left out: the tensor's own). sbp: an sbp, a tuple of them, or
    a function sbp(input, tensor) returning one."""
    tensors = _tensors(input)
    if tensors:
        kinds = {t.is_global for t in tensors}
        if len(kinds) > 1:
            raise ValueError("global_view.to_global: the tensors of the input must be all local "
                             "or all global, got both")
        if kinds == {False} and (placement is None or sbp is None):
            raise ValueError("global_view.to_global: local tensors need both placement and sbp, "
                             f"got placement={placement!r}, sbp={sbp!r}")

    def convert(t):
        s = sbp(input, t) if callable(sbp) and not isinstance(sbp, _global.sbp.sbp) else sbp
        return t.to_global(placement=placement, sbp=s, **kwargs)
    return _map(input, convert)


def to_local(input, *, copy=False):
    """input with every global tensor replaced by this rank's local part (Tensor.to_local);
    local tensors stay as they are (with a warning)."""
    def convert(t):
        if not t.is_global:
            warnings.warn("global_view.to_local: a local tensor stays the same")
            return t
        return t.to_local(copy=copy)
    return _map(input, convert)


class global_mode:
    """with global_mode(True, placement=P, sbp=S): creation functions without placement / sbp
    / device (flow.randn(2, 3), flow.zeros(...), ...) build global tensors on P with S, and
    .device of a global tensor gives its placement's device type. global_mode(False) turns it
    off inside an enabled one. Scopes nest."""

    def __init__(self, enabled, placement=None, sbp=None):
        if enabled:
            if placement is None or sbp is None:
                raise ValueError("global_mode: an enabled global mode needs placement and sbp, "
                                 f"got placement={placement!r}, sbp={sbp!r}")
            if not isinstance(placement, flow.placement):
                raise TypeError(f"global_mode: placement must be a flow.placement, got "
                                f"{placement!r}")
            sbp = _global._sbp_tuple(sbp, len(placement.hierarchy), "global_mode")
        self._state = (placement, sbp) if enabled else None
        self._saved = []

    def __enter__(self):
        self._saved.append(_global._mode[0])
        _global._mode[0] = self._state
        return self

    def __exit__(self, *exc):
        _global._mode[0] = self._saved.pop()
        return False


class current_global_mode:
    """The global mode in force: is_enabled, placement and sbp (None when disabled)."""

    def __init__(self):
        state = _global._mode[0]
        self._placement, self._sbp = state if state is not None else (None, None)
        self._enabled = state is not None

    @property
    def is_enabled(self):
        return self._enabled

    @property
    def placement(self):
        return self._placement

    @property
    def sbp(self):
        return self._sbp
