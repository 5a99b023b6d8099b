"""Activation checkpointing (torch.utils.checkpoint's names): run a piece of the model without
keeping its intermediate activations, and run it again during backward to get them.

    from oneflow.utils.checkpoint import checkpoint
    x = checkpoint(block, x)        # block's activations are recomputed in backward

The forward runs under no_grad, so only the inputs are kept. In backward the function runs a
second time on detached copies of the inputs with gradients on, and a backward through that
recomputed graph accumulates the parameters' gradients and gives the inputs' (PyTorch's
reentrant variant). It works the same for global tensors: the recomputation goes through the
same deduction and boxing as the first forward, so the collectives of the forward run again
during backward.

The function must compute the same values the second time: it must not draw random numbers
(dropout) or depend on state it changes. At least one input must require grad, or no gradient
reaches the parameters inside (as in PyTorch's reentrant variant, which only warns; here it is
an error).
"""

import oneflow as flow
from oneflow.autograd import Function

__all__ = ["checkpoint", "checkpoint_sequential"]


class _CheckpointFunction(Function):
    @staticmethod
    def forward(ctx, run_function, *args):
        ctx.run_function = run_function
        ctx.inputs = args
        return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        inputs = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, flow.Tensor) else a
                  for a in ctx.inputs]
        with flow.enable_grad():
            out = ctx.run_function(*inputs)
        outs = [out] if isinstance(out, flow.Tensor) else list(out)
        pairs = [(o, g) for o, g in zip(outs, grads) if o.requires_grad and g is not None]
        if pairs:
            flow.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None,) + tuple(a.grad if isinstance(a, flow.Tensor) and a.requires_grad else None
                               for a in inputs)


def checkpoint(function, *args, use_reentrant=True, preserve_rng_state=False, **kwargs):
    """function(*args), recomputed during backward instead of keeping its activations."""
    if kwargs:
        raise TypeError(f"checkpoint: keyword arguments for the function are not supported, got "
                        f"{sorted(kwargs)}")
    if not use_reentrant:
        raise NotImplementedError("checkpoint: only use_reentrant=True is supported, got False")
    if preserve_rng_state:
        raise NotImplementedError(
            "checkpoint: preserve_rng_state=True is not supported (the function must not draw "
            "random numbers), got True")
    if not flow.is_grad_enabled():
        return function(*args)
    if not any(isinstance(a, flow.Tensor) and a.requires_grad for a in args):
        raise ValueError("checkpoint: none of the inputs requires grad, so no gradient would "
                         "reach the parameters inside the function")
    return _CheckpointFunction.apply(function, *args)


def checkpoint_sequential(functions, segments, input, use_reentrant=True):
    """Runs functions (a Sequential or a list of modules) in `segments` checkpointed pieces."""
    functions = list(functions.children()) if isinstance(functions, flow.nn.Module) else list(functions)
    if not isinstance(segments, int) or not 1 <= segments <= max(1, len(functions)):
        raise ValueError(f"checkpoint_sequential: segments must be an int in [1, {len(functions)}], "
                         f"got {segments!r}")
    size = (len(functions) + segments - 1) // segments

    def run(piece):
        def f(x):
            for fn in piece:
                x = fn(x)
            return x
        return f

    for start in range(0, len(functions), size):
        input = checkpoint(run(functions[start:start + size]), input, use_reentrant=use_reentrant)
    return input
