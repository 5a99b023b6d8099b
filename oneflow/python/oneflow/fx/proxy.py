"""oneflow.fx's Proxy: what a traced forward gets instead of a tensor; each use records a Node.

    x = tracer.proxy(graph.placeholder("x"))
    y = (x + 1).sum(dim=0)      # call_function operator.add, then call_method sum
    bool(y)                     # TraceError: control flow cannot depend on a traced value
"""

import operator


class TraceError(RuntimeError):
    pass


class Proxy:
    """A value of the traced forward: a node of the tracer's graph."""

    def __init__(self, node, tracer):
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "tracer", tracer)

    def __repr__(self):
        return f"Proxy({self.node.name})"

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _Attribute(self, name)

    def __setattr__(self, name, value):
        raise TraceError(f"symbolic_trace: setting attribute {name!r} of a traced value "
                         f"({self.node.name}) cannot be recorded")

    def __call__(self, *args, **kwargs):
        return self.tracer.create_proxy("call_method", "__call__", (self,) + args, kwargs)

    def __bool__(self):
        raise TraceError(f"symbolic_trace: {self.node.name} is a traced value, so it has no "
                         "truth value; control flow cannot depend on it (trace a module whose "
                         "branches do not read inputs, or mark the branching module a leaf)")

    def __iter__(self):
        raise TraceError(f"symbolic_trace: {self.node.name} is a traced value of unknown length; "
                         "it cannot be iterated (index it, or unpack a known count with [i])")

    def __len__(self):
        raise TraceError(f"symbolic_trace: len() of traced value {self.node.name} is unknown "
                         "while tracing; use .shape[...] or .size()")

    def __index__(self):
        raise TraceError(f"symbolic_trace: traced value {self.node.name} cannot be used as a "
                         "Python int while tracing")


class _Attribute(Proxy):
    """proxy.name: a call_method node when called, else a getattr node (made on first use)."""

    def __init__(self, root, attr):
        object.__setattr__(self, "root", root)
        object.__setattr__(self, "attr", attr)
        object.__setattr__(self, "tracer", root.tracer)
        object.__setattr__(self, "_node", None)

    @property
    def node(self):
        if self._node is None:
            node = self.tracer.create_proxy("call_function", getattr, (self.root, self.attr),
                                            {}).node
            object.__setattr__(self, "_node", node)
        return self._node

    def __call__(self, *args, **kwargs):
        return self.tracer.create_proxy("call_method", self.attr, (self.root,) + args, kwargs)


def _binary(op):
    def forward(self, other):
        return self.tracer.create_proxy("call_function", op, (self, other), {})

    def reflected(self, other):
        return self.tracer.create_proxy("call_function", op, (other, self), {})

    return forward, reflected


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_", "or_",
              "xor", "lshift", "rshift"):
    _op = getattr(operator, _name)
    _dunder = _name.rstrip("_")
    _fwd, _ref = _binary(_op)
    setattr(Proxy, f"__{_dunder}__", _fwd)
    setattr(Proxy, f"__r{_dunder}__", _ref)
for _name in ("lt", "le", "gt", "ge", "eq", "ne", "getitem"):
    setattr(Proxy, f"__{_name}__", _binary(getattr(operator, _name))[0])
for _name in ("neg", "pos", "abs", "invert"):
    setattr(Proxy, f"__{_name}__",
            (lambda op: lambda self: self.tracer.create_proxy("call_function", op, (self,), {}))(
                getattr(operator, _name)))
Proxy.__hash__ = object.__hash__
