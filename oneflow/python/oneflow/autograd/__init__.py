"""oneflow.autograd: custom differentiable functions and grad-mode switches.

    class Square(flow.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    y = Square.apply(x)

forward runs without recording a graph; backward gets one gradient per output (zeros where
none flowed) and returns one per forward argument (None for non-tensors or no gradient).
"""

import builtins

import oneflow._oneflow_internal as _C
from oneflow._grad_mode import (  # noqa: F401
    enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled,
)

__all__ = ["Function", "FunctionCtx", "no_grad", "enable_grad", "set_grad_enabled",
           "is_grad_enabled", "inference_mode", "queue_callback", "grad", "backward"]


def _tensors(arg, what, api, allow_none=False):
    if isinstance(arg, _C.Tensor) or (allow_none and arg is None):
        return [arg]
    if isinstance(arg, (list, tuple)):
        for i, t in enumerate(arg):
            if not (isinstance(t, _C.Tensor) or (allow_none and t is None)):
                raise TypeError(f"{api}: {what}[{i}] must be a tensor{' or None' if allow_none else ''}, "
                                f"got {type(t).__name__}")
        return list(arg)
    raise TypeError(f"{api}: {what} must be a tensor or a sequence of tensors, got {type(arg).__name__}")


def _as_output_dtypes(outs, grads):
    """Each seed gradient in its output's dtype (OneFlow and PyTorch cast it: a float64 seed
    for a float32 output)."""
    return [g if g is None or len(outs) <= i or g.dtype == outs[i].dtype else g.to(outs[i].dtype)
            for i, g in enumerate(grads)]


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=False, is_grads_batched=False):
    """The gradients of outputs with respect to inputs (leaves or not), as a tuple; no .grad
    changes. create_graph=True records the backward pass, so the result can be differentiated
    again. retain_graph defaults to create_graph. An input that no gradient reached raises
    unless allow_unused=True (then its entry is None)."""
    if is_grads_batched:
        raise NotImplementedError("grad: is_grads_batched=True is not supported")
    outs = _tensors(outputs, "outputs", "grad")
    ins = _tensors(inputs, "inputs", "grad")
    if grad_outputs is None:
        gos = [None] * len(outs)
    else:
        gos = _tensors(grad_outputs, "grad_outputs", "grad", allow_none=True)
    return _C._grad(outs, ins, _as_output_dtypes(outs, gos), retain_graph, builtins.bool(create_graph),
                    builtins.bool(allow_unused))


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates the gradients of tensors (seeded with grad_tensors) into the leaves' .grad
    (only into inputs' .grad when given)."""
    ts = _tensors(tensors, "tensors", "backward")
    gs = [None] * len(ts) if grad_tensors is None else _tensors(grad_tensors, "grad_tensors", "backward",
                                                                allow_none=True)
    if len(gs) != len(ts):
        raise RuntimeError(f"backward: got {len(gs)} grad_tensors for {len(ts)} tensors")
    ins = [] if inputs is None else _tensors(inputs, "inputs", "backward")
    if inputs is not None and not ins:
        raise RuntimeError("backward: inputs is an empty sequence")
    _C._backward(ts, _as_output_dtypes(ts, gs), retain_graph, builtins.bool(create_graph), ins)


class FunctionCtx:
    """The ctx argument of forward and backward: stash tensors and values on it."""

    def __init__(self):
        self.saved_tensors = ()
        self.needs_input_grad = ()
        self._non_differentiable = set()

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def mark_non_differentiable(self, *tensors):
        """These outputs of forward get no gradient: they come back not requiring grad, and
        backward receives zeros for them."""
        for t in tensors:
            if not isinstance(t, _C.Tensor):
                raise TypeError(f"mark_non_differentiable: expected tensors, got "
                                f"{type(t).__name__}")
            self._non_differentiable.add(_C.tensor_impl_id(t))


class Function:
    """Subclass with static forward(ctx, *args) and backward(ctx, *grads); call apply()."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("autograd.Function: subclasses must define forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("autograd.Function: subclasses must define backward(ctx, ...)")

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, _C.Tensor) and a.requires_grad for a in args)
        with no_grad():
            out = cls.forward(ctx, *args, **kwargs)
        if not (is_grad_enabled() and any(ctx.needs_input_grad)):
            return out
        single = isinstance(out, _C.Tensor)
        outs = [out] if single else list(out)
        if not all(isinstance(o, _C.Tensor) for o in outs):
            raise TypeError(f"{cls.__name__}.forward: expected tensors as outputs, got "
                            f"{[type(o).__name__ for o in outs]}")
        tensor_pos = [i for i, a in enumerate(args) if isinstance(a, _C.Tensor)]
        name = cls.__name__ + "Backward"
        differentiable = [i for i, o in enumerate(outs)
                          if _C.tensor_impl_id(o) not in ctx._non_differentiable]
        if not differentiable:
            return out

        def backward(*grads):
            full = [o.new_zeros(o.shape) for o in outs]  # global: o's placement and sbp
            for i, g in zip(differentiable, grads):
                full[i] = g
            res = cls.backward(ctx, *full)
            if not isinstance(res, (tuple, list)):
                res = (res,)
            if len(res) != len(args):
                raise RuntimeError(f"{cls.__name__}.backward: returned {len(res)} gradients, "
                                   f"expected {len(args)} (one per forward argument)")
            return [res[i] for i in tensor_pos]

        attached = _C._function_attach([outs[i] for i in differentiable],
                                       [args[i] for i in tensor_pos], backward, name)
        for i, o in zip(differentiable, attached):
            outs[i] = o
        return outs[0] if single else tuple(outs)


def queue_callback(callback):
    """Runs callback() once the backward pass running now has finished (as PyTorch's
    Variable._execution_engine.queue_callback)."""
    _C._queue_backward_callback(callback)
