"""Parameter: a leaf tensor that a Module registers as trainable state.

    w = nn.Parameter(flow.randn(3, 4))   # shares storage with the data, requires_grad=True
    isinstance(w, flow.Tensor)            # True
"""

from oneflow._parameter import Parameter, _rebuild_parameter  # noqa: F401
