"""Modules built on the meta device (shapes and dtypes, no memory) made real: to_empty on one
device, or to_global, where each rank allocates only its shards and the modules' own
reset_parameters() (or a given init) fill them, drawing what the same seed gives one process
building the module locally (random creation is layout-invariant).

    with flow.device("meta"):
        model = GPT(...)                                   # no memory
    model.to_global(placement, sbp=lambda name: S(0) if "c_fc" in name else B)
"""

import oneflow._oneflow_internal as _C
from oneflow import _global
from oneflow._grad_mode import no_grad


def has_meta(module):
    return any(t is not None and t.is_meta
               for m in module.modules() for t in (*m._parameters.values(), *m._buffers.values()))


def is_sbp_fn(sbp):
    """sbp given as a function of a tensor's name (flow.sbp values are callable too)."""
    return callable(sbp) and not isinstance(sbp, (_global.sbp.sbp, tuple, list))


def _layout(placement, sbp, name):
    s = sbp(name) if is_sbp_fn(sbp) else sbp
    return placement, _global._sbp_tuple(s, len(placement.hierarchy), "to_global")


def _whole_to_global(t, placement, sbp):
    """A local tensor read as the whole value (every rank keeps its piece)."""
    whole = (_global.sbp.broadcast,) * len(placement.hierarchy)
    return t.to_global(placement=placement, sbp=whole).to_global(sbp=sbp)


def to_global(module, placement, sbp, init):
    """Module.to_global of a module holding meta tensors (see the module docstring). sbp: one
    sbp (tuple) for every tensor, or a function of a tensor's qualified name giving it. init:
    called with each module that holds meta tensors, instead of its reset_parameters()."""
    if placement is None or sbp is None:
        raise ValueError("to_global: a module on the meta device needs both placement and sbp")
    if not isinstance(placement, _global.placement):
        raise TypeError(f"to_global: placement must be a flow.placement, got {placement!r}")
    if _C.default_device().type == "meta":
        if init is not None:
            raise ValueError("to_global: init= initialises data, and under the meta device the "
                             "module stays meta (global meta tensors hold none); call it "
                             "outside `with flow.device('meta')`")
        return _to_global_meta(module, placement, sbp)
    done = set()  # ids of the parameters materialised and initialised so far
    # A module whose parameters were meta runs its initialisation, also where they are all tied
    # to an earlier module's: it drew when it was built locally too.
    was_meta = {id(t) for m in module.modules() for t in m._parameters.values()
                if t is not None and t.is_meta}
    for prefix, mod in module.named_modules():  # refused before anything is allocated
        holds = any(t is not None and t.is_meta
                    for t in (*mod._parameters.values(), *mod._buffers.values()))
        if holds and init is None and not hasattr(mod, "reset_parameters"):
            raise ValueError(
                f"to_global: module '{prefix or type(mod).__name__}' ({type(mod).__name__}) "
                f"holds meta tensors and has no reset_parameters(); pass init=fn (called with "
                f"each such module) to initialise them")
    with no_grad():
        for prefix, mod in module.named_modules():  # parents first, in construction order
            name = (lambda k: f"{prefix}.{k}" if prefix else k)
            shared = [p for p in mod._parameters.values() if p is not None and id(p) in done]
            fresh = any(p is not None and id(p) in was_meta for p in mod._parameters.values())
            for k, p in mod._parameters.items():
                if p is None or id(p) in done:
                    continue
                pl, s = _layout(placement, sbp, name(k))
                if p.is_global and not p.is_meta:
                    p.data = p.data.to_global(placement=pl, sbp=s)
                elif p.is_meta:  # local or global meta: its shard of the new layout
                    p.data = _global._build_global(_C.empty, (list(p.shape), p.dtype, "cpu"), {},
                                                   (pl, s))
                else:
                    p.data = _whole_to_global(p.data, pl, s)
                done.add(id(p))
            meta_buffers = [k for k, b in mod._buffers.items() if b is not None and b.is_meta]
            if fresh or meta_buffers:
                # A tied parameter initialised by an earlier module keeps its values; this
                # module's draws still happen, as they did when it was built locally.
                saved = [(p, p.detach().clone()) for p in shared]
                if init is not None:
                    init(mod)
                else:
                    mod.reset_parameters()
                for p, value in saved:
                    p.copy_(value)
            for k, b in list(mod._buffers.items()):
                if b is None or (b.is_global and not b.is_meta):
                    continue
                if b.is_meta:
                    raise ValueError(
                        f"to_global: buffer '{name(k)}' is still on the meta device after "
                        f"{'init' if init is not None else 'reset_parameters()'} of its module; "
                        f"set it there (a local value is read as the whole buffer)")
                pl, s = _layout(placement, sbp, name(k))
                mod._buffers[k] = _whole_to_global(b, pl, s)
    return module


def _to_global_meta(module, placement, sbp):
    """Under `with flow.device("meta")`: every meta parameter and buffer becomes a global meta
    tensor of its logical shape with its layout (shapes, dtypes and SBPs, no data; any
    placement, also one larger than the job). Tied parameters stay tied."""
    done = set()  # ids of the tensors placed (a tied parameter takes its first name's layout)
    with no_grad():
        for prefix, mod in module.named_modules():
            for table in (mod._parameters, mod._buffers):
                for k, t in list(table.items()):
                    if t is None or id(t) in done or not t.is_meta:
                        continue
                    pl, s = _layout(placement, sbp, f"{prefix}.{k}" if prefix else k)
                    if t.is_global:
                        placed = t.data.to_global(placement=pl, sbp=s)
                    else:
                        placed = _global._build_global(
                            _C.empty, (list(t.shape), t.dtype, "meta"), {}, (pl, s))
                    if table is mod._parameters:
                        t.data = placed
                        done.add(id(t))
                    else:
                        table[k] = placed
    return module


def to_empty(module, device):
    """Every parameter and buffer as uninitialised memory of its shape and dtype on device."""
    def empty(t):
        return _C.empty(list(t.shape), t.dtype, device)
    return module._apply(empty)
