"""Linear and Identity layers.

    fc = nn.Linear(784, 10)     # y = x @ weight.T + bias, weight (10, 784)
"""


import oneflow as flow
from oneflow._api_util import _check_tensor_size, _int_arg
from oneflow.nn import functional as F
from oneflow.nn import init
from oneflow.nn.modules.module import Module
from oneflow.nn.parameter import Parameter


class Identity(Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        in_features = _int_arg(in_features, "Linear", "in_features")
        out_features = _int_arg(out_features, "Linear", "out_features")
        _check_tensor_size("Linear", (out_features, in_features), dtype)
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(flow.empty(out_features, in_features, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(flow.empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        # PyTorch's defaults, so that models train the same as their PyTorch originals.
        init._reset_weight_and_bias_(self.weight, self.bias)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )
