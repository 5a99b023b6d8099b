"""A model traced on meta tensors as the planner's ModelSpec: no weights are made, no kernel runs.

    with flow.device("meta"):
        model = GPT(...)                      # any nn.Module; .to("meta") moves an existing one
    idx = flow.zeros(8, 64, dtype=flow.int64, device="meta")
    spec = trace(model, idx, batch=512)       # batch: samples per training step
    print(evaluate(spec, Mesh(4, 8), load_profile("a100_80gb"), Layout(pp=2, dp=16)))

The forward runs once under oneflow.profiler with the ops' shapes recorded (meta tensors carry
shapes only). The repeated blocks are the children of an nn.ModuleList or nn.Sequential, all
of one type, that hold the most parameters (`blocks=` names them); the ops before the first
block are the stem, after the last the head, and one block's ops are the block (the others
must run the same ops on the same shapes). Each op is priced by ops.py from its recorded
shapes, scaled to the micro-batch the planner asks for (the traced inputs' dim 0 is their
batch): linear and matmul as GEMMs, layer norm, softmax, gelu, dropout, index_select/embedding,
cross-entropy by their functions, views and fills free, everything else as an elementwise op
over its first input. Backward is priced
by ops.py's conventions, as for the analytic models. Parameters come from the modules.

Not traced yet: tensor parallelism (no SBP signatures are recorded: a traced model plans with
tp 1, and asks for more are refused in one line), convolutions as GEMMs (their attributes are
not in the profile; they are priced by bytes), and a loss computed outside the model.
"""

import ast
import math
from dataclasses import dataclass

import oneflow._oneflow_internal as _C
from oneflow._grad_mode import no_grad
from oneflow.distributed.plan import ops as O
from oneflow.distributed.plan.models import ModelSpec, Part, precision
from oneflow.profiler import ProfilerActivity, profile, record_function

_FREE = {"reshape", "view", "permute", "transpose", "slice", "expand", "full", "zeros", "ones",
         "empty", "arange", "squeeze", "unsqueeze", "narrow", "select", "flatten", "detach",
         "as_strided", "contiguous"}
_BLOCK = "plan.trace block "


def _numel(shape):
    return math.prod(shape) if shape else 1


def _price(name, shapes, f, z):
    """The OpCost of one recorded op, its batch scaled by f; None for a free op."""
    if name in _FREE or not shapes:
        return None
    x = shapes[0]
    if name == "linear":
        return O.linear(x[0] * f, x[1], shapes[1][0], z)
    if name == "matmul" and len(x) >= 2 and len(shapes[1]) >= 2:
        w = shapes[1]
        if len(w) == 2:  # an activation by a weight: the rows are the batch
            return O.matmul(_numel(x[:-1]) * f, x[-1], w[-1], z)
        return O.matmul(x[-2], x[-1], w[-1], z, batch=_numel(x[:-2]) * f, saves_both=True,
                        name="matmul (activations)")
    if name == "layer_norm":
        return O.layer_norm(_numel(x[:-1]) * f, x[-1], z)
    if name in ("softmax", "log_softmax"):
        return O.softmax(_numel(x[:-1]) * f, x[-1], z, name=name)
    if name == "gelu":
        return O.gelu(_numel(x) * f, z)
    if name == "dropout":
        return O.dropout(_numel(x) * f, z)
    if name in ("index_select", "embedding"):
        table, idx = (x, shapes[-1]) if len(x) == 2 else (shapes[-1], x)
        return O.embedding(_numel(idx) * f, table[0], table[-1], z, name=name)
    if name in ("cross_entropy", "nll_loss"):
        return O.cross_entropy(_numel(x[:-1]) * f, x[-1], z)
    return O.elementwise(_numel(x) * f, z, inputs=max(2, len(shapes)), name=name)


@dataclass(frozen=True)
class TracedPart:
    """Ops recorded at batch `traced_batch`; part(b, t) prices them for a micro-batch of b."""
    ops: tuple  # ((name, shapes), ...)
    params: float
    out_numel: float  # of the output handed on, at the traced batch
    traced_batch: int
    itemsize: int

    def part(self, b, t):
        if t != 1:
            raise ValueError("plan: a traced model has no tensor-parallel signatures yet (tp 1)")
        f = b / self.traced_batch
        priced = [_price(n, s, f, self.itemsize) for n, s in self.ops]
        return Part(tuple(o for o in priced if o is not None), (), self.params,
                    self.out_numel * f * self.itemsize)


@dataclass(frozen=True)
class TracedSpec(ModelSpec):
    def check_tp(self, t):
        return None if t == 1 else (f"tp {t}: a traced model has no tensor-parallel signatures "
                                    f"yet (tp 1 only)")


