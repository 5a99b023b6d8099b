"""oneflow.fx's Interpreter: runs a GraphModule's graph node by node, each kind of node through a
method a subclass may override (to record shapes, swap ops, count calls).

    class Shapes(oneflow.fx.Interpreter):
        def run_node(self, node):
            out = super().run_node(node)
            node.shape = getattr(out, "shape", None)
            return out
    Shapes(gm).run(x)        # the forward's result; each node now has .shape
"""

from oneflow.fx.graph import map_arg


class Interpreter:
    def __init__(self, module):
        self.module = module
        self.graph = module.graph
        self.env = {}  # node -> its value, while run() goes

    def run(self, *args, **kwargs):
        """The forward's result for these inputs."""
        self.env = {}
        self._args, self._kwargs = list(args), dict(kwargs)
        for node in self.graph.nodes:
            value = self.run_node(node)
            if node.op == "output":
                return value
            self.env[node] = value
        raise RuntimeError("fx.Interpreter.run: the graph has no output node")

    def run_node(self, node):
        args = map_arg(node.args, lambda n: self.env[n])
        kwargs = map_arg(node.kwargs, lambda n: self.env[n])
        return getattr(self, node.op)(node.target, args, kwargs)

    def placeholder(self, target, args, kwargs):
        if self._args:
            return self._args.pop(0)
        if target in self._kwargs:
            return self._kwargs.pop(target)
        if args:
            return args[0]  # the forward's default
        raise TypeError(f"fx.Interpreter.run: missing the forward's argument {target!r}")

    def get_attr(self, target, args, kwargs):
        obj = self.module
        for part in target.split("."):
            obj = getattr(obj, part)
        return obj

    def call_function(self, target, args, kwargs):
        return target(*args, **kwargs)

    def call_method(self, target, args, kwargs):
        obj, *rest = args
        return getattr(obj, target)(*rest, **kwargs)

    def call_module(self, target, args, kwargs):
        return self.module.get_submodule(target)(*args, **kwargs)

    def output(self, target, args, kwargs):
        return args[0]
