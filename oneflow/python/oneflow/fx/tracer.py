"""oneflow.fx's symbolic tracing: runs a module's forward on Proxies and records what it calls.

    gm = symbolic_trace(model)          # a GraphModule: model's submodules and a generated forward
    print(gm.code)                      # def forward(self, x): conv1 = self.conv1(x) ...

What becomes a node:
- a call of a library module (oneflow.nn's layers): one call_module node; a user's module (and
  Sequential, ModuleList, ModuleDict) is traced through;
- a call of a oneflow function (flow.cat, F.relu, a function of math) reached through the traced
  forward's globals: one call_function node. The forward runs with a copy of its globals in which
  oneflow's modules and functions (and the user's plain functions, likewise) record calls whose
  arguments hold a Proxy; no module is modified;
- a method or an operator on a Proxy: call_method / call_function(operator.*);
- a parameter, buffer or tensor attribute the forward passes to a recorded call: get_attr (other
  tensors are kept as constants of the GraphModule). A tensor the forward computes from a
  parameter without a Proxy (self.b[0]) is computed once, while tracing, and kept as a constant.
Module calls reach the tracer through nn.Module's call hook (nn/modules/module.py) while it runs.
"""

import inspect
import types

from oneflow.nn.modules import container, module as module_lib
from oneflow.fx.graph import Graph
from oneflow.fx.proxy import Proxy, TraceError


def _is_oneflow(obj):
    return (getattr(obj, "__module__", None) or "").split(".")[0] == "oneflow"


class _Namespace:
    """A oneflow module as the traced forward sees it: its functions record calls on Proxies."""

    def __init__(self, tracer, module):
        self._tracer = tracer
        self._module = module

    def __getattr__(self, name):
        return self._tracer._wrap(getattr(self._module, name))

    def __repr__(self):
        return f"<traced {self._module.__name__}>"


