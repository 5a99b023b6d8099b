"""nn.functional of the everyday API: activations of the unary table, normalizations (layer,
group, RMS), embedding, attention, and the losses and similarity functions built on them.
Re-exported by oneflow.nn.functional."""


import oneflow as flow
import oneflow._oneflow_internal as _C
from oneflow._api_util import _int_arg, _tensor_arg

__all__ = [
    "silu", "mish", "hardswish", "hardsigmoid", "logsigmoid", "softsign", "selu", "celu", "elu",
    "leaky_relu", "softplus", "softshrink", "hardshrink", "tanhshrink", "threshold", "hardtanh",
    "relu_", "layer_norm", "group_norm", "rms_norm", "embedding", "scaled_dot_product_attention",
    "l1_loss", "cosine_similarity", "normalize", "pairwise_distance", "glu",
]


def _maybe_inplace(input, fn, inplace):
    """fn(input), or with inplace=True fn's result written into input and input returned (the
    same object), as OneFlow and PyTorch do. fn then reads a copy: its gradient may need the
    values the write replaces. Autograd records the write (a leaf that requires grad refuses
    it)."""
    if not inplace:
        return fn(input)
    return input.copy_(fn(input.clone()))


def silu(input, inplace=False):
    return _maybe_inplace(input, _C.silu, inplace)


def mish(input, inplace=False):
    return _maybe_inplace(input, _C.mish, inplace)


def hardswish(input, inplace=False):
    return _maybe_inplace(input, _C.hardswish, inplace)


def hardsigmoid(input, inplace=False):
    return _maybe_inplace(input, _C.hardsigmoid, inplace)


def logsigmoid(input):
    return _C.logsigmoid(input)


def softsign(input):
    return _C.softsign(input)


def selu(input, inplace=False):
    return _maybe_inplace(input, _C.selu, inplace)


def celu(input, alpha=1.0, inplace=False):
    return _maybe_inplace(input, lambda x: _C.celu(x, float(alpha)), inplace)


def elu(input, alpha=1.0, inplace=False):
    return _maybe_inplace(input, lambda x: _C.elu(x, float(alpha)), inplace)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _maybe_inplace(input, lambda x: _C.leaky_relu(x, float(negative_slope)), inplace)


def softplus(input, beta=1, threshold=20):
    return _C.softplus(input, float(beta), float(threshold))


def softshrink(input, lambd=0.5):
    return _C.softshrink(input, float(lambd))


def hardshrink(input, lambd=0.5):
    return _C.hardshrink(input, float(lambd))


def tanhshrink(input):
    return input - _C.tanh(input)


def threshold(input, threshold, value, inplace=False):
    return _maybe_inplace(input, lambda x: _C.threshold(x, float(threshold), float(value)), inplace)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val {min_val} must not exceed max_val {max_val}")
    return _maybe_inplace(input, lambda x: _C.clamp(x, float(min_val), float(max_val)), inplace)


def relu_(input):
    return input.copy_(_C.relu(input)) if hasattr(input, "copy_") else _C.relu(input)


