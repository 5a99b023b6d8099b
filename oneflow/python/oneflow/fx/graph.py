"""oneflow.fx's Graph and Node: a forward pass as a list of calls, editable and printable as code.

    gm = oneflow.fx.symbolic_trace(model)
    for node in gm.graph.nodes:          # placeholder, get_attr, call_function, call_method,
        print(node.op, node.target)      # call_module, output
    node.replace_all_uses_with(other); gm.graph.erase_node(node); gm.graph.lint(); gm.recompile()

A node's args and kwargs hold other nodes (and lists, tuples, dicts and constants of them); each
node knows its users. python_code() writes the graph as the body of `forward(self, ...)`.
"""

import builtins
import contextlib
import keyword
import operator

import sys

from oneflow.nn import functional

OPS = ("placeholder", "get_attr", "call_function", "call_method", "call_module", "output")


def map_arg(arg, fn):
    """arg with every Node in it (through lists, tuples, dicts and slices) replaced by fn(node)."""
    if isinstance(arg, Node):
        return fn(arg)
    if isinstance(arg, tuple) and hasattr(arg, "_fields"):  # a named tuple
        return type(arg)(*(map_arg(a, fn) for a in arg))
    if isinstance(arg, (list, tuple)):
        return type(arg)(map_arg(a, fn) for a in arg)
    if isinstance(arg, dict):
        return {k: map_arg(v, fn) for k, v in arg.items()}
    if isinstance(arg, slice):
        return slice(map_arg(arg.start, fn), map_arg(arg.stop, fn), map_arg(arg.step, fn))
    return arg


def _nodes_in(arg):
    found = []
    map_arg(arg, lambda n: found.append(n) or n)
    return found


class Node:
    """One step of a Graph: op (one of OPS), target (a function, a method or module path, an
    attribute path, or a placeholder's name), args and kwargs, and the nodes using it."""

    def __init__(self, graph, name, op, target, args, kwargs):
        if op not in OPS:
            raise ValueError(f"fx.Node: op must be one of {', '.join(OPS)}, got {op!r}")
        self.graph = graph
        self.name = name
        self.op = op
        self.target = target
        self.users = {}  # node -> None, in the order they were added
        self.keyword_only = False  # a placeholder after * in forward's signature
        self._args, self._kwargs = (), {}
        self._set_inputs(tuple(args), dict(kwargs))

    def _set_inputs(self, args, kwargs):
        for n in self.all_input_nodes:
            n.users.pop(self, None)
        self._args, self._kwargs = args, kwargs
        for n in self.all_input_nodes:
            n.users.setdefault(self, None)

    @property
    def args(self):
        return self._args

    @args.setter
    def args(self, value):
        self._set_inputs(tuple(value), self._kwargs)

    @property
    def kwargs(self):
        return self._kwargs

    @kwargs.setter
    def kwargs(self, value):
        self._set_inputs(self._args, dict(value))

    @property
    def all_input_nodes(self):
        seen = {}
        for n in _nodes_in(self._args) + _nodes_in(self._kwargs):
            seen.setdefault(n, None)
        return list(seen)

    def replace_input_with(self, old, new):
        swap = lambda n: new if n is old else n  # noqa: E731
        self._set_inputs(map_arg(self._args, swap), map_arg(self._kwargs, swap))

    def replace_all_uses_with(self, new):
        """Every user of this node reads `new` instead; returns those users."""
        users = list(self.users)
        for user in users:
            user.replace_input_with(self, new)
        return users

    def __repr__(self):
        return self.name


