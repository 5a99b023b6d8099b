"""Gradient accumulation and pipeline stages in nn.Graph's build (OneFlow's semantics): each
tensor input cut into n micro-batches along dim 0, build run on each, backward scaling the loss
by 1/n, and with S pipeline stages (GraphModule.set_stage) each micro-batch's backward started
once S forwards are in flight.

    out = build_micro_batches(graph, tracing, args, kwargs, tensors, scaling, amp_device)
"""

from oneflow._ops import cat, stack
from oneflow.nn.graph._flatten import _flatten, _unflatten
from oneflow.nn.graph_module import module_config


def num_stages(graph):
    """How many pipeline stages set_stage made among the graph's modules (0: none)."""
    return len({module_config(m).stage_id for m in graph._submodules()
                if module_config(m) is not None and module_config(m).stage_placement
                is not None})


def build_micro_batches(graph, tracing, args, kwargs, tensors, scaling, amp_device):
    """build once, or with gradient accumulation over n steps: each tensor input is cut into n
    micro-batches along dim 0, build runs on each with backward scaling the loss by 1/n, the
    gradients add up, the optimizer steps once; each output is the micro-batches' outputs
    concatenated along dim 0 (scalars stacked). With S pipeline stages a micro-batch's backward
    waits until S forwards are in flight (F0 F1 B0 F2 B1 .. for 2 stages), so each stage has
    the next micro-batch to work on while the next stage works on this one, and at most S
    micro-batches' activations are kept. With a grad scaler, backward scales the loss; with
    AMP, build runs under autocast and backward outside it (as eager code calls it)."""
    n = graph.config._accumulation_steps
    amp = graph.config._amp_dtype
    in_flight = num_stages(graph) if n > 1 else 0
    deferred = []

    def graph_backward(run, loss, gradient, retain_graph, create_graph, inputs):
        if gradient is None:
            if n > 1:
                loss = loss * (1.0 / n)
            if scaling is not None:
                loss = loss * scaling.like("scale", loss)
        if in_flight:
            deferred.append((run, loss, gradient, retain_graph, create_graph, inputs))
            return None
        if amp is None:
            return run(loss, gradient, retain_graph, create_graph, inputs)
        from oneflow.amp import autocast

        with autocast(amp_device, amp, enabled=False):
            return run(loss, gradient, retain_graph, create_graph, inputs)

    def build(*a, **kw):
        if amp is None:
            return graph.build(*a, **kw)
        from oneflow.amp import autocast

        with autocast(amp_device, amp):
            return graph.build(*a, **kw)

    if n == 1 and scaling is None and amp is None:
        return graph.build(*args, **kwargs)
    for i, t in enumerate(tensors):
        if n > 1 and (t.ndim == 0 or t.shape[0] % n != 0):
            raise RuntimeError(
                f"nn.Graph {graph._name}: gradient accumulation over {n} micro-batches needs "
                f"each input's dim 0 divisible by {n}, got shape {tuple(t.shape)} for "
                f"tensor input {i}")
    tracing.on_backward = graph_backward
    try:
        if n == 1:
            return build(*args, **kwargs)
        template = _flatten((args, kwargs), [])
        outs = []
        for k in range(n):
            micro = [t[k * (t.shape[0] // n):(k + 1) * (t.shape[0] // n)] for t in tensors]
            micro_args, micro_kwargs = _unflatten(template, micro)
            outs.append(build(*micro_args, **micro_kwargs))
            while len(deferred) >= in_flight > 0 or (deferred and k == n - 1):
                run, *call = deferred.pop(0)
                run(*call)
    finally:
        tracing.on_backward = None
    leaves = []
    for out in outs:
        flat = []
        out_template = _flatten(out, flat)
        leaves.append(flat)
    joined = [stack(list(parts)) if parts[0].ndim == 0 else cat(list(parts), dim=0)
              for parts in zip(*leaves)]
    return _unflatten(out_template, joined)
