"""Flatten and Dropout."""

from oneflow.nn import functional as F
from oneflow.nn.modules.module import Module


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Dropout(Module):
    def __init__(self, p=0.5, inplace=False, generator=None):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"Dropout: probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace
        self.generator = generator

    def forward(self, input, addend=None):
        # Identity in eval mode; the kernel checks self.training. addend: OneFlow's fused add.
        return F.dropout(input, self.p, self.training, self.inplace, self.generator, addend)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"
