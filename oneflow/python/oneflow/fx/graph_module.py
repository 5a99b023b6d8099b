"""oneflow.fx's GraphModule: an nn.Module whose forward is generated from a Graph.

    gm = GraphModule(model, graph)   # keeps the submodules and attributes the graph names
    gm.graph.erase_node(...); gm.recompile()   # forward follows the edited graph
    print(gm.code)

The submodules and tensors the graph's call_module / get_attr nodes name are taken from the root
(a Module, or a dict of path -> object) at the same dotted paths (the tracer's constants from the
graph); intermediate paths become plain
Modules. Each GraphModule has its own class, so that recompile() can give it a new forward.
"""

from oneflow.nn.modules import module as module_lib
from oneflow.fx.graph import Graph


def _lookup(root, path):
    if isinstance(root, dict):
        if path not in root:
            raise KeyError(f"fx.GraphModule: the graph names {path!r}, which the root dict lacks")
        return root[path]
    obj = root
    for part in path.split("."):
        if not hasattr(obj, part):
            raise AttributeError(f"fx.GraphModule: the graph names {path!r}, but "
                                 f"{type(obj).__name__} has no attribute {part!r}")
        obj = getattr(obj, part)
    return obj


def _assign(owner, path, value):
    *parents, last = path.split(".")
    for part in parents:
        child = owner.__dict__.get("_modules", {}).get(part)
        if child is None:
            child = module_lib.Module()
            setattr(owner, part, child)
        owner = child
    if isinstance(value, module_lib.Module) or _is_parameter(value):
        setattr(owner, last, value)
    elif _is_tensor(value):
        owner.register_buffer(last, value)
    else:
        object.__setattr__(owner, last, value)


def _is_tensor(v):
    import sys

    return isinstance(v, sys.modules["oneflow"].Tensor)


def _is_parameter(v):
    from oneflow.nn.parameter import Parameter

    return isinstance(v, Parameter)


class GraphModule(module_lib.Module):
    def __new__(cls, *args, **kwargs):
        # A class of its own per instance: recompile() sets forward on it.
        own = type(cls.__name__, (cls,), {})
        return super().__new__(own)

    def __init__(self, root, graph, class_name="GraphModule"):
        super().__init__()
        if not isinstance(graph, Graph):
            raise TypeError(f"fx.GraphModule: graph must be an fx.Graph, got {type(graph).__name__}")
        if not isinstance(root, (module_lib.Module, dict)):
            raise TypeError(f"fx.GraphModule: root must be an nn.Module or a dict, got "
                            f"{type(root).__name__}")
        type(self).__name__ = class_name
        if isinstance(root, module_lib.Module):
            self.training = root.training
        for node in graph.nodes:
            if node.op in ("get_attr", "call_module"):
                value = graph.constants[node.target] if node.target in graph.constants else \
                    _lookup(root, node.target)
                _assign(self, node.target, value)
        object.__setattr__(self, "graph", graph)
        self.recompile()

    def recompile(self):
        """Writes forward from the graph again (after it was edited)."""
        source, globals_ = self.graph.python_code()
        local = {}
        exec(compile(source, f"<fx {type(self).__name__}>", "exec"), globals_, local)
        object.__setattr__(self, "_code", source)
        type(self).forward = local["forward"]
        return source

    @property
    def code(self):
        return self._code

    def __repr__(self):
        return super().__repr__() + "\n\n" + self._code
