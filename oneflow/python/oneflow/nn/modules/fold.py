"""nn.Unfold and nn.Fold (im2col and col2im), over F.unfold / F.fold:

    nn.Unfold(kernel_size=3, padding=1)(x)                  # (N, C, H, W) -> (N, C*9, H*W)
    nn.Fold(output_size=(8, 8), kernel_size=3, padding=1)(cols)
"""

from oneflow.nn import functional as F
from oneflow.nn.modules.module import Module


class Unfold(Module):
    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size, self.dilation = output_size, kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")
