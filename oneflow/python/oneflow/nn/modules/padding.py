"""Padding layers over F.pad: ConstantPad1d/2d/3d, ZeroPad2d, ReflectionPad1d/2d/3d,
ReplicationPad1d/2d/3d. padding is an int (every side) or PyTorch's tuple, last dim first.

    nn.ReflectionPad2d((1, 1, 2, 0))(x)   # pads W by 1 left and right, H by 2 on top
"""

from oneflow._api_util import INT64_MAX, _int_arg
from oneflow.nn import functional as F
from oneflow.nn.modules.module import Module


class _PadNd(Module):
    _dims = 2
    _mode = "constant"

    def __init__(self, padding, value=0.0):
        super().__init__()
        n = 2 * self._dims
        name = type(self).__name__
        if isinstance(padding, int) and not isinstance(padding, bool):
            padding = (padding,) * n
        elif not (isinstance(padding, (tuple, list)) and len(padding) == n
                  and all(isinstance(p, int) and not isinstance(p, bool) for p in padding)):
            raise TypeError(f"{name}: padding must be an int or a tuple of {n} ints, got {padding!r}")
        for p in padding:
            _int_arg(p, name, "padding", -INT64_MAX)
        self.padding = tuple(padding)
        self.value = value

    def forward(self, input):
        if self._mode == "constant":
            return F.pad(input, list(self.padding), "constant", self.value)
        return F.pad(input, list(self.padding), self._mode)

    def extra_repr(self):
        if self._mode == "constant":
            return f"padding={self.padding}, value={self.value}"
        return f"{self.padding}"


class ConstantPad1d(_PadNd):
    _dims = 1

    def __init__(self, padding, value):
        super().__init__(padding, value)


class ConstantPad2d(_PadNd):
    _dims = 2

    def __init__(self, padding, value):
        super().__init__(padding, value)


class ConstantPad3d(_PadNd):
    _dims = 3

    def __init__(self, padding, value):
        super().__init__(padding, value)


class ZeroPad2d(_PadNd):
    _dims = 2

    def __init__(self, padding):
        super().__init__(padding, 0.0)


class ReflectionPad1d(_PadNd):
    _dims, _mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    _dims, _mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    _dims, _mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    _dims, _mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    _dims, _mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    _dims, _mode = 3, "replicate"
