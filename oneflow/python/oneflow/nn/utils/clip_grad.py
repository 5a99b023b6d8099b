"""Gradient clipping with PyTorch's results, for local and global parameters.

    total_norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0, norm_type=2.0)
    nn.utils.clip_grad_value_(model.parameters(), clip_value=0.5)

For global parameters (broadcast or split) the norm is the norm of the logical gradients: each
gradient's contribution is reduced over its placement (sum of |g|^p, or max |g| for inf), so
every rank computes the same total and scales its shard by the same factor.
"""

import math

import oneflow as flow


def _grads(name, parameters):
    if isinstance(parameters, flow.Tensor):
        parameters = [parameters]
    grads = []
    for p in parameters:
        if not isinstance(p, flow.Tensor):
            raise TypeError(f"{name}: expected Tensors (parameters), got {type(p).__name__}")
        if p.grad is not None:
            grads.append(p.grad)
    return grads


def _whole(t):
    """A 0-dim global tensor reduced over its placement, as this rank's local value (every
    member rank holds the same); a local tensor as it is."""
    if not t.is_global:
        return t
    return t.to_global(sbp=[flow.sbp.broadcast] * len(t.sbp)).to_local()


def _contribution(g, norm_type):
    """For one gradient: max |g| (norm_type inf), min |g| (-inf), or sum |g|^p, in float32 or
    wider, as a local 0-dim tensor."""
    g = g.detach()
    if g.numel() == 0:
        return None
    if not g.dtype.is_floating_point or g.dtype in (flow.float16, flow.bfloat16):
        g = g.to(flow.float32)
    a = g.abs()
    if norm_type == math.inf:
        r = a.max()
    elif norm_type == -math.inf:
        r = a.min()
    elif norm_type == 0:
        r = (a != 0).to(g.dtype).sum()
    elif norm_type == 2:
        r = (a * a).sum()
    elif norm_type == 1:
        r = a.sum()
    else:
        r = a.pow(norm_type).sum()
    return _whole(r)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, fused=False, error_if_nonfinite=False):
    """Scales the gradients in place so that their joint norm is at most max_norm; returns the
    joint norm before clipping (a 0-dim float32 tensor; global and broadcast when every gradient
    is global on one placement). OneFlow's signature: `fused` picks OneFlow's fused CUDA kernel
    there, with the same result; here the one path computes it either way."""
    name = "clip_grad_norm_"
    grads = _grads(name, parameters)
    max_norm, norm_type = float(max_norm), float(norm_type)
    if len(grads) == 0:
        return flow.tensor(0.0)
    parts = [c for c in (_contribution(g, norm_type) for g in grads) if c is not None]
    if len(parts) == 0:
        total = flow.tensor(0.0)
    else:
        dtype = parts[0].dtype
        stacked = flow.stack([c.to(dtype).reshape(1) for c in parts]).reshape(-1)
        if norm_type == math.inf:
            total = stacked.max()
        elif norm_type == -math.inf:
            total = stacked.min()
        elif norm_type == 0:
            # the 0-"norm" of the per-tensor 0-norms: how many gradients have a non-zero
            # element (OneFlow's and PyTorch's definition)
            total = (stacked != 0).to(dtype).sum()
        elif norm_type == 1:
            total = stacked.sum()
        elif norm_type == 2:
            total = stacked.sum().sqrt()
        else:
            total = stacked.sum().pow(1.0 / norm_type)
    # The value is read only to refuse a non-finite norm (nn.Graph traces the rest).
    total_value = float(total) if error_if_nonfinite else 0.0
    if error_if_nonfinite and not math.isfinite(total_value):
        raise RuntimeError(
            f"{name}: the total norm of order {norm_type} of the gradients is non-finite "
            f"({total_value}), so it cannot be clipped; pass error_if_nonfinite=False to scale "
            "the gradients by it anyway"
        )
    # The factor stays on the device: no host read of the norm (a training step under
    # flow.cuda.set_sync_debug_mode("error") clips without a wait).
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
    with flow.no_grad():
        cast = {}
        for g in grads:
            if g.is_global:
                # Every rank holds the same factor: broadcast on the gradient's placement, it
                # scales any layout (S, B or P) without communication.
                key = (str(g.placement), g.dtype)
                if key not in cast:
                    p = g.placement
                    cast[key] = coef.to(g.dtype).to_global(
                        placement=p, sbp=[flow.sbp.broadcast] * len(p.hierarchy)
                    )
            else:
                key = (str(g.device), g.dtype)
                if key not in cast:
                    cast[key] = coef.to(g.dtype).to(g.device)
            g.mul_(cast[key])
    placements = {str(g.placement) if g.is_global else None for g in grads}
    if len(placements) == 1 and None not in placements:
        p = grads[0].placement
        total = total.to_global(placement=p, sbp=[flow.sbp.broadcast] * len(p.hierarchy))
    return total


def clip_grad_value_(parameters, clip_value):
    """Clamps every gradient to [-clip_value, clip_value] in place."""
    clip_value = float(clip_value)
    if clip_value < 0:
        raise ValueError(f"clip_grad_value_: clip_value must be >= 0, got {clip_value}")
    with flow.no_grad():
        for g in _grads("clip_grad_value_", parameters):
            g.clamp_(min=-clip_value, max=clip_value)
