"""The search behind nn.Graph's auto-parallel (graph_auto_parallel.py has the switches and
the model of what is searched): the recorded chain of leaf-module calls, per-axis candidate
signatures, their predicted costs (the planner's pieces), the Pareto dynamic programme and the
plan applied to the parameters and the trace.

    plan = prepare(graph, args, kwargs, tensors)    # records, searches, lays parameters out
    with plan.boxing():                             # while build is traced
        ...
    print(plan.describe())
"""

import contextlib
import itertools
import math

import oneflow._oneflow_internal as _C
from oneflow._grad_mode import no_grad
from oneflow.distributed.plan import collectives as _coll
from oneflow.distributed.plan import ops as _ops
from oneflow.distributed.plan.hardware import load_profile
from oneflow.nn.graph import micro_batches

_ELEMENTWISE = {"ReLU", "GELU", "Tanh", "Sigmoid", "Dropout", "Identity", "SiLU", "LeakyReLU",
                "ReLU6", "ELU", "Mish", "Hardtanh", "Softplus", "NewGELUActivation"}
_ROWWISE = {"LayerNorm", "RMSNorm"}  # parameters broadcast; any batch split passes


# ---------------------------------------------------------------- layouts

def _sbp_word(s):
    """'S(0)', 'B', 'P' from a flow.sbp value (its repr is 'oneflow.sbp.split(dim=0)' ...)."""
    text = str(s)
    if "split" in text:
        return f"S({int(''.join(c for c in text.split('=')[-1] if c.isdigit()))})"
    return "B" if "broadcast" in text else "P"


def _to_sbp(word, ndim):
    if word == "B":
        return _C.sbp.broadcast
    if word == "P":
        return _C.sbp.partial_sum
    axis = int(word[2:-1])
    return _C.sbp.split(axis % ndim)


def _norm(word, ndim):
    """'S(-1)' -> 'S(ndim-1)' so layouts compare."""
    if word.startswith("S(") and word != "S(0)":
        return f"S({int(word[2:-1]) % ndim})"
    return word


class _Cand:
    """One mesh axis's signature of a leaf module: what it splits, its layouts."""

    __slots__ = ("name", "x", "params", "y", "splits", "dx")

    def __init__(self, name, x, params, y, splits, dx):
        self.name, self.x, self.params, self.y, self.splits, self.dx = \
            name, x, params, y, splits, dx


def _linear_cands():
    return [_Cand("data parallel", "S(0)", {"weight": "B", "bias": "B"}, "S(0)", "m", "S(0)"),
            _Cand("output features", "B", {"weight": "S(0)", "bias": "S(0)"}, "S(-1)", "out",
                  "P"),
            _Cand("input features", "S(-1)", {"weight": "S(1)", "bias": "B"}, "P", "in",
                  "S(-1)"),
            _Cand("replicated", "B", {"weight": "B", "bias": "B"}, "B", "", "B")]


def _conv_cands():
    return [_Cand("data parallel", "S(0)", {"weight": "B", "bias": "B"}, "S(0)", "m", "S(0)"),
            _Cand("output channels", "B", {"weight": "S(0)", "bias": "S(0)"}, "S(1)", "out",
                  "P"),
            _Cand("replicated", "B", {"weight": "B", "bias": "B"}, "B", "", "B")]


def _other_cands(module):
    names = {n: "B" for n, _ in module.named_parameters(recurse=False)}
    out = [_Cand("replicated", "B", names, "B", "", "B")]
    if type(module).__name__ in _ROWWISE:
        out.insert(0, _Cand("data parallel", "S(0)", names, "S(0)", "m", "S(0)"))
    return out


def _grad_need(word):
    """The layout a tensor's gradient must arrive in: a partial sum's is broadcast."""
    return "B" if word == "P" else word


# ---------------------------------------------------------------- the recorded chain

