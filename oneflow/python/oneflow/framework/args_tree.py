"""oneflow.framework.args_tree: walk and rebuild nested arguments (tuples, lists and dicts of
tensors and other values), at OneFlow's module path. Containers are the plain tuple, list, dict
and OrderedDict types and the package's (values, indices) results; anything else is a leaf.

    tree = ArgsTree((x, [y, {"z": z}]))
    [n for n in tree.iter_nodes() if isinstance(n, flow.Tensor)]      # [x, y, z]
    tree.map_leaf(lambda v: v.to_global(placement=P, sbp=B) if isinstance(v, flow.Tensor) else v)

With gen_name=True the nodes are NamedArg values that carry a dotted path (prefix), a name (the
dict key, else the node's index in walking order) and the index, for naming graph inputs.
"""

from collections import OrderedDict

import oneflow


def _is_sequence(value):
    kind = type(value)
    if kind in (tuple, list):
        return True
    # (values, indices) results such as x.max(dim=1): tuples of the package's own classes
    return isinstance(value, tuple) and kind.__module__.split(".")[0] == "oneflow"


def _is_mapping(value):
    return type(value) in (dict, OrderedDict)


def _children(value):
    if _is_sequence(value):
        return list(value)
    if _is_mapping(value):
        return list(value.values())
    return None


def _rebuild(value, parts):
    """A container of value's type holding parts (in value's order)."""
    if _is_mapping(value):
        return type(value)(zip(value.keys(), parts))
    return type(value)(parts)


class NamedArg:
    """One node of an ArgsTree built with gen_name: its value (a leaf, or a container of
    NamedArgs), where it sits (prefix), its name and its index in walking order."""

    def __init__(self, prefix="", name=None, global_index=0, tensor_type=None):
        self._prefix = prefix
        self._name = str(global_index) if name is None else name
        self._global_index = global_index
        self._tensor_type = tensor_type or oneflow.Tensor
        self._has_value = False
        self._value = None

    def prefix(self):
        return self._prefix

    def name(self):
        return self._name

    def global_index(self):
        return self._global_index

    def set_value(self, value):
        if isinstance(value, NamedArg):
            raise TypeError(f"NamedArg.set_value: expected a value, got the NamedArg {value!r}")
        self._value, self._has_value = value, True

    def value(self):
        if not self._has_value:
            raise RuntimeError(f"NamedArg {self._name}: value() before set_value()")
        return self._value

    def is_leaf(self):
        return _children(self.value()) is None

    def _kind(self):
        v = self._value
        if _is_sequence(v):
            return "LIST" if isinstance(v, list) else "TUPLE"
        if _is_mapping(v):
            return "DICT"
        if isinstance(v, self._tensor_type):
            return "TENSOR"
        return "NONE" if v is None else "OPAQUE"

    def __repr__(self):
        v = self._value
        shown = (f"tensor({v.shape}, {v.dtype})" if isinstance(v, self._tensor_type) else repr(v))
        return f"(name: {self._name}, idx: {self._global_index}, type: {self._kind()}, value: {shown})"


class ArgsTree:
    """The nested arguments io_args seen as a tree (see the module's docstring)."""

    def __init__(self, io_args, gen_name=False, root_prefix="", root_name=None, tensor_type=None):
        self._io_args = io_args
        self._gen_name = bool(gen_name)
        self._tensor_type = tensor_type or oneflow.Tensor
        self._named_io_args = None
        if self._gen_name:
            counter = iter(range(1 << 62))
            self._named_io_args = self._name_nodes(io_args, root_prefix, root_name, counter)

    def gen_name(self):
        return self._gen_name

    def _name_nodes(self, value, prefix, name, counter):
        node = NamedArg(prefix, name, next(counter), self._tensor_type)
        children = _children(value)
        if children is None:
            node.set_value(value)
            return node
        keys = list(value.keys()) if _is_mapping(value) else [None] * len(children)
        named = [self._name_nodes(child, f"{prefix}.{i}" if prefix else str(i), key, counter)
                 for i, (key, child) in enumerate(zip(keys, children))]
        node.set_value(_rebuild(value, named))
        return node

    def _root(self):
        return self._named_io_args if self._gen_name else self._io_args

    def iter_nodes(self):
        """Every node, containers before their contents (depth first, in order), the root
        first; NamedArg nodes when the tree was built with gen_name."""
        pending = [self._root()]
        while pending:
            node = pending.pop()
            yield node
            value = node.value() if isinstance(node, NamedArg) else node
            children = _children(value)
            if children:
                pending.extend(reversed(children))

    def iter_named_nodes(self):
        """(prefix_name, NamedArg) for every node; only for a tree built with gen_name."""
        if not self._gen_name:
            raise RuntimeError("ArgsTree.iter_named_nodes: the tree was built without gen_name=True")
        for node in self.iter_nodes():
            yield f"{node.prefix()}_{node.name()}", node

    def map_leaf(self, map_function):
        """The arguments rebuilt with every leaf replaced by map_function(leaf) (the leaf's
        NamedArg when the tree was built with gen_name)."""
        if map_function is None:
            raise TypeError("ArgsTree.map_leaf: map_function must be callable, got None")
        return self._map(self._root(), map_function)

    def map_tuple_leaf(self, map_function):
        """map_leaf for arguments that are a tuple or a list (function inputs and outputs)."""
        if not isinstance(self._io_args, (tuple, list)):
            raise TypeError(f"ArgsTree.map_tuple_leaf: expected tuple or list arguments, got "
                            f"{type(self._io_args).__name__}")
        if map_function is None:
            raise TypeError("ArgsTree.map_tuple_leaf: map_function must be callable, got None")
        return self._map(self._io_args, map_function)

    def _map(self, value, fn):
        if isinstance(value, NamedArg):
            return fn(value) if value.is_leaf() else self._map(value.value(), fn)
        children = _children(value)
        if children is None:
            return fn(value)
        return _rebuild(value, [self._map(c, fn) for c in children])

    def __repr__(self):
        return repr(self._named_io_args) if self._gen_name else f"ArgsTree({self._io_args!r})"
