"""Parameter: a leaf tensor that a Module registers as trainable state (oneflow.nn.Parameter).

    w = nn.Parameter(flow.randn(3, 4))   # shares storage with the data, requires_grad=True
    isinstance(w, flow.Tensor)            # True
"""

import oneflow as flow
from oneflow import _tensor_str


class Parameter(flow.Tensor):
    """(Its home is oneflow._parameter so that the checkpoint modules can use it without
    importing oneflow.nn, whose Module imports them.)"""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = flow.empty(0)
        # The binding builds an instance of cls as a new leaf over data's storage.
        return flow.Tensor._make_subclass(cls, data, requires_grad)

    def __init__(self, data=None, requires_grad=True):
        # __new__ built the tensor already; the base __init__ must not run again.
        pass

    def __repr__(self):
        return "Parameter containing:\n" + _tensor_str._repr(self)

    __str__ = __repr__

    def __deepcopy__(self, memo):
        # copy.deepcopy(model) must give independent parameters, still Parameters.
        if id(self) in memo:
            return memo[id(self)]
        result = type(self)(self.detach().clone(), self.requires_grad)
        memo[id(self)] = result
        return result

    def __reduce_ex__(self, protocol):
        # Plain pickle (oneflow.save does not come here: it replaces tensors itself).
        return (_rebuild_parameter, (self.detach().clone(), self.requires_grad))


def _rebuild_parameter(data, requires_grad):
    return Parameter(data, requires_grad)


Parameter.__module__ = "oneflow.nn.parameter"  # where users name it
