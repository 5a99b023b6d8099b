"""How many times any Module got a parameter, buffer or submodule assigned, replaced or deleted,
or a graph switch set (nn.graph.GraphModule): nn.Graph compares it once per call to know whether
a compiled plan may hold tensors its modules no longer have. A leaf: it imports nothing."""

_count = [0]


def bump():
    _count[0] += 1


def count():
    return _count[0]