class _Node:
    def __init__(self, name, module, x_shape, y_shape, itemsize, first):
        self.name, self.module = name, module
        self.kind = type(module).__name__
        self.x_shape, self.y_shape = tuple(x_shape), tuple(y_shape)
        self.itemsize = itemsize
        self.first = first  # no gradient flows back through its input (a graph input)
        # The node whose output is this one's input; None: made outside the leaf modules (a
        # residual add, a view), taken to be the previous call's output.
        self.src = None
        self.params = dict(module.named_parameters(recurse=False))
        self.cands = None  # per axis candidate lists; None: passes its input's layout on
        self.fixed = {}  # parameter name -> the user's SBP words (one per axis)

    @property
    def x_bytes(self):
        return math.prod(self.x_shape) * self.itemsize

    @property
    def y_bytes(self):
        return math.prod(self.y_shape) * self.itemsize


def _record(graph, args, kwargs):
    """Runs build once eagerly and records the leaf modules' calls: [_Node] in call order.
    Gradients, the random state and every parameter's value are as before afterwards (the
    optimizers do not step; backward runs only to keep build's code path)."""
    names = {}
    for top, module in graph._modules.items():
        for sub, m in module.named_modules(prefix=top):
            if not m._modules:
                names.setdefault(id(m), (sub, m))
    nodes, handles, outputs, kept = [], [], {}, []

    def hook(name):
        def after(m, inputs, output):
            x = next((t for t in inputs if isinstance(t, _C.Tensor)), None)
            y = output if isinstance(output, _C.Tensor) else None
            if x is None or y is None:
                return None
            node = _Node(name, m, x.shape, y.shape, y.element_size(), not x.requires_grad)
            node.src = outputs.get(id(x))  # None: made by code outside the leaf modules
            outputs[id(y)] = len(nodes)
            kept.append(y)  # alive until the end, so no later tensor reuses its id
            nodes.append(node)
            return None
        return after

    for name, m in names.values():
        handles.append(m.register_forward_hook(hook(name)))
    params = [p for m in graph._modules.values() for p in m.parameters()]
    saved_grads = [(p, p.grad) for p in params]
    state = _C.generator_state()
    try:
        if graph._optimizers:
            graph.build(*args, **kwargs)  # its backward() fills .grad, restored below
        else:
            with no_grad():
                graph.build(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
        _C.set_generator_state(*state)
        for p, g in saved_grads:
            p.grad = g
    return nodes


# ---------------------------------------------------------------- costs

class _Costs:
    """Per-rank seconds and bytes of one plan, by kind (added up over the chain)."""

    __slots__ = ("compute", "comm", "mem", "moved", "collectives")

    def __init__(self, compute=0.0, comm=0.0, mem=0.0, moved=0.0, collectives=0):
        self.compute, self.comm, self.mem, self.moved, self.collectives = \
            compute, comm, mem, moved, collectives

    def __add__(self, o):
        return _Costs(self.compute + o.compute, self.comm + o.comm, self.mem + o.mem,
                      self.moved + o.moved, self.collectives + o.collectives)


class _Model:
    def __init__(self, hierarchy, profile, dtype_key, training, state_slots, ratio, wait):
        self.hierarchy = tuple(hierarchy)
        self.profile, self.dtype_key = profile, dtype_key
        self.training, self.state_slots = training, state_slots
        self.ratio, self.wait = ratio, wait

    def rate(self):
        rates = dict(self.profile.peak_flops)
        key = self.dtype_key if self.dtype_key in rates else "fp32"
        return rates[key] * self.profile.gemm_efficiency

    def collective(self, kind, nbytes, n):
        c = _coll.Comm(kind, nbytes, "mesh")
        link = self.profile.intra
        # one launch each (ZeRO's reduce-scatter + all-gather is two where DP's all-reduce is
        # one, at the same ring bytes and steps)
        return _Costs(comm=_coll.seconds(c, n, link) + self.wait + self.profile.kernel_overhead_s,
                      moved=_coll.bytes_per_rank(kind, nbytes, n), collectives=1)

    def boxing(self, src, dst, nbytes, ndim):
        """src, dst: per-axis layout words; the collectives from one to the other."""
        total = _Costs()
        for a, n in enumerate(self.hierarchy):
            s, d = _norm(src[a], ndim), _norm(dst[a], ndim)
            kind = _coll.boxing_kind(s, d) if n > 1 else None
            if kind:
                others = math.prod(m for b, m in enumerate(self.hierarchy)
                                   if b != a and src[b].startswith("S"))
                total = total + self.collective(kind, nbytes / others, n)
        return total

    def node(self, node, sig, zero):
        """The costs of a leaf module with parameters under per-axis candidates `sig`."""
        shard = {"m": 1, "in": 1, "out": 1}
        for c, n in zip(sig, self.hierarchy):
            if c.splits:
                shard[c.splits] *= n
        prof = self.profile
        if node.kind == "Linear":
            d_in, d_out = node.module.in_features, node.module.out_features
            rows = math.prod(node.x_shape) // d_in
            op = _ops.linear(rows / shard["m"], d_in / shard["in"], d_out / shard["out"],
                             node.itemsize)
        elif node.kind == "Conv2d":
            w = node.module.weight
            n_, c_in, h_in, w_in = node.x_shape
            _, c_out, h_out, w_out = node.y_shape
            op = _ops.conv2d(n_ / shard["m"], c_in, c_out / shard["out"], h_out, w_out,
                             w.shape[-1], node.itemsize, h_in, w_in)
        else:
            op = _ops.elementwise(math.prod(node.x_shape) / shard["m"], node.itemsize, 2)
        flops = op.flops + (op.bwd_flops if self.training else 0)
        compute = (flops / self.rate() if op.gemm else 0.0) + \
            (op.bytes + (op.bwd_bytes if self.training else 0)) / prof.memory_rate + \
            prof.kernel_overhead_s * (3 if self.training else 1)
        costs = _Costs(compute=compute, mem=op.saved if self.training else 0.0)
        for pname, p in node.params.items():
            words = [c.params.get(pname, "B") for c in sig]
            pbytes = p.numel() * p.element_size()
            split = math.prod(n for w, n in zip(words, self.hierarchy) if w.startswith("S"))
            local = pbytes / split
            bcast = math.prod(n for w, n in zip(words, self.hierarchy) if w == "B")
            state = local * self.state_slots
            grad = local
            mem = local
            if self.training:
                zero_on = zero and bcast > 1 and p.dim() > 0
                if zero_on:
                    state /= bcast
                    if zero == 2:
                        grad /= bcast
                mem += grad + state
                for a, (c, n) in enumerate(zip(sig, self.hierarchy)):
                    if n == 1 or words[a] != "B":
                        continue
                    part = pbytes / math.prod(m for b, m in enumerate(self.hierarchy)
                                              if b != a and words[b].startswith("S"))
                    if c.splits == "m":  # a gradient summed over the batch split
                        kind = "reduce_scatter" if zero_on and zero == 2 else "all_reduce"
                        costs = costs + self.collective(kind, part, n)
                    if zero_on:  # the updated shards gathered back (shard_restore_level 1)
                        costs = costs + self.collective("all_gather", part, n)
            costs = costs + _Costs(mem=mem)
        return costs

    def score(self, c):
        return self.ratio * c.compute + c.comm


# ---------------------------------------------------------------- the search

class _Choice:
    """A complete plan: per node its per-axis candidates (None for pass-through), ZeRO stage."""

    def __init__(self, sigs, zero, costs, layouts):
        self.sigs, self.zero, self.costs, self.layouts = sigs, zero, costs, layouts


def _pass_through(node, layout, model, ndim_in):
    """A module without parameters: its output layout and the boxing it needs first."""
    cost, out = _Costs(), list(layout)
    for a, w in enumerate(layout):
        w = _norm(w, ndim_in)
        if w == "P":
            out[a] = "B"
        elif node.kind not in _ELEMENTWISE and w.startswith("S") and w != "S(0)":
            out[a] = "B"
        else:
            out[a] = w
    if tuple(out) != tuple(_norm(w, ndim_in) for w in layout):
        cost = model.boxing(layout, out, node.x_bytes, ndim_in)
        if model.training and not node.first:
            cost = cost + model.boxing([_grad_need(w) for w in out],
                                       [_grad_need(w) for w in layout], node.x_bytes, ndim_in)
    ndim_out = len(node.y_shape)
    if node.kind not in _ELEMENTWISE:  # the shape changes: only a batch split carries over
        out = [w if w in ("B", "S(0)") else "B" for w in out]
    return tuple(_norm(w, ndim_out) for w in out), cost


def _chain_dp(nodes, start, model, zero, forced=None, cap=48):
    """Pareto dynamic programme over the calls: [(score, mem, costs, sigs)], the fronts of every
    final state. A state is the layout of each output still to be read by a later call (the
    previous call's, and any read again further on: one LayerNorm feeding query, key and
    value), so fan-out is priced as recorded. forced: {node index: per-axis candidate names}
    to keep those choices."""
    srcs = [n.src if n.src is not None else i - 1 for i, n in enumerate(nodes)]
    last_read = {}
    for i, j in enumerate(srcs):
        last_read[j] = i
    front = {((-1, tuple(start)),): [(0.0, 0.0, _Costs(), ())]}
    for i, node in enumerate(nodes):
        ndim_in = len(node.x_shape)
        nxt = {}
        for state, entries in front.items():
            live = dict(state)
            layout = live.get(srcs[i], live.get(i - 1, tuple(start)))
            if node.cands is None:
                out, cost = _pass_through(node, layout, model, ndim_in)
                options = [(out, cost, None)]
            else:
                options = []
                for sig in itertools.product(*node.cands):
                    if forced and i in forced and forced[i] != tuple(c.name for c in sig):
                        continue
                    x = tuple(c.x for c in sig)
                    cost = model.boxing(layout, x, node.x_bytes, ndim_in)
                    if model.training and not node.first:
                        cost = cost + model.boxing(tuple(c.dx for c in sig),
                                                   tuple(_grad_need(w) for w in layout),
                                                   node.x_bytes, ndim_in)
                    cost = cost + model.node(node, sig, zero)
                    out = tuple(_norm(c.y, len(node.y_shape)) for c in sig)
                    if "P" in out and i not in last_read and i + 1 < len(nodes) and \
                            nodes[i + 1].src is not None:
                        # a partial sum read only by code outside the modules (attention's
                        # products): priced as made whole there
                        whole = tuple("B" if w == "P" else w for w in out)
                        cost = cost + model.boxing(out, whole, node.y_bytes, len(node.y_shape))
                        out = whole
                    options.append((out, cost, sig))
            for out, cost, sig in options:
                keep = {j: v for j, v in live.items() if last_read.get(j, -2) > i}
                keep[i] = out  # the next call reads it when its input is unknown
                key = tuple(sorted(keep.items()))
                bucket = nxt.setdefault(key, [])
                for score, mem, costs, sigs in entries:
                    total = costs + cost
                    bucket.append((model.score(total), total.mem, total, sigs + (sig,)))
        front = {k: _pareto(v, cap) for k, v in nxt.items()}
    return [e for entries in front.values() for e in entries]


def _pareto(entries, cap):
    entries.sort(key=lambda e: (e[0], e[1]))
    kept, best_mem = [], math.inf
    for e in entries:
        if e[1] < best_mem - 1e-9:
            kept.append(e)
            best_mem = e[1]
    if len(kept) > cap:  # keep the fastest, the smallest and an even spread between
        step = (len(kept) - 1) / (cap - 1)
        kept = [kept[round(i * step)] for i in range(cap)]
    return kept


class AutoPlan:
    """The chosen plan of one graph: what it applies before the trace and what print shows."""

    def __init__(self, graph, nodes, model, placement, best, runner_up, limit, static_mem,
                 searched):
        self.graph_name = graph._name
        self.nodes, self.model, self.placement = nodes, model, placement
        self.best, self.runner_up, self.limit = best, runner_up, limit
        self.static_mem = static_mem
        self.searched = searched
        self.start = None  # the graph input's layout the chain starts from
        self.boxing_lines = []

    # ---- applying

    def layout_parameters(self, graph):
        """Each free parameter (and its optimizer state) to its chosen SBP."""
        states = {}
        for opt, _ in graph._optimizers:
            for p, st in opt.state.items():
                states[id(p)] = st
        with no_grad():
            for node, sig in zip(self.nodes, self.best.sigs):
                if sig is None:
                    continue
                for pname, p in node.params.items():
                    if pname in node.fixed:
                        continue
                    nd = tuple(_to_sbp(c.params.get(pname, "B"), p.dim()) for c in sig)
                    if tuple(p.sbp) != nd:
                        p.data = p.data.to_global(placement=p.placement, sbp=nd)
                        for k, v in states.get(id(p), {}).items():
                            if isinstance(v, _C.Tensor) and v.is_global and \
                                    tuple(v.shape) == tuple(p.shape):
                                states[id(p)][k] = v.to_global(placement=p.placement, sbp=nd)

    def boxing(self):
        """While build is traced: each chosen module's input boxed to its chosen layout."""
        plan = self

        @contextlib.contextmanager
        def hooks():
            handles = []
            for node, sig in zip(plan.nodes, plan.best.sigs):
                if sig is None:
                    continue

                def pre(m, args, sig=sig):
                    x = args[0]
                    if not isinstance(x, _C.Tensor) or not x.is_global:
                        return None
                    nd = tuple(_to_sbp(c.x, x.dim()) for c in sig)
                    if tuple(x.sbp) == nd:
                        return None
                    return (x.to_global(placement=x.placement, sbp=nd),) + tuple(args[1:])
                handles.append(node.module.register_forward_pre_hook(pre))
            try:
                yield
            finally:
                for h in handles:
                    h.remove()

        return hooks()

    def note_boxing(self, describe):
        """The boxing the trace inserted (the plan's steps that change a layout)."""
        self.boxing_lines = [line.strip() for line in describe.splitlines()
                             if "to_global" in line or "boxing" in line]

    def evaluate(self, names, zero=None):
        """The predicted costs of another plan: names[i] is node i's per-axis candidate names
        (None for a module without parameters); the fastest such plan's costs, or None when
        no candidate matches."""
        zero = self.best.zero if zero is None else zero
        forced = {i: tuple(n) for i, n in enumerate(names) if n is not None}
        found = _chain_dp(self.nodes, self.start, self.model, zero, forced=forced)
        if not found:
            return None
        return min(found, key=lambda e: e[0])[2] + _Costs(mem=self.static_mem)

    # ---- printing

    def _sig_text(self, node, sig):
        if sig is None:
            return None
        names = ", ".join(c.name for c in sig)
        ps = "; ".join(f"{pn} ({', '.join(c.params.get(pn, 'B') for c in sig)})"
                       + (" [user]" if pn in node.fixed else "") for pn in node.params)
        return (f"{node.name} ({node.kind}): {names}: x ({', '.join(c.x for c in sig)}) -> "
                f"y ({', '.join(c.y for c in sig)}); {ps}")

    def _costs_text(self, c):
        return (f"memory {c.mem / 2**20:.3f} MiB, compute {c.compute * 1e3:.3f} ms, "
                f"communication {c.comm * 1e3:.3f} ms ({c.moved / 2**20:.3f} MiB in "
                f"{c.collectives} collectives), step {(c.compute + c.comm) * 1e3:.3f} ms")

    def why_runner_up_lost(self):
        b, r = self.best, self.runner_up
        if r is None:
            return "no other plan exists (every choice is fixed)"
        diffs = [f"{n.name}: {', '.join(c.name for c in rs)} instead of "
                 f"{', '.join(c.name for c in bs)}"
                 for n, bs, rs in zip(self.nodes, b.sigs, r.sigs) if bs is not None and
                 tuple(c.name for c in bs) != tuple(c.name for c in rs)]
        if r.zero != b.zero:
            diffs.append(f"ZeRO stage {r.zero} instead of {b.zero}")
        if self.limit is not None and r.costs.mem > self.limit:
            reason = (f"over the memory limit ({r.costs.mem / 2**20:.3f} MiB > "
                      f"{self.limit / 2**20:.3f} MiB)")
        elif abs(self.model.score(r.costs) - self.model.score(b.costs)) < 1e-12:
            reason = "the same predicted cost (a tie: the chosen plan came first in search order)"
        else:
            weight = "" if self.model.ratio == 1 else f", compute weighted {self.model.ratio:g}x"
            slower = (self.model.score(r.costs) - self.model.score(b.costs)) * 1e3
            compute = (r.costs.compute - b.costs.compute) * 1e3
            reason = (f"predicted {slower:.3f} ms slower{weight} (compute {compute:+.3f} ms, "
                      f"communication {(r.costs.comm - b.costs.comm) * 1e3:+.3f} ms, memory "
                      f"{(r.costs.mem - b.costs.mem) / 2**20:+.3f} MiB)")
        return f"{'; '.join(diffs) or 'the same choices'}: {reason}"

    def describe(self):
        mesh = "x".join(str(n) for n in self.model.hierarchy)
        lim = "none" if self.limit is None else f"{self.limit / 2**20:.3f} MiB"
        lines = [f"(AUTO PARALLEL: mesh {mesh} on {self.placement}, profile "
                 f"{self.model.profile.name!r}, memory limit {lim}, {self.searched}): ("]
        for node, sig in zip(self.nodes, self.best.sigs):
            text = self._sig_text(node, sig)
            if text:
                lines.append("  " + text)
        lines.append(f"  ZeRO stage {self.best.zero}")
        for line in self.boxing_lines:
            lines.append("  boxing: " + line)
        lines.append("  predicted per device: " + self._costs_text(self.best.costs))
        if self.runner_up is not None:
            lines.append("  runner-up: " + self._costs_text(self.runner_up.costs))
        lines.append("  why the runner-up lost: " + self.why_runner_up_lost())
        lines.append(")")
        return "\n".join(lines)


def _fix_user_layouts(graph_name, nodes, ignore, ours, hierarchy):
    """Restricts each node's candidates to its user-laid-out parameters' SBP (unless ignored)."""
    for node in nodes:
        if node.cands is None:
            continue
        for pname, p in node.params.items():
            words = tuple(_sbp_word(s) for s in p.sbp)
            if ignore or id(p) in ours or all(w == "B" for w in words):
                continue
            node.fixed[pname] = words
        if not node.fixed:
            continue
        for a in range(len(node.cands)):
            if hierarchy[a] == 1:
                continue  # one rank: every layout is the whole tensor
            kept = [c for c in node.cands[a] if all(
                _norm(c.params.get(pn, "B"), node.params[pn].dim()) ==
                _norm(words[a], node.params[pn].dim()) for pn, words in node.fixed.items())]
            if not kept:
                fixed = {pn: w[a] for pn, w in node.fixed.items()}
                raise ValueError(
                    f"nn.Graph {graph_name}: auto-parallel has no signature for "
                    f"{node.name} ({node.kind}) with the user's parameter layout {fixed} on mesh "
                    f"axis {a}; remove the layout (broadcast) or "
                    f"enable_auto_parallel_ignore_user_sbp_config(True)")
            node.cands[a] = kept


def _keep_shared_whole(nodes):
    """A parameter two modules share (a tied embedding and head) stays broadcast: the nodes'
    costs are priced apart, and one layout could not follow both choices."""
    users = {}
    for node in nodes:
        for p in node.params.values():
            users[id(p)] = users.get(id(p), 0) + 1
    for node in nodes:
        shared = [pn for pn, p in node.params.items() if users[id(p)] > 1]
        if node.cands is None or not shared:
            continue
        for a in range(len(node.cands)):
            kept = [c for c in node.cands[a] if all(c.params.get(pn, "B") == "B" for pn in shared)]
            node.cands[a] = kept or node.cands[a]


def prepare(graph, args, kwargs, tensors):
    """The AutoPlan of graph for these inputs, applied (parameters laid out, ZeRO set)."""
    config = graph.config
    name = graph._name
    params = [p for m in graph._modules.values() for p in m.parameters()]
    if not params:
        raise ValueError(f"nn.Graph {name}: auto-parallel chooses parameters' SBP; the graph "
                         f"has no parameters")
    local = [p for p in params if not p.is_global]
    if local:
        raise ValueError(f"nn.Graph {name}: auto-parallel needs global parameters (module."
                         f"to_global(placement, flow.sbp.broadcast)); got a local one of shape "
                         f"{tuple(local[0].shape)}")
    placements = {str(p.placement) for p in params}
    if len(placements) > 1 or micro_batches.num_stages(graph):
        raise NotImplementedError(f"nn.Graph {name}: auto-parallel searches one placement; the "
                                  f"parameters are on {len(placements)} (pipeline stages are not "
                                  f"in its space yet)")
    for i, t in enumerate(tensors):
        if not t.is_global:
            raise ValueError(f"nn.Graph {name}: auto-parallel needs global inputs (x.to_global("
                             f"placement, sbp)); input {i} is local")
    placement = params[0].placement
    hierarchy = tuple(placement.hierarchy)
    profile = config._auto_profile or load_profile(
        "local_cpu" if placement.type == "cpu" else "a100_80gb")
    dtype_key = {"oneflow.float32": "fp32", "oneflow.float64": "fp64", "oneflow.float16": "fp16",
                 "oneflow.bfloat16": "bf16"}.get(str(params[0].dtype), "fp32")
    training = bool(graph._optimizers)
    slots = max([len([n for n in opt._state_names(g) if n != "step"])
                 for opt, _ in graph._optimizers for g in opt.param_groups] or [0])
    model = _Model(hierarchy, profile, dtype_key, training, slots, config._auto_compute_ratio,
                   config._auto_wait_time)

    nodes = _record(graph, args, kwargs)
    if not nodes:
        raise ValueError(f"nn.Graph {name}: auto-parallel found no module call in build")
    for node in nodes:
        if node.params:
            make = {"Linear": _linear_cands, "Conv2d": _conv_cands}.get(node.kind)
            node.cands = [(make() if make else _other_cands(node.module)) if n > 1 else
                          [_other_cands(node.module)[-1]] for n in hierarchy]  # 1 rank: whole
    # parameters an earlier compile of this graph laid out are free again
    ours = config.__dict__.setdefault("_auto_laid_out", set())
    _fix_user_layouts(name, nodes, config._auto_ignore_user_sbp, ours, hierarchy)
    _keep_shared_whole(nodes)
    covered = {id(p) for n in nodes for p in n.params.values()}
    static = sum(p.numel() * p.element_size() * (2 + slots if training else 1)
                 for p in params if id(p) not in covered)

    start = tuple(_sbp_word(s) for s in tensors[0].sbp) if tensors else ("B",) * len(hierarchy)
    zeros = [config._zero_stage]
    if training and not config._zero_stage and max(hierarchy) > 1 and \
            all(opt._elementwise for opt, _ in graph._optimizers):
        zeros = [0, 1, 2]
    limit = config._auto_memory_limit
    plans = []
    for z in zeros:
        for score, mem, costs, sigs in _chain_dp(nodes, start, model, z):
            costs = costs + _Costs(mem=static)
            plans.append(_Choice(sigs, z, costs, None))
    fits = [p for p in plans if limit is None or p.costs.mem <= limit]
    if not fits:
        smallest = min(plans, key=lambda p: p.costs.mem)
        raise RuntimeError(
            f"nn.Graph {name}: auto-parallel found no plan within the memory limit of "
            f"{limit:.0f} bytes per device; the smallest needs {smallest.costs.mem:.0f}")
    key = lambda p: (round(model.score(p.costs), 12), p.costs.mem, p.zero)  # noqa: E731
    fits.sort(key=key)
    best = fits[0]

    def names(p):
        return (tuple(None if s is None else tuple(c.name for c in s) for s in p.sigs), p.zero)

    # The runner-up: the best plan that differs in some choice (forcing each other candidate of
    # each node in turn, and each other ZeRO stage), within the limit where one is.
    others = [p for p in plans if names(p) != names(best)]
    for i, node in enumerate(nodes):
        if node.cands is None:
            continue
        for sig in itertools.product(*node.cands):
            forced = tuple(c.name for c in sig)
            if forced == tuple(c.name for c in best.sigs[i]):
                continue
            for score, mem, costs, sigs in _chain_dp(nodes, start, model, best.zero,
                                                     forced={i: forced}):
                others.append(_Choice(sigs, best.zero, costs + _Costs(mem=static), None))
    within = [p for p in others if limit is None or p.costs.mem <= limit]
    pool = within or others
    runner = min(pool, key=key) if pool else None

    if not config._zero_stage and best.zero:
        config._zero_stage = best.zero
        config._zero_min_size = 1
    count = sum(1 for n in nodes if n.cands is not None)
    plan = AutoPlan(graph, nodes, model, placement, best, runner, limit, static,
                    f"exact over a chain of {len(nodes)} calls, {count} with parameters")
    plan.start = start
    plan.layout_parameters(graph)
    ours.update(id(p) for n, sig in zip(nodes, best.sigs) if sig is not None
                for pn, p in n.params.items() if pn not in n.fixed)
    config._auto_plan = plan
    return plan
