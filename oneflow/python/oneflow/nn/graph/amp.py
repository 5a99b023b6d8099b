"""AMP in nn.Graph: the GradScaler's loss scale as tensors the plan holds (_Scaling), the
gradients unscaled in the trace with a count of their inf/NaN elements (unscale), and what the
trace's own call does when that count is not 0 (the update undone: snapshot/restore; the
replay skips it by the plan's guard). Autocast around build itself: micro_batches.py.

    scaling = _Scaling(scaler, params, tensors)
    flag = unscale(opt, scaling)                  # gradients /= scale; inf/NaN count
    if flag_value(plan, flag) != 0: restore(plan, opt, snapshot(plan, opt))
"""

import oneflow._oneflow_internal as _C
from oneflow import env
from oneflow._creation import tensor
from oneflow._grad_mode import no_grad
from oneflow._math_api import isfinite
from oneflow.nn.graph.tracing import _graph_device, _paused


def unscale(opt, scaling):
    """GradScaler's unscale_ in the trace: the gradients divided by the scale in place, and
    the count of inf/NaN elements among them (broadcast on every rank of the job)."""
    counts = {}  # per placement (or device): the sum of its gradients' inf/NaN counts
    with no_grad():
        for group in opt.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                bad = (~isfinite(g)).to(_C.float32).sum()
                key = (g.placement, tuple(bad.sbp)) if g.is_global else str(g.device)
                counts[key] = bad if key not in counts else counts[key] + bad
                g.mul_(scaling.like("inv", g))
        flag = None
        for bad in counts.values():  # one reduction per placement, to every rank
            if bad.is_global:
                everywhere = _C.placement(
                    bad.placement.type, ranks=list(range(env.get_world_size())))
                bad = bad.to_global(placement=everywhere, sbp=_C.sbp.broadcast)
            flag = bad if flag is None else flag + bad
    return flag


def flag_value(plan, flag):
    """The inf/NaN count of the trace's own call, read without tracing."""
    with _paused(plan):
        local = flag.to_local() if flag.is_global else flag
        return float(local.item())  # paused: the trace lets the read through


def snapshot(plan, opt):
    """Copies of the parameters and state an update would change (tracing paused)."""
    with _paused(plan), no_grad():
        params = [(p, p.detach().clone()) for g in opt.param_groups for p in g["params"]]
        states = {}
        for p, _ in params:
            st = opt.state.get(p, {})
            states[id(p)] = {k: (v.detach().clone() if isinstance(v, _C.Tensor) else v)
                             for k, v in st.items()}
    return params, states

def restore(plan, opt, snapshot):
    params, states = snapshot
    with _paused(plan), no_grad():
        for p, saved in params:
            p.copy_(saved)
            st = opt.state.get(p, {})
            for k, v in states[id(p)].items():
                if isinstance(v, _C.Tensor) and isinstance(st.get(k), _C.Tensor):
                    st[k].copy_(v)
                else:
                    st[k] = v


class _Scaling:
    """A graph's loss scale as tensors the plan holds (so a new scale needs no new compile):
    the scale and its inverse on the graph's device, laid out like the tensor they meet."""

    def __init__(self, scaler, params, tensors):
        self.scaler = scaler
        device = _graph_device(params, tensors)
        value = scaler.get_scale()
        self.current = value
        self.values = {"scale": tensor(value, dtype=_C.float32, device=device),
                       "inv": tensor(1.0 / value, dtype=_C.float32, device=device)}

    def follow(self):
        """The tensors take the scaler's scale (GradScaler.load_state_dict, update(new_scale))."""
        value = self.scaler.get_scale()
        if value != self.current:
            self.current = value
            with no_grad():
                self.values["scale"].fill_(value)
                self.values["inv"].fill_(1.0 / value)

    def like(self, which, t):
        value = self.values[which]
        if t.is_global:
            return value.to_global(placement=t.placement,
                                   sbp=(_C.sbp.broadcast,) * len(t.placement.hierarchy))
        return value if value.device == t.device else value.to(t.device)

    def update(self, found_infs):
        """GradScaler.update after a step whose optimizers found inf/NaN or not."""
        from oneflow.amp import GradScaler

        if not found_infs:
            return
        scaler = self.scaler
        scaler._per_optimizer = {k: {"stage": GradScaler._STEPPED, "found_inf": bool(f)}
                                 for k, f in enumerate(found_infs)}
        scaler.update()
        self.follow()

