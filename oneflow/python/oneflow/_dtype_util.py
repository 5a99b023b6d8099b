"""Small dtype helpers shared by the Python layers (the binding's dtype has only a name).

    _dtype_util.dtype_name(oneflow.float32)   # "float32"
    _dtype_util.is_floating(oneflow.int64)    # False
    _dtype_util.is_complex(oneflow.complex64)  # True
"""

_FLOATING = ("float16", "bfloat16", "float32", "float64")
_COMPLEX = ("complex64", "complex128")


def dtype_name(dtype):
    # str(oneflow.float32) is "oneflow.float32"; keep the part after the module.
    return str(dtype).rsplit(".", 1)[-1]


def is_floating(dtype):
    return dtype_name(dtype) in _FLOATING


def is_complex(dtype):
    return dtype_name(dtype) in _COMPLEX


_ALL = ("bool", "uint8", "int8", "int32", "int64") + _FLOATING + _COMPLEX


def dtype_by_name(name):
    """The dtype called name ("float32"); a ValueError for any other string (names read from
    files go through here, so a file cannot reach other attributes of the module)."""
    import oneflow

    if name not in _ALL:
        raise ValueError(f"unknown dtype {str(name)[:40]!r}")
    return getattr(oneflow, name)
