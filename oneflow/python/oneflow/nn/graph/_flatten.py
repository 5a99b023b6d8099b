"""A graph call's arguments and outputs as a flat tensor list and a hashable template (the
compile key, the micro-batches' cuts, the replay's outputs put back in their structure).

    tensors = []
    template = _flatten((args, kwargs), tensors)      # tensors -> _Leaf(i)
    args, kwargs = _unflatten(template, tensors)
"""

import oneflow._oneflow_internal as _C


class _Leaf:
    """Where the i-th tensor of a flattened structure goes back."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index

    def __eq__(self, other):
        return isinstance(other, _Leaf) and other.index == self.index

    def __hash__(self):
        return hash(("leaf", self.index))


def _flatten(value, tensors):
    """value with each tensor replaced by a _Leaf (tensors appended); tuples stay hashable."""
    if isinstance(value, _C.Tensor):
        tensors.append(value)
        return _Leaf(len(tensors) - 1)
    if isinstance(value, (list, tuple)):
        items = tuple(_flatten(v, tensors) for v in value)
        return items if isinstance(value, tuple) else ("__list__",) + items
    if isinstance(value, dict):
        return ("__dict__",) + tuple((k, _flatten(v, tensors)) for k, v in value.items())
    return value


def _unflatten(template, tensors):
    if isinstance(template, _Leaf):
        return tensors[template.index]
    if isinstance(template, tuple):
        if template[:1] == ("__list__",):
            return [_unflatten(v, tensors) for v in template[1:]]
        if template[:1] == ("__dict__",):
            return {k: _unflatten(v, tensors) for k, v in template[1:]}
        return tuple(_unflatten(v, tensors) for v in template)
    return template


def _hashable(key):
    try:
        hash(key)
        return key
    except TypeError:
        return repr(key)