def glu(input, dim=-1):
    n = input.shape[dim]
    if n % 2:
        raise RuntimeError(f"glu: halving dimension {dim} must be even, got size {n}")
    dim = dim % input.dim()
    a, b = _C.slice(input, dim, 0, n // 2, 1), _C.slice(input, dim, n // 2, n, 1)
    return a * _C.sigmoid(b)


# ---------------------------------------------------------------- normalization


def _shape_list(op, normalized_shape):
    if isinstance(normalized_shape, int):
        return [normalized_shape]
    try:
        return [int(s) for s in normalized_shape]
    except TypeError:
        raise TypeError(f"{op}: normalized_shape must be an int or a sequence of ints, "
                        f"got {type(normalized_shape).__name__}") from None


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    return _C.layer_norm(input, _shape_list("layer_norm", normalized_shape), weight, bias,
                         float(eps))


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2 over normalized_shape) + eps) * weight; eps defaults to the dtype's
    machine epsilon (PyTorch's rule)."""
    shape = _shape_list("rms_norm", normalized_shape)
    k = len(shape)
    if list(input.shape[input.dim() - k:]) != shape:
        raise RuntimeError(f"rms_norm: input of shape {tuple(input.shape)} does not end with "
                           f"normalized_shape {tuple(shape)}")
    if eps is None:
        eps = flow.finfo(input.dtype).eps
    return _C.rms_norm(input, shape, weight, float(eps))


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    _tensor_arg(input, "group_norm")
    num_groups = _int_arg(num_groups, "group_norm", "num_groups", 1)
    if input.dim() < 2:
        raise RuntimeError(f"group_norm: expected an input with at least 2 dims (N, C, ...), "
                           f"got shape {tuple(input.shape)}")
    n, c = input.shape[0], input.shape[1]
    if c % num_groups:
        raise RuntimeError(f"group_norm: num_channels {c} must be divisible by num_groups "
                           f"{num_groups}")
    x = input.reshape(n, num_groups, -1)
    mean = _C.mean(x, [2], True)
    d = x - mean
    var = _C.mean(d * d, [2], True)
    out = (d * _C.rsqrt(var + eps)).reshape(*input.shape)
    shape = [1, c] + [1] * (input.dim() - 2)
    if weight is not None:
        out = out * weight.reshape(*shape)
    if bias is not None:
        out = out + bias.reshape(*shape)
    return out


# ---------------------------------------------------------------- embedding


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    if max_norm is not None:
        raise NotImplementedError("embedding: max_norm (renormalising rows in place) is not "
                                  "supported")
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: scale_grad_by_freq and sparse gradients are not "
                                  "supported")
    if input.dtype not in (flow.int64, flow.int32):
        raise TypeError(f"embedding: expected int64 or int32 indices, got {input.dtype}")
    if weight.dim() != 2:
        raise ValueError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), "
                         f"got shape {tuple(weight.shape)}")
    out = _C.index_select(weight, 0, input.reshape(-1))
    out = out.reshape(*input.shape, weight.shape[1])
    if padding_idx is not None:
        if padding_idx < 0:
            padding_idx += weight.shape[0]
        # The padding row's value as it is, but no gradient reaches it.
        keep = (input != padding_idx).unsqueeze(-1)
        out = flow.where(keep, out, out.detach())
    return out


# ---------------------------------------------------------------- attention


def _like(mask, ref):
    """mask placed like ref: a global ref needs a global (broadcast) mask."""
    if ref.is_global and not mask.is_global:
        return mask.to_global(placement=ref.placement,
                              sbp=[flow.sbp.broadcast] * len(ref.sbp))
    return mask


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    """softmax(q k^T * scale + mask) v over the last two dims, as PyTorch 2's function: a bool
    mask keeps where True, a float mask is added; is_causal masks j > i (top-left aligned);
    dropout_p drops attention weights (whenever it is > 0, as PyTorch's function). One fused op
    with its backward (core/ops/nn/attention.cc); a row with every element masked gives NaN."""
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise ValueError("scaled_dot_product_attention: query, key and value need at least 2 "
                         f"dims, got {tuple(query.shape)}, {tuple(key.shape)}, "
                         f"{tuple(value.shape)}")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(f"scaled_dot_product_attention: query's last dim {query.shape[-1]} "
                         f"differs from key's {key.shape[-1]}")
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"scaled_dot_product_attention: key has {key.shape[-2]} positions but "
                         f"value has {value.shape[-2]}")
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: pass attn_mask or is_causal, not both")
    if attn_mask is not None:
        attn_mask = _like(attn_mask, query)
    return _C.scaled_dot_product_attention(query, key, value, attn_mask, float(dropout_p),
                                           bool(is_causal),
                                           None if scale is None else float(scale))


# ---------------------------------------------------------------- losses and similarity


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    F = flow.nn.functional
    reduction = F._legacy_reduction("l1_loss", size_average, reduce, reduction)
    F._check_reduction("l1_loss", reduction)
    return F._reduce(_C.abs(input - target), reduction)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1 x2) / sqrt(max(sum(x1^2) sum(x2^2), eps^2)) along dim (PyTorch 1.13's formula)."""
    _tensor_arg(x1, "cosine_similarity", "x1")
    _tensor_arg(x2, "cosine_similarity", "x2")
    common = x2.dtype if x2.dtype.is_floating_point and not x1.dtype.is_floating_point else x1.dtype
    if not common.is_floating_point:
        raise RuntimeError(f"cosine_similarity: expected common dtype to be floating point, yet "
                           f"common dtype is {common}")
    dot = _C.sum(x1 * x2, [dim], False)
    n = _C.sum(x1 * x1, [dim], False) * _C.sum(x2 * x2, [dim], False)
    return dot / _C.sqrt(_C.clamp(n, eps * eps, None))


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    return flow.linalg.vector_norm(x1 - x2 + eps, p, -1, keepdim)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    if out is not None:
        raise NotImplementedError("normalize: out= is not supported; use the return value")
    n = flow.linalg.vector_norm(input, p, dim, True)
    return input / _C.clamp(n, eps, None)
