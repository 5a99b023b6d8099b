"""Pooling layers: MaxPool1d/2d/3d, AvgPool1d/2d/3d, AdaptiveAvgPool1d/2d/3d, MaxUnpool1d/2d/3d."""

from oneflow.nn import functional as F
from oneflow.nn.modules.module import Module


class MaxPool2d(Module):
    _indices = True  # return_indices=True gives (values, flat positions in each plane)
    def __init__(
        self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False
    ):
        super().__init__()
        if return_indices and not self._indices:
            raise ValueError(f"{type(self).__name__}: return_indices=True is not supported")
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)

    def extra_repr(self):
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class AvgPool2d(Module):
    def __init__(
        self,
        kernel_size,
        stride=None,
        padding=0,
        ceil_mode=False,
        count_include_pad=True,
        divisor_override=None,
    ):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        return F.avg_pool2d(
            input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
            self.divisor_override,
        )

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class MaxPool1d(MaxPool2d):
    """Over (N, C, L) or (C, L) inputs."""

    def forward(self, input):
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)


class MaxPool3d(MaxPool2d):
    """Over (N, C, D, H, W) or (C, D, H, W) inputs."""

    _indices = False

    def forward(self, input):
        return F.max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode)


class AvgPool1d(AvgPool2d):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):  # PyTorch's and OneFlow's: no divisor_override
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)

    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


class AvgPool3d(AvgPool2d):
    def forward(self, input):
        return F.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class AdaptiveAvgPool1d(AdaptiveAvgPool2d):
    def forward(self, input):
        return F.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveAvgPool3d(AdaptiveAvgPool2d):
    def forward(self, input):
        return F.adaptive_avg_pool3d(input, self.output_size)


class MaxUnpool1d(Module):
    """The inverse of MaxPool1d(return_indices=True): forward(input, indices, output_size=None)."""

    _fn = "max_unpool1d"

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, input, indices, output_size=None):
        return getattr(F, self._fn)(input, indices, self.kernel_size, self.stride, self.padding,
                                    output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool2d(MaxUnpool1d):
    _fn = "max_unpool2d"


class MaxUnpool3d(MaxUnpool1d):
    _fn = "max_unpool3d"