class Tracer:
    def __init__(self):
        self.graph = Graph()
        self.root = None
        self.tensor_attrs = {}  # name -> constant tensor read by the forward
        self._wrapped = {}  # id(object) -> its tracing form
        self._paths = {}  # id(module) -> qualified name in root
        self._attr_paths = {}  # id(tensor) -> qualified name of a parameter or buffer

    # ---- what is a leaf
    def is_leaf_module(self, m, qualified_name):
        """oneflow.nn's layers are leaves (one call_module node); other modules are traced into."""
        cls = type(m)
        return (cls.__module__.startswith("oneflow.nn.")
                and not isinstance(m, (container.Sequential, container.ModuleList,
                                       container.ModuleDict)))

    # ---- nodes and proxies
    def create_proxy(self, op, target, args, kwargs, name=None):
        node = self.graph.create_node(op, target, self.create_arg(args), self.create_arg(kwargs),
                                      name=name)
        return Proxy(node, self)

    def create_arg(self, a):
        from oneflow.fx.graph import Node

        if isinstance(a, Proxy):
            return a.node
        if isinstance(a, Node):
            return a
        if isinstance(a, tuple) and hasattr(a, "_fields"):
            return type(a)(*(self.create_arg(x) for x in a))
        if isinstance(a, (list, tuple)):
            return type(a)(self.create_arg(x) for x in a)
        if isinstance(a, dict):
            return {k: self.create_arg(v) for k, v in a.items()}
        if isinstance(a, slice):
            return slice(self.create_arg(a.start), self.create_arg(a.stop), self.create_arg(a.step))
        if isinstance(a, module_lib.Module):
            raise TraceError(f"symbolic_trace: a module ({type(a).__name__}) passed as an "
                             "argument cannot be recorded; call it instead")
        tensor_type = _tensor_type()
        if isinstance(a, tensor_type):
            path = self._attr_paths.get(id(a))
            if path is None:
                path = f"_tensor_constant{len(self.tensor_attrs)}"
                self.tensor_attrs[path] = a
                self.graph.constants[path] = a
                self._attr_paths[id(a)] = path
            return self.graph.get_attr(path)
        return a

    # ---- the traced forward's world
    def _wrap(self, obj):
        key = id(obj)
        if key in self._wrapped:
            return self._wrapped[key]
        wrapped = obj
        if isinstance(obj, types.ModuleType):
            if obj.__name__.split(".")[0] in ("oneflow", "math"):
                wrapped = _Namespace(self, obj)
        elif isinstance(obj, type):
            pass
        elif isinstance(obj, types.FunctionType) and not _is_oneflow(obj):
            wrapped = self._rebind(obj)  # the user's helper: traced with the same globals
        elif callable(obj) and (isinstance(obj, types.BuiltinFunctionType) or _is_oneflow(obj)):
            wrapped = self._recording(obj)
        self._wrapped[key] = wrapped
        return wrapped

    def _recording(self, fn):
        tracer = self

        def call(*args, **kwargs):
            if _has_proxy(args) or _has_proxy(kwargs):
                return tracer.create_proxy("call_function", fn, args, kwargs)
            return fn(*args, **kwargs)

        call.__name__ = getattr(fn, "__name__", "fn")
        call.__wrapped__ = fn
        return call

    def _rebind(self, fn):
        """fn with a copy of its globals in which oneflow records calls on Proxies."""
        globals_ = {}
        rebound = types.FunctionType(fn.__code__, globals_, fn.__name__, fn.__defaults__,
                                     fn.__closure__)
        rebound.__kwdefaults__ = fn.__kwdefaults__
        self._wrapped[id(fn)] = rebound  # before filling: recursive helpers find themselves
        for k, v in fn.__globals__.items():
            globals_[k] = v if k.startswith("__") else self._wrap(v)
        return rebound

    def call_module(self, m, args, kwargs):
        """Module.__call__ while tracing: a leaf becomes a node, others are traced into."""
        path = self._paths.get(id(m))
        if path is None:
            raise TraceError(f"symbolic_trace: the forward calls a {type(m).__name__} that is not "
                             "a submodule of the traced module; assign it as an attribute first")
        if self.is_leaf_module(m, path):
            return self.create_proxy("call_module", path, args, kwargs)
        forward = type(m).forward
        if not isinstance(forward, types.FunctionType):
            raise TraceError(f"symbolic_trace: {type(m).__name__}.forward is not a Python "
                             "function; it cannot be traced")
        return self._rebind(forward)(m, *args, **kwargs)

    # ---- the whole trace
    def trace(self, root, concrete_args=None):
        """The Graph of root's forward (root: a Module or a function)."""
        if concrete_args:
            raise TraceError("symbolic_trace: concrete_args is not supported; trace a wrapper "
                             "whose forward fixes those arguments")
        if isinstance(root, module_lib.Module):
            self.root = root
            fn = type(root).forward
            for name, m in root.named_modules(remove_duplicate=False):
                self._paths.setdefault(id(m), name)
            for name, t in list(root.named_parameters()) + list(root.named_buffers()):
                self._attr_paths.setdefault(id(t), name)
            skip_self = 1
        elif isinstance(root, types.FunctionType):
            fn, skip_self = root, 0
        else:
            raise TypeError(f"symbolic_trace: expected an nn.Module or a Python function, got "
                            f"{type(root).__name__}")
        params = list(inspect.signature(fn).parameters.values())[skip_self:]
        proxies, kw_proxies = [], {}
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TraceError(f"symbolic_trace: {fn.__qualname__} takes *{p.name}; trace a "
                                 "forward with named arguments")
            default = () if p.default is inspect.Parameter.empty else (p.default,)
            node = self.graph.placeholder(p.name, default)
            if p.kind == p.KEYWORD_ONLY:
                node.keyword_only = True
                kw_proxies[p.name] = Proxy(node, self)
            else:
                proxies.append(Proxy(node, self))
        forward = self._rebind(fn)
        module_lib._module_call_hooks.append(self.call_module)
        try:
            args = ([root] if skip_self else []) + proxies
            out = forward(*args, **kw_proxies)
        finally:
            module_lib._module_call_hooks.remove(self.call_module)
        self.graph.output(self.create_arg(out))
        return self.graph


def _tensor_type():
    import sys

    return sys.modules["oneflow"].Tensor


def _has_proxy(arg):
    if isinstance(arg, Proxy):
        return True
    if isinstance(arg, (list, tuple)):
        return any(_has_proxy(a) for a in arg)
    if isinstance(arg, dict):
        return any(_has_proxy(a) for a in arg.values())
    if isinstance(arg, slice):
        return _has_proxy((arg.start, arg.stop, arg.step))
    return False


def symbolic_trace(root, concrete_args=None):
    """A GraphModule recording root's forward (root: an nn.Module or a function)."""
    from oneflow.fx.graph_module import GraphModule

    tracer = Tracer()
    graph = tracer.trace(root, concrete_args)
    if isinstance(root, module_lib.Module):
        return GraphModule(root, graph, type(root).__name__)
    return GraphModule({}, graph, root.__name__)
