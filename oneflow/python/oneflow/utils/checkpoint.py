"""oneflow.utils.checkpoint: activation checkpointing, as torch.utils.checkpoint.

    from oneflow.utils.checkpoint import checkpoint, checkpoint_sequential
    y = checkpoint(block, x)                 # block's activations are recomputed in backward
    y = checkpoint_sequential(seq, 2, x)     # an nn.Sequential in 2 segments

The forward runs without recording a graph; backward runs the function again (with the random
state of the forward, so dropout draws the same mask) and backpropagates through it. The
parameters the function uses get their gradients even when no input requires grad (PyTorch's
use_reentrant=False behaviour).
"""

import oneflow as flow

__all__ = ["checkpoint", "checkpoint_sequential"]


def _outputs(out, what):
    if isinstance(out, flow.Tensor):
        return [out]
    if isinstance(out, (tuple, list)) and all(isinstance(o, flow.Tensor) for o in out):
        return list(out)
    kinds = type(out).__name__ if not isinstance(out, (tuple, list)) else \
        [type(o).__name__ for o in out]
    raise TypeError(f"{what}: the function must return a tensor or a tuple of tensors, got {kinds}")


class _Checkpoint(flow.autograd.Function):
    @staticmethod
    def forward(ctx, run, preserve_rng_state, kwargs, *args):
        inputs = args[:-1]  # the last one is the anchor that ties the output to the graph
        ctx.run, ctx.kwargs = run, kwargs
        ctx.rng = flow.default_generator.get_state() if preserve_rng_state else None
        ctx.tensor_pos = [i for i, a in enumerate(inputs) if isinstance(a, flow.Tensor)]
        ctx.inputs = [None if i in ctx.tensor_pos else a for i, a in enumerate(inputs)]
        ctx.save_for_backward(*[inputs[i] for i in ctx.tensor_pos])
        out = run(*inputs, **kwargs)
        ctx.single = isinstance(out, flow.Tensor)
        outs = _outputs(out, "checkpoint")
        # outputs that alias an input would share its autograd identity: give fresh tensors
        return outs[0].clone() if ctx.single else tuple(o.clone() for o in outs)

    @staticmethod
    def backward(ctx, *grads):
        inputs = list(ctx.inputs)
        for i, t in zip(ctx.tensor_pos, ctx.saved_tensors):
            d = t.detach()
            if t.requires_grad:
                d.requires_grad_(True)
            inputs[i] = d
        now = None
        if ctx.rng is not None:
            now = flow.default_generator.get_state()
            flow.default_generator.set_state(ctx.rng)
        try:
            with flow.enable_grad():
                outs = _outputs(ctx.run(*inputs, **ctx.kwargs), "checkpoint")
        finally:
            if now is not None:
                flow.default_generator.set_state(now)
        pairs = [(o, g) for o, g in zip(outs, grads) if o.requires_grad and g is not None]
        if pairs:
            flow.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        in_grads = [None] * len(inputs)
        for i in ctx.tensor_pos:
            in_grads[i] = inputs[i].grad if inputs[i].requires_grad else None
        return (None, None, None) + tuple(in_grads) + (None,)


def checkpoint(function, *args, use_reentrant=None, preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs), keeping none of its activations for backward: they are
    recomputed there. use_reentrant is accepted for PyTorch's signature (both modes behave
    as use_reentrant=False)."""
    if not callable(function):
        raise TypeError(f"checkpoint: function must be callable, got {type(function).__name__}")
    if not flow.is_grad_enabled():
        return function(*args, **kwargs)
    anchor = flow.zeros((), requires_grad=True)
    return _Checkpoint.apply(function, bool(preserve_rng_state), kwargs, *args, anchor)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Runs functions (an nn.Sequential or a list of modules) on input in `segments` parts,
    each but the last under checkpoint()."""
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("checkpoint_sequential: unexpected keyword arguments: " + ", ".join(kwargs))
    if isinstance(functions, flow.nn.Sequential):
        functions = list(functions.children())
    functions = list(functions)
    if not isinstance(segments, int) or not 1 <= segments <= max(len(functions), 1):
        raise ValueError(f"checkpoint_sequential: segments must be an int in [1, {len(functions)}] "
                         f"(the number of functions), got {segments!r}")

    def run(start, end):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x
        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)