class Graph:
    """An ordered list of Nodes ending in one output node."""

    def __init__(self):
        self._nodes = []
        self._names = set()
        self._insert_at = None  # None: append; else the node new nodes go before
        self.constants = {}  # name -> tensor the tracer kept as a constant (get_attr target)

    @property
    def nodes(self):
        """The nodes in order (a copy: erasing or inserting while iterating is safe)."""
        return list(self._nodes)

    def _unique_name(self, hint):
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in str(hint)) or "node"
        if base[0].isdigit():
            base = "_" + base
        name, i = base, 0
        while (name in self._names or keyword.iskeyword(name) or name in _RESERVED
               or hasattr(builtins, name)):
            i += 1
            name = f"{base}_{i}"
        self._names.add(name)
        return name

    def create_node(self, op, target, args=(), kwargs=None, name=None):
        node = Node(self, self._unique_name(name or _name_hint(op, target)), op, target, args,
                    kwargs or {})
        if self._insert_at is None:
            self._nodes.append(node)
        else:
            self._nodes.insert(self._nodes.index(self._insert_at), node)
        return node

    @contextlib.contextmanager
    def inserting_before(self, node):
        """New nodes go before `node` while this is open."""
        previous, self._insert_at = self._insert_at, node
        try:
            yield
        finally:
            self._insert_at = previous

    @contextlib.contextmanager
    def inserting_after(self, node):
        """New nodes go after `node` (each after the one made before it) while this is open."""
        index = self._nodes.index(node)
        following = self._nodes[index + 1] if index + 1 < len(self._nodes) else None
        previous, self._insert_at = self._insert_at, following
        try:
            yield
        finally:
            self._insert_at = previous

    def placeholder(self, name, default=()):
        return self.create_node("placeholder", name, default, name=name)

    def get_attr(self, qualified_name):
        return self.create_node("get_attr", qualified_name)

    def call_function(self, fn, args=(), kwargs=None):
        return self.create_node("call_function", fn, args, kwargs)

    def call_method(self, method, args=(), kwargs=None):
        return self.create_node("call_method", method, args, kwargs)

    def call_module(self, path, args=(), kwargs=None):
        return self.create_node("call_module", path, args, kwargs)

    def output(self, result):
        return self.create_node("output", "output", (result,))

    def node_copy(self, node, arg_transform):
        """A copy of `node` (from any graph) in this one, its input nodes mapped by arg_transform."""
        name = None if node.op != "placeholder" else node.name
        return self.create_node(node.op, node.target, map_arg(node.args, arg_transform),
                                map_arg(node.kwargs, arg_transform), name=name)

    def erase_node(self, node):
        if node.users:
            raise RuntimeError(f"fx.Graph.erase_node: node {node.name} still has users "
                               f"{', '.join(u.name for u in node.users)}; replace its uses first")
        if node.graph is not self or node not in self._nodes:
            raise RuntimeError(f"fx.Graph.erase_node: node {node.name} is not in this graph")
        node._set_inputs((), {})
        self._nodes.remove(node)
        self._names.discard(node.name)

    def lint(self):
        """Checks that every input is an earlier node of this graph, users match inputs, and the
        graph ends in exactly one output."""
        seen = set()
        for node in self._nodes:
            for inp in node.all_input_nodes:
                if inp.graph is not self or inp not in seen:
                    raise RuntimeError(f"fx.Graph.lint: node {node.name} reads {inp.name}, which "
                                       "is not an earlier node of this graph")
                if node not in inp.users:
                    raise RuntimeError(f"fx.Graph.lint: {inp.name}.users lacks its user {node.name}")
            for user in node.users:
                if user not in self._nodes or node not in user.all_input_nodes:
                    raise RuntimeError(f"fx.Graph.lint: {node.name}.users names {user.name}, which "
                                       "does not read it")
            seen.add(node)
        outputs = [n for n in self._nodes if n.op == "output"]
        if len(outputs) != 1 or self._nodes[-1] is not outputs[0]:
            raise RuntimeError(f"fx.Graph.lint: a graph ends in one output node, this one has "
                               f"{len(outputs)} output nodes" + ("" if len(outputs) != 1 else
                                                                 " not at the end"))

    def python_code(self):
        """(source of `def forward(self, ...)`, the globals it needs)."""
        globals_ = {"oneflow": sys.modules["oneflow"], "operator": operator}
        refs = {}

        def const(value):
            if value is None or isinstance(value, (bool, int, float, str)) or value is Ellipsis:
                return repr(value)
            name = f"_const_{len(refs)}"
            refs[name] = value
            return name

        def fmt(arg):
            if isinstance(arg, Node):
                return arg.name
            if isinstance(arg, tuple) and hasattr(arg, "_fields"):
                return const(type(arg)) + "(" + ", ".join(fmt(a) for a in arg) + ")"
            if isinstance(arg, list):
                return "[" + ", ".join(fmt(a) for a in arg) + "]"
            if isinstance(arg, tuple):
                return "(" + "".join(fmt(a) + ", " for a in arg) + ")"
            if isinstance(arg, dict):
                return "{" + ", ".join(f"{fmt(k)}: {fmt(v)}" for k, v in arg.items()) + "}"
            if isinstance(arg, slice):
                return f"slice({fmt(arg.start)}, {fmt(arg.stop)}, {fmt(arg.step)})"
            return const(arg)

        def call_args(args, kwargs):
            return ", ".join([fmt(a) for a in args] + [f"{k}={fmt(v)}" for k, v in kwargs.items()])

        params, body = [], []
        for node in self._nodes:
            if node.op == "placeholder":
                if getattr(node, "keyword_only", False) and "*" not in params:
                    params.append("*")
                params.append(node.name + (f"={fmt(node.args[0])}" if node.args else ""))
            elif node.op == "get_attr":
                body.append(f"{node.name} = {_attr_path(node.target)}")
            elif node.op == "call_function":
                body.append(f"{node.name} = {_function_name(node.target, const)}"
                            f"({call_args(node.args, node.kwargs)})")
            elif node.op == "call_method":
                body.append(f"{node.name} = {fmt(node.args[0])}.{node.target}"
                            f"({call_args(node.args[1:], node.kwargs)})")
            elif node.op == "call_module":
                body.append(f"{node.name} = {_attr_path(node.target)}"
                            f"({call_args(node.args, node.kwargs)})")
            else:
                body.append(f"return {fmt(node.args[0])}")
        source = "def forward(" + ", ".join(["self"] + params) + "):\n"
        source += "".join(f"    {line}\n" for line in body or ["pass"])
        globals_.update(refs)
        return source, globals_

    def __str__(self):
        lines = ["graph():"]
        for n in self._nodes:
            lines.append(f"    %{n.name} : [{n.op}] target={_target_str(n.target)} "
                         f"args={map_arg(n.args, lambda x: '%' + x.name)}")
        return "\n".join(lines)


# Names the generated code itself uses: no node takes them.
_RESERVED = {"self", "oneflow", "operator", "getattr", "slice"}


def _name_hint(op, target):
    if op == "call_function":
        return getattr(target, "__name__", "fn")
    return str(target).replace(".", "_")


def _target_str(target):
    return getattr(target, "__name__", None) or str(target)


def _attr_path(path):
    text = "self"
    for part in path.split("."):
        if part.isidentifier() and not keyword.iskeyword(part):
            text += "." + part
        else:
            text = f"getattr({text}, {part!r})"
    return text


def _function_name(fn, const):
    name = getattr(fn, "__name__", None)
    if name:
        for prefix, module in (("operator", operator), ("oneflow", sys.modules["oneflow"]),
                               ("oneflow.nn.functional", functional)):
            if getattr(module, name, None) is fn:
                return f"{prefix}.{name}"
        if getattr(builtins, name, None) is fn:
            return name
    return const(fn)
