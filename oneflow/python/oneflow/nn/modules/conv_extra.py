"""Conv1d, Conv3d, ConvTranspose1d and ConvTranspose2d, with PyTorch's parameter shapes and defaults.

    conv = nn.Conv1d(4, 8, kernel_size=3, padding="same")      # (N, 4, L) -> (N, 8, L)
    up = nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1)      # (N, 8, H, W) -> (N, 4, 2H, 2W)
"""


import oneflow as flow
from oneflow._api_util import _check_tensor_size, _int_arg
from oneflow.nn import functional as F
from oneflow.nn import init
from oneflow.nn.modules.module import Module
from oneflow.nn.parameter import Parameter


def _check_conv_args(name, kernel_size, stride, padding, dilation):
    """kernel_size, stride and dilation positive ints, padding non-negative ones (or a string),
    each within int64: one line naming the module and the argument."""
    for what, values, low in (("kernel_size", kernel_size, 1), ("stride", stride, 1),
                              ("dilation", dilation, 1),
                              ("padding", () if isinstance(padding, str) else padding, 0)):
        for v in values:
            _int_arg(v, name, what, low)


def _tuple(value, n):
    if isinstance(value, (tuple, list)):
        return tuple(value)
    return (value,) * n


class _ConvNd(Module):
    _name = "Conv"
    _dims = 1
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                 bias, padding_mode, output_padding=0, device=None, dtype=None):
        super().__init__()
        name, n = self._name, self._dims
        in_channels = _int_arg(in_channels, name, "in_channels", 1)
        out_channels = _int_arg(out_channels, name, "out_channels", 1)
        groups = _int_arg(groups, name, "groups", 1)
        if in_channels % groups != 0:
            raise ValueError(f"{name}: in_channels ({in_channels}) must be divisible by groups ({groups})")
        if out_channels % groups != 0:
            raise ValueError(f"{name}: out_channels ({out_channels}) must be divisible by groups ({groups})")
        modes = ("zeros",) if self._transposed else ("zeros", "reflect", "replicate")
        if padding_mode not in modes:
            raise ValueError(
                f"{name}: padding_mode must be {' or '.join(repr(m) for m in modes)}, got {padding_mode!r}"
            )
        if isinstance(padding, str):
            if self._transposed:
                raise ValueError(f"{name}: padding must be ints, got {padding!r}")
            if padding not in ("same", "valid"):
                raise ValueError(f"{name}: padding must be 'valid', 'same' or ints, got {padding!r}")
            if padding == "same" and _tuple(stride, n) != (1,) * n:
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _tuple(kernel_size, n)
        self.stride = _tuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _tuple(padding, n)
        self.dilation = _tuple(dilation, n)
        self.output_padding = _tuple(output_padding, n)
        self.groups = groups
        self.padding_mode = padding_mode
        if self._transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        _check_conv_args(name, self.kernel_size, self.stride, self.padding, self.dilation)
        _check_tensor_size(name, shape, dtype)
        self.weight = Parameter(flow.empty(*shape, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(flow.empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init._reset_weight_and_bias_(self.weight, self.bias)  # PyTorch's defaults

    def extra_repr(self):
        n = self._dims
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    _name = "Conv1d"
    _dims = 1

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                         bias, padding_mode, device=device, dtype=dtype)

    def forward(self, input):
        if self.padding_mode != "zeros":
            if isinstance(self.padding, str):
                if self.padding == "valid":
                    p = 0
                else:
                    total = self.dilation[0] * (self.kernel_size[0] - 1)
                    input = F.pad(input, [total // 2, total - total // 2], mode=self.padding_mode)
                    return F.conv1d(input, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
            else:
                p = self.padding[0]
            input = F.pad(input, [p, p], mode=self.padding_mode)
            return F.conv1d(input, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return F.conv1d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Conv3d(_ConvNd):
    """Over (N, C, D, H, W) or (C, D, H, W) inputs (F.conv3d)."""

    _name = "Conv3d"
    _dims = 3

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                         bias, padding_mode, device=device, dtype=dtype)

    def forward(self, input):
        padding = self.padding
        if self.padding_mode != "zeros" and padding not in ("valid", (0, 0, 0)):
            if padding == "same":
                totals = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
                pads = [t // 2 for t in totals], [t - t // 2 for t in totals]
            else:
                pads = list(padding), list(padding)
            flat = []
            for i in reversed(range(3)):
                flat += [pads[0][i], pads[1][i]]
            input = F.pad(input, flat, mode=self.padding_mode)
            padding = 0
        return F.conv3d(input, self.weight, self.bias, self.stride, padding, self.dilation,
                        self.groups)


def _output_padding(name, input, output_size, stride, padding, kernel_size, dilation, n):
    """PyTorch's ConvTranspose*d output_size= argument, turned into output_padding."""
    output_size = list(output_size)
    if len(output_size) == n + 2:
        output_size = output_size[2:]
    elif len(output_size) == n + 1 and input.dim() == n + 1:
        output_size = output_size[1:]
    if len(output_size) != n:
        raise ValueError(f"{name}: output_size must have {n} or {n + 2} elements, got {len(output_size)}")
    result = []
    for d in range(n):
        in_size = input.size(input.dim() - n + d)
        min_size = (in_size - 1) * stride[d] - 2 * padding[d] + dilation[d] * (kernel_size[d] - 1) + 1
        max_size = min_size + stride[d] - 1
        if not min_size <= output_size[d] <= max_size:
            raise ValueError(
                f"{name}: requested an output size of {tuple(output_size)}, but valid sizes range "
                f"from {min_size} to {max_size} in dimension {d} (for an input of {tuple(input.shape)})"
            )
        result.append(output_size[d] - min_size)
    return result


class _ConvTransposeNd(_ConvNd):
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1, bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                         bias, padding_mode, output_padding, device=device, dtype=dtype)

    def forward(self, input, output_size=None):
        op = self.output_padding
        if output_size is not None:
            op = _output_padding(self._name, input, output_size, self.stride, self.padding,
                                 self.kernel_size, self.dilation, self._dims)
        conv = getattr(F, f"conv_transpose{self._dims}d")
        return conv(input, self.weight, self.bias, self.stride, self.padding, op, self.groups,
                    self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    _name = "ConvTranspose1d"
    _dims = 1


class ConvTranspose2d(_ConvTransposeNd):
    _name = "ConvTranspose2d"
    _dims = 2