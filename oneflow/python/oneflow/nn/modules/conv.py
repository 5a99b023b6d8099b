"""Conv2d.

    conv = nn.Conv2d(3, 16, kernel_size=3, padding=1)   # (N, 3, H, W) -> (N, 16, H, W)
"""


import oneflow as flow
from oneflow._api_util import _check_tensor_size, _int_arg
from oneflow.nn import functional as F
from oneflow.nn.modules.conv_extra import _check_conv_args
from oneflow.nn import init
from oneflow.nn.modules.module import Module
from oneflow.nn.parameter import Parameter


def _as_pair(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value, value)


class Conv2d(Module):
    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        bias=True,
        padding_mode="zeros",
        device=None,
        dtype=None,
    ):
        super().__init__()
        in_channels = _int_arg(in_channels, "Conv2d", "in_channels", 1)
        out_channels = _int_arg(out_channels, "Conv2d", "out_channels", 1)
        groups = _int_arg(groups, "Conv2d", "groups", 1)
        if in_channels % groups != 0:
            raise ValueError(f"Conv2d: in_channels ({in_channels}) must be divisible by groups ({groups})")
        if out_channels % groups != 0:
            raise ValueError(f"Conv2d: out_channels ({out_channels}) must be divisible by groups ({groups})")
        if padding_mode != "zeros":
            raise ValueError(f"Conv2d: only padding_mode='zeros' is supported, got {padding_mode!r}")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Conv2d: padding must be 'valid', 'same' or ints, got {padding!r}")
            if padding == "same" and _as_pair(stride) != (1, 1):
                raise ValueError("Conv2d: padding='same' is not supported for strided convolutions")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _as_pair(kernel_size)
        self.stride = _as_pair(stride)
        self.padding = padding if isinstance(padding, str) else _as_pair(padding)
        self.dilation = _as_pair(dilation)
        self.groups = groups
        self.padding_mode = padding_mode
        _check_conv_args("Conv2d", self.kernel_size, self.stride, self.padding, self.dilation)
        _check_tensor_size("Conv2d", (out_channels, in_channels // groups) + self.kernel_size, dtype)
        self.weight = Parameter(
            flow.empty(out_channels, in_channels // groups, *self.kernel_size, dtype=dtype, device=device)
        )
        if bias:
            self.bias = Parameter(flow.empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init._reset_weight_and_bias_(self.weight, self.bias)  # PyTorch's defaults

    def forward(self, input):
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s
