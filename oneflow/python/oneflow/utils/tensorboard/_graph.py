"""An nn.Graph's plan as TensorBoard's GraphDef (tensorflow/core/framework/graph.proto,
node_def.proto, attr_value.proto, tensor_shape.proto), for SummaryWriter.add_graph.

    graph_def(plan.describe())  # -> bytes of a GraphDef: one node per step, module scopes as
                                #    name scopes (TensorBoard folds m/l1/... into boxes)

The plan's description is its one listing of steps (``%out = op(%in, ...)  [scope]``); a line
this reader does not know is refused, not skipped, so a change of that listing shows here.
"""
import re

from oneflow.utils.tensorboard import _proto

_SLOT = re.compile(r"%(\d+)")
_VALUE = re.compile(r"^%(\d+) = (input \d+|captured): \(([\d, ]*)\) (\w+) (.+)$")
_STEP = re.compile(r"^(?:(%\d+(?:, %\d+)*) = )?([^\s(]+)\(((?:%\d+(?:, %\d+)*)?)\)(.*)$")
_GUARD = re.compile(r"^if %\d+ == 0, the next \d+ steps, else none:$")
_SCOPE = re.compile(r"\[([^\]]*)\]")


def _shape(dims):
    """TensorShapeProto: dim = 2 (Dim: size = 1)."""
    return b"".join(_proto._bytes(2, _proto._int(1, d)) for d in dims)


def _attr_s(text):
    """AttrValue: s = 2."""
    return _proto._bytes(2, text)


def _attr_shapes(shapes):
    """AttrValue: list = 1 (ListValue: shape = 7)."""
    return _proto._bytes(1, b"".join(_proto._bytes(7, _shape(s)) for s in shapes))


def _node(name, op, inputs, attrs):
    """NodeDef: name = 1, op = 2, input = 3, attr = 5 (map entry: key = 1, value = 2)."""
    out = _proto._bytes(1, name) + _proto._bytes(2, op)
    for i in inputs:
        out += _proto._bytes(3, i)
    for key, value in attrs.items():
        out += _proto._bytes(5, _proto._bytes(1, key) + _proto._bytes(2, value))
    return out


def graph_def(description, what="SummaryWriter.add_graph"):
    """The GraphDef bytes of a plan's description (GraphPlan.describe())."""
    nodes, producer = [], {}  # producer: slot -> the name of the node that wrote it last

    def read(slot, line):
        if slot not in producer:
            raise ValueError(f"{what}: the plan reads %{slot} before any step wrote it: {line!r}")
        return producer[slot]

    lines = description.splitlines()
    for n, line in enumerate(lines):
        m = _VALUE.match(line)
        if m:
            slot, origin, dims, dtype, where = m.groups()
            dims = [int(d) for d in dims.replace(" ", "").split(",") if d]
            name = ("input/" + origin.split()[1]) if origin.startswith("input") else f"captured/{slot}"
            nodes.append(_node(name, "Input" if origin.startswith("input") else "Const", [],
                               {"dtype": _attr_s(dtype), "device": _attr_s(where),
                                "_output_shapes": _attr_shapes([dims])}))
            producer[slot] = name
            continue
        if _GUARD.match(line):
            continue
        if line.startswith("outputs:"):
            for k, slot in enumerate(_SLOT.findall(line)):
                nodes.append(_node(f"output/{k}", "Output", [read(slot, line)], {}))
            continue
        m = _STEP.match(line)
        if not m:
            raise ValueError(f"{what}: cannot read line {n + 1} of the plan: {line!r}")
        outs, op, ins, rest = m.groups()
        if "(fused into step" in rest:
            continue  # its work is part of the step named
        scope = _SCOPE.search(rest)
        prefix = scope.group(1).replace(".", "/") + "/" if scope and scope.group(1) else ""
        name = f"{prefix}{op}_{n}"
        attrs = {}
        note = _SCOPE.sub("", rest).strip()
        if note:
            attrs["note"] = _attr_s(note)
        nodes.append(_node(name, op, [read(s, line) for s in _SLOT.findall(ins or "")], attrs))
        for slot in _SLOT.findall(outs or ""):
            producer[slot] = name
    versions = _proto._int(1, 22)  # VersionDef: producer = 1 (as PyTorch writes it)
    return b"".join(_proto._bytes(1, node) for node in nodes) + _proto._bytes(4, versions)