def _find_blocks(model):
    """The repeated blocks: the children of an nn.ModuleList or nn.Sequential, all of one type,
    that hold the most parameters together."""
    best, most = [], 0
    for m in model.modules():
        kids = list(m._modules.values())
        if type(m).__name__ not in ("ModuleList", "Sequential") or len(kids) < 2 or \
                any(type(k) is not type(kids[0]) for k in kids):
            continue
        held = sum(p.numel() for k in kids for p in k.parameters())
        if held > most:
            best, most = kids, held
    return best


def trace(model, *inputs, batch=None, blocks=None, dtype="fp32", name=None):
    """model's forward on meta inputs as a ModelSpec (see the module's text). batch: samples
    per training step (default: the traced inputs' batch)."""
    tensors = [t for t in inputs if isinstance(t, _C.Tensor)]
    if not tensors or any(str(t.device) != "meta" for t in tensors):
        raise ValueError("plan: trace needs the model's inputs on the meta device "
                         "(flow.zeros(..., device='meta'))")
    held = [p for p in model.parameters() if str(p.device) != "meta"]
    if held:
        raise ValueError(f"plan: trace needs the model on the meta device (model.to('meta')); a "
                         f"parameter of shape {tuple(held[0].shape)} is on {held[0].device}")
    blocks = list(blocks) if blocks is not None else _find_blocks(model)
    if not blocks:
        raise ValueError("plan: trace found no repeated blocks (a list of modules of one type); "
                         "name them with blocks=")
    traced_batch = tensors[0].shape[0]
    outs, handles, ranges = {}, [], []

    def opener(i):
        def pre(m, args):
            r = record_function(f"{_BLOCK}{i}")
            r.__enter__()
            ranges.append(r)
        return pre

    def closer(i):
        def post(m, args, out):
            ranges.pop().__exit__(None, None, None)
            y = out[0] if isinstance(out, (tuple, list)) else out
            outs[i] = _numel(tuple(y.shape)) if isinstance(y, _C.Tensor) else 0
        return post

    calls = []  # (leaf module, where): which part each leaf module ran in
    where = ["stem"]

    def leaf(m, args, out):
        calls.append((m, where[0]))

    for i, blk in enumerate(blocks):
        handles.append(blk.register_forward_pre_hook(opener(i)))
        handles.append(blk.register_forward_hook(closer(i)))
        handles.append(blk.register_forward_pre_hook(lambda m, a: where.__setitem__(0, "block")))
    handles.append(blocks[-1].register_forward_hook(lambda m, a, o: where.__setitem__(0, "head")))
    for m in model.modules():
        if not m._modules:
            handles.append(m.register_forward_hook(leaf))
    try:
        with no_grad(), profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            model(*inputs)
    finally:
        for h in handles:
            h.remove()
    parts = {"stem": [], "head": []}
    seen_block = [False]
    for e in sorted(prof.events(), key=lambda e: e.start_ns):
        if e.kind != "op" or (e.parent is not None and e.parent.kind == "op"):
            continue
        block = _block_of(e)
        if block is None:
            key = "head" if seen_block[0] else "stem"
        else:
            seen_block[0] = True
            key = block
        shapes = e.input_shapes
        if isinstance(shapes, str):  # the profiler's text form: "[(8, 64), (64,)]"
            shapes = ast.literal_eval(shapes) if shapes else []
        parts.setdefault(key, []).append((e.name, tuple(tuple(s) for s in shapes)))
    for i in range(1, len(blocks)):
        if parts.get(i) != parts.get(0):
            raise ValueError(f"plan: trace: block {i} ({type(blocks[i]).__name__}) runs other ops "
                             f"or shapes than block 0; the planner repeats one block")
    z = precision(dtype).itemsize
    block_params = sum(p.numel() for p in blocks[0].parameters())

    def params_of(region):
        seen, n = set(), 0
        for m, w in calls:
            if w != region:
                continue
            for p in m.parameters(recurse=False):
                if id(p) not in seen:
                    seen.add(id(p))
                    n += p.numel()
        return n, seen

    stem_n, stem_ids = params_of("stem")
    head_n, head_ids = params_of("head")
    tied = sum(p.numel() for m in model.modules() for p in m.parameters(recurse=False)
               if id(p) in stem_ids and id(p) in head_ids)
    stem_out = outs.get(0, 0)  # what enters block 0 has the shape the blocks hand on
    spec = TracedSpec(
        name or type(model).__name__,
        TracedPart(tuple(parts[0]), block_params, outs.get(0, 0), traced_batch, z),
        len(blocks), batch or traced_batch, precision(dtype),
        TracedPart(tuple(parts["stem"]), stem_n, stem_out, traced_batch, z),
        TracedPart(tuple(parts["head"]), head_n - tied, 0, traced_batch, z),
        tied_params=tied)
    return spec


def _block_of(e):
    p = e.parent
    while p is not None:
        if p.name.startswith(_BLOCK):
            return int(p.name[len(_BLOCK):])
        p = p.parent
    return None
