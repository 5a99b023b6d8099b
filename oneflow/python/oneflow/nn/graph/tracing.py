"""nn.Graph's trace of build: while it runs, module calls reach it through nn.Module.__call__'s
hook list (they name the plan's scope, move a pipeline stage's inputs, recompute checkpointed
modules) and Tensor.backward and the host value reads reach it through oneflow/_trace_state.py
(a read of a traced tensor, which a replay could not redo, is a one-line error naming the
module and the op). Nothing is patched.

    with _Tracing(graph, plan, module_names, state_ids) as tracing:
        plan.begin_trace(inputs)
        out = graph.build(*inputs)        # tracing.on_backward may reroute loss.backward()
"""

import contextlib

import oneflow._oneflow_internal as _C
from oneflow import _trace_state
from oneflow.nn.graph_module import module_config
from oneflow.nn.modules import module as module_lib


@contextlib.contextmanager
def _paused(plan):
    """Work inside a trace that the replay must not redo (host reads, snapshots)."""
    trace = _trace_state.current()
    plan.pause_trace()
    if trace is not None:
        trace.paused += 1
    try:
        yield
    finally:
        if trace is not None:
            trace.paused -= 1
        plan.resume_trace()


def _graph_device(params, tensors):
    """Where a graph computes: its first parameter's device, else its first input's (a
    placement's device type for a global tensor, "cuda"; else the device, "cuda:1")."""
    for t in list(params) + list(tensors):
        return t.placement.type if t.is_global else str(t.device)
    return "cpu"


def _to_stage(graph, where, config, value):
    """value's tensors moved to a pipeline stage's placement (their SBP kept where the
    placement's hierarchy has as many dimensions, else broadcast)."""
    pl = config.stage_placement  # partial sums are summed on the way
    if isinstance(value, _C.Tensor):
        if not value.is_global:
            raise RuntimeError(
                f"nn.Graph {graph._name}: module '{where}' is pipeline stage {config.stage_id} on "
                f"{pl} but got a local tensor; pipeline stages take global tensors")
        if value.placement == pl:
            return value
        sbp = tuple(value.sbp)
        if len(sbp) != len(pl.hierarchy) or _C.sbp.partial_sum in sbp:
            sbp = (_C.sbp.broadcast,) * len(pl.hierarchy)
        return value.to_global(placement=pl, sbp=sbp)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_stage(graph, where, config, v) for v in value)
    if isinstance(value, dict):
        return {k: _to_stage(graph, where, config, v) for k, v in value.items()}
    return value


def _eager_call(module, *args, **kwargs):
    return module_lib.call_eagerly(module, args, kwargs)


def _checkpointed(module, *args, **kwargs):
    """module's call without saving its activations; backward runs it again with the forward's
    random state (the plan gives those draws the forward's numbers on every replay). The state
    is kept as numbers: checkpoint's own copy is a tensor, which the trace would record."""
    from oneflow.utils.checkpoint import checkpoint

    forward_state = []

    def forward_again(mod, *a, **k):
        if not forward_state:
            forward_state.append(_C.generator_state())
            return module_lib.call_eagerly(mod, a, k)
        now = _C.generator_state()
        _C.set_generator_state(*forward_state[0])
        try:
            return module_lib.call_eagerly(mod, a, k)
        finally:
            _C.set_generator_state(*now)

    return checkpoint(forward_again, module, *args, preserve_rng_state=False, **kwargs)


class _Tracing:
    """The trace of one compile (see the module's docstring)."""

    def __init__(self, graph, plan, module_names, state_ids):
        self.graph, self.plan = graph, plan
        self.module_names = module_names
        self.state_ids = state_ids
        self.scope = []
        self.paused = 0
        # on_backward(run, loss, gradient, retain_graph, create_graph, inputs), set by the
        # micro-batches (micro_batches.py): loss.backward() in build goes there.
        self.on_backward = None

    def __enter__(self):
        outer = _trace_state.current()
        if outer is not None:
            raise RuntimeError(
                f"nn.Graph {self.graph._name}: cannot call a graph inside {outer.graph._name}.build")
        _trace_state.begin(self)
        module_lib._module_call_hooks.append(self.call_module)
        return self

    def __exit__(self, *exc):
        module_lib._module_call_hooks.remove(self.call_module)
        _trace_state.end()
        return False

    # ---- what reaches the trace

    def call_module(self, module, args, kwargs):
        """Module.__call__ while tracing (nn/modules/module.py's hook list)."""
        name = self.module_names.get(id(module))
        config = module_config(module)
        if name is None and config is None:
            return module_lib.call_eagerly(module, args, kwargs)
        run = _eager_call
        if config is not None:
            where = name or type(module).__name__
            if config.stage_placement is not None:
                args, kwargs = _to_stage(self.graph, where, config, (args, kwargs))
            if config.activation_checkpointing and _C.is_grad_enabled():
                run = _checkpointed
        if name is None:
            return run(module, *args, **kwargs)
        self.scope.append(name)
        self.plan.set_scope(name)
        try:
            return run(module, *args, **kwargs)
        finally:
            self.scope.pop()
            self.plan.set_scope(self.scope[-1] if self.scope else "")

    def read(self, tensor, method):
        """Tensor.<method> reads tensor's value on the host (oneflow/_trace_state.py)."""
        if self.paused:
            return
        if self.plan.traced(tensor) or id(tensor) in self.state_ids:
            where = self.scope[-1] if self.scope else "<graph>"
            made_by = self.plan.producer_of(tensor)
            raise RuntimeError(
                f"nn.Graph {self.graph._name}: build reads a tensor's value "
                f"(Tensor.{method}) in module '{where}' ({made_by}); a compiled graph "
                f"replays without Python and cannot depend on tensor values")

    def backward(self, loss, run, gradient, retain_graph, create_graph, inputs):
        """Tensor.backward in build (oneflow/_trace_state.py); run is the eager backward."""
        if self.on_backward is None:
            return run(loss, gradient, retain_graph, create_graph, inputs)
        return self.on_backward(run, loss, gradient, retain_graph, create_graph, inputs)
