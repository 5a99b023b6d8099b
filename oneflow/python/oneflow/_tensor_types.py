"""The legacy typed constructors, OneFlow's (and PyTorch's) flow.FloatTensor, flow.LongTensor,
..., flow.cuda.FloatTensor, ...: each takes flow.Tensor's arguments (sizes, or data to copy,
with requires_grad= and, on the CPU ones, placement= / sbp=) and gives a tensor of its dtype on
its device; isinstance(x, flow.FloatTensor) asks for that dtype and device type.

    flow.LongTensor([1.7, -2.2])          # tensor([ 1, -2], dtype=oneflow.int64)
    flow.FloatTensor(2, 3)                # zeros of shape (2, 3)
    isinstance(flow.ones(2), flow.FloatTensor)   # True
"""

import oneflow._oneflow_internal as _C

Tensor = _C.Tensor

# (name, dtype) of every typed constructor; each has a CPU and a CUDA form.
_TYPES = (
    ("BoolTensor", _C.bool), ("ByteTensor", _C.uint8), ("CharTensor", _C.int8),
    ("IntTensor", _C.int32), ("LongTensor", _C.int64), ("HalfTensor", _C.float16),
    ("BFloat16Tensor", _C.bfloat16), ("FloatTensor", _C.float32), ("DoubleTensor", _C.float64),
    ("ComplexFloatTensor", _C.complex64), ("ComplexDoubleTensor", _C.complex128),
)


def _device_type(t):
    return t.placement.type if t.is_global else t._device.type


class _TensorType(type):
    """The class of flow.FloatTensor & co: calling one builds a tensor of its dtype and device
    type; isinstance checks both."""

    def __call__(cls, *args, **kwargs):
        name = f"{cls.__module__}.{cls.__qualname__}"
        for key in ("dtype", "device"):
            if key in kwargs:
                raise TypeError(f"{name}: the {key} is {getattr(cls, key)}, so {key}= is not "
                                f"accepted (got {key}={kwargs[key]!r})")
        if cls.device != "cpu" and ("placement" in kwargs or "sbp" in kwargs):
            raise TypeError(f"{name}: a CUDA type takes no placement= or sbp=; give them to "
                            f"oneflow.{cls.__name__} with a cuda placement")
        if len(args) == 1 and isinstance(args[0], str):
            raise TypeError(f"{name}: expected sizes or data (a list, array or tensor), got the "
                            f"string {args[0]!r}")
        if cls.device == "cpu":
            return Tensor(*args, dtype=cls.dtype, **kwargs)
        if _C.cuda_device_count() == 0:
            raise RuntimeError(f"{name}: CUDA is not available ({_C.cuda_unavailable()})")
        requires_grad = kwargs.pop("requires_grad", False)
        t = Tensor(*args, dtype=cls.dtype, **kwargs)._to_device(cls.device)
        return t.requires_grad_(True) if requires_grad else t

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype and \
            _device_type(obj) == cls.device

    def __repr__(cls):
        return f"<class '{cls.__module__}.{cls.__qualname__}'>"


def _make(name, dtype, device, module):
    return _TensorType(name, (), {"dtype": dtype, "device": device, "__module__": module,
                                  "__qualname__": name,
                                  "__doc__": f"A {dtype} tensor on {device} (legacy constructor)."})


cpu_types = {name: _make(name, dtype, "cpu", "oneflow") for name, dtype in _TYPES}
cuda_types = {name: _make(name, dtype, "cuda", "oneflow.cuda") for name, dtype in _TYPES}
__all__ = sorted(cpu_types)
globals().update(cpu_types)


def type_name(t):
    """x.type()'s answer: 'oneflow.FloatTensor', 'oneflow.cuda.LongTensor', ..."""
    for name, dtype in _TYPES:
        if t.dtype == dtype:
            return f"oneflow.{'cuda.' if _device_type(t) == 'cuda' else ''}{name}"
    raise TypeError(f"type: no legacy type name for dtype {t.dtype}")


def by_name(text):
    """The type called text ('oneflow.FloatTensor', 'torch.cuda.LongTensor', 'FloatTensor')."""
    parts = text.split(".")
    types = cuda_types if len(parts) > 1 and parts[-2] == "cuda" else cpu_types
    if parts[-1] not in types or parts[0] not in ("oneflow", "torch", parts[-1]):
        raise ValueError(f"type: unknown tensor type {text!r}; expected a name such as "
                         f"'oneflow.FloatTensor' or 'oneflow.cuda.LongTensor'")
    return types[parts[-1]]
