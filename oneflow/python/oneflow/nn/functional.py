"""oneflow.nn.functional: PyTorch's functional signatures over the binding's flow._C ops.

    import oneflow.nn.functional as F
    y = F.max_pool2d(F.relu(F.conv2d(x, w, padding=1)), 2)
    loss = F.cross_entropy(logits, labels)

Here arguments are checked and normalised (an int or a pair becomes [h, w]); the ops
themselves run in C++.
"""

import builtins
import math
import warnings

import oneflow as flow
from oneflow._api_util import _check_tensor_size, _int_arg
from oneflow._dtype_util import is_floating

_REDUCTIONS = ("none", "mean", "sum")


def _pair(op, name, value):
    """[v, v] for an int, list(value) for a pair; anything else is an error naming op and name."""
    if isinstance(value, bool):
        raise TypeError(f"{op}: {name} must be an int or a pair of ints, got {value!r}")
    if isinstance(value, int):
        return [value, value]
    value = list(value)
    if len(value) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise TypeError(f"{op}: {name} must be an int or a pair of ints, got {tuple(value)}")
    return value


def _check_reduction(op, reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")


def _check_dim(op, input, expected):
    if input.dim() not in expected:
        wanted = " or ".join(f"{d}-D" for d in expected)
        raise ValueError(f"{op}: expected a {wanted} input, got shape {tuple(input.shape)}")


# ---- activations ----

from oneflow.nn._functional_everyday import *  # noqa: E402,F401,F403  (the everyday API's ops)
from oneflow.nn._functional_everyday import _maybe_inplace  # noqa: E402
from oneflow.nn._functional_breadth import *  # noqa: E402,F401,F403  (1-D/3-D conv and pools, prelu)
from oneflow.nn._functional_breadth import _divided_avg_pool  # noqa: E402


def relu(input, inplace=False):
    return _maybe_inplace(input, flow.relu, inplace)


def relu6(input, inplace=False):
    return _maybe_inplace(input, flow._C.relu6, inplace)


def sigmoid(input):
    return flow.sigmoid(input)


def tanh(input):
    return flow.tanh(input)


def gelu(input, approximate="none"):
    if approximate == "none":
        return flow._C.gelu(input)
    if approximate == "tanh":
        return flow._C.gelu_tanh(input)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


from oneflow._ops import log_softmax, softmax  # noqa: E402,F401  (one function each)


# ---- layers ----


def linear(input, weight, bias=None):
    return flow._C.linear(input, weight, bias)


def _same_padding(op, kernel_hw, stride, dilation):
    # 'same' keeps the spatial size; with an odd total padding PyTorch pads one side more,
    # which the symmetric conv kernel cannot express.
    if stride != [1, 1]:
        raise ValueError(f"{op}: padding='same' is not supported for strided convolutions")
    padding = []
    for k, d in zip(kernel_hw, dilation):
        total = d * (k - 1)
        if total % 2:
            raise ValueError(
                f"{op}: padding='same' with kernel {tuple(kernel_hw)} and dilation "
                f"{tuple(dilation)} needs uneven padding, which is not supported; pass the "
                "padding explicitly"
            )
        padding.append(total // 2)
    return padding


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    _check_dim("conv2d", input, (4,))
    stride = _pair("conv2d", "stride", stride)
    dilation = _pair("conv2d", "dilation", dilation)
    if isinstance(padding, str):
        if padding == "valid":
            padding = [0, 0]
        elif padding == "same":
            padding = _same_padding("conv2d", [weight.size(2), weight.size(3)], stride, dilation)
        else:
            raise ValueError(f"conv2d: padding must be 'valid', 'same' or ints, got {padding!r}")
    else:
        padding = _pair("conv2d", "padding", padding)
    return flow._C.conv2d(input, weight, bias, stride, padding, dilation, groups)


def _no_stride(stride):
    # PyTorch's pools take stride=None (or an empty list) to mean "the kernel size".
    return stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0)


def max_pool2d(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    _check_dim("max_pool2d", input, (3, 4))
    if input.dim() == 3:  # (C, H, W): one sample
        out = max_pool2d(input.unsqueeze(0), kernel_size, stride, padding, dilation, ceil_mode,
                         return_indices)
        return tuple(o.squeeze(0) for o in out) if return_indices else out.squeeze(0)
    kernel = _pair("max_pool2d", "kernel_size", kernel_size)
    stride = kernel if _no_stride(stride) else _pair("max_pool2d", "stride", stride)
    if return_indices:  # each maximum's flat position in its (H, W) plane, as PyTorch's
        return flow._C.max_pool2d_with_indices(
            input, kernel, stride, _pair("max_pool2d", "padding", padding),
            _pair("max_pool2d", "dilation", dilation), bool(ceil_mode))
    return flow._C.max_pool2d(
        input,
        kernel,
        stride,
        _pair("max_pool2d", "padding", padding),
        _pair("max_pool2d", "dilation", dilation),
        bool(ceil_mode),
    )


def avg_pool2d(
    input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None
):
    if divisor_override is not None:
        return _divided_avg_pool("avg_pool2d", input, kernel_size, stride, padding, ceil_mode,
                                 divisor_override, 2)
    _check_dim("avg_pool2d", input, (4,))
    kernel = _pair("avg_pool2d", "kernel_size", kernel_size)
    stride = kernel if _no_stride(stride) else _pair("avg_pool2d", "stride", stride)
    return flow._C.avg_pool2d(
        input,
        kernel,
        stride,
        _pair("avg_pool2d", "padding", padding),
        bool(ceil_mode),
        bool(count_include_pad),
    )


def adaptive_avg_pool2d(input, output_size):
    _check_dim("adaptive_avg_pool2d", input, (4,))
    if isinstance(output_size, int):
        output_size = [output_size, output_size]
    # None in output_size keeps that input size.
    out = [input.size(2 + i) if s is None else s for i, s in enumerate(output_size)]
    return flow._C.adaptive_avg_pool2d(input, _pair("adaptive_avg_pool2d", "output_size", out))


def batch_norm(
    input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5
):
    _check_dim("batch_norm", input, (2, 3, 4, 5))
    if training:
        values_per_channel = input.numel() // input.size(1)
        if values_per_channel == 1:
            raise ValueError(
                "batch_norm: expected more than 1 value per channel when training, "
                f"got input of shape {tuple(input.shape)}"
            )
    # The kernel works on (N, C, H, W); (N, C) and (N, C, L) are the same statistics per channel.
    shape = tuple(input.shape)
    if input.dim() == 2:
        input = input.reshape(shape[0], shape[1], 1, 1)
    elif input.dim() == 3:
        input = input.reshape(shape[0], shape[1], shape[2], 1)
    elif input.dim() == 5:
        input = input.reshape(shape[0], shape[1], shape[2], shape[3] * shape[4])
    out = flow._C.batch_norm(
        input, running_mean, running_var, weight, bias, bool(training), float(momentum), float(eps)
    )
    return out.reshape(*shape) if len(shape) != 4 else out


def dropout(input, p=0.5, training=True, inplace=False, generator=None, addend=None):
    """OneFlow's signature: generator= draws the mask from that stream; addend= is added to
    the result (OneFlow's fused dropout + add)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout: probability has to be between 0 and 1, but got {p}")
    from oneflow import _random

    with _random._drawing_from(generator, "dropout"):
        out = _maybe_inplace(input, lambda x: flow._C.dropout(x, float(p), bool(training)),
                             inplace)
    if addend is None:
        return out
    return out.add_(addend) if inplace else out + addend


def flatten(input, start_dim=0, end_dim=-1):
    return input.flatten(start_dim, end_dim)


# ---- losses ----


def _legacy_reduction(op, size_average, reduce, reduction):
    # PyTorch's deprecated size_average/reduce pair, mapped the way PyTorch maps it.
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    warnings.warn(f"{op}: size_average and reduce are deprecated, use reduction instead", stacklevel=3)
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _class_weight(weight, input, api):
    """weight (one per class) shaped to broadcast against input's class dim (dim 1, or 0 for an
    unbatched input)."""
    c = input.shape[1] if input.ndim > 1 else input.shape[0]
    if not isinstance(weight, flow.Tensor) or tuple(weight.shape) != (c,):
        got = tuple(weight.shape) if isinstance(weight, flow.Tensor) else type(weight).__name__
        raise ValueError(f"{api}: expected weight of shape ({c},) (one per class), got {got}")
    weight = weight.to(input.dtype)
    return weight if input.ndim == 1 else weight.reshape([1, c] + [1] * (input.ndim - 2))


def _weighted_nll(log_probs, target, weight, ignore_index, reduction):
    """PyTorch's weighted nll_loss: -w[t] log p[t] per element (0 where ignored); 'mean' divides
    by the sum of the kept elements' weights. The kernel picks the class (and checks targets)."""
    loss = flow._C.nll_loss(log_probs * weight, target, "none", int(ignore_index))
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    picked = flow._C.nll_loss(-weight.detach().expand(*log_probs.shape), target, "none", int(ignore_index))
    return loss.sum() / picked.sum()


def nll_loss(
    input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"
):
    reduction = _legacy_reduction("nll_loss", size_average, reduce, reduction)
    _check_reduction("nll_loss", reduction)
    if weight is not None:
        return _weighted_nll(input, target, _class_weight(weight, input, "nll_loss"), ignore_index, reduction)
    return flow._C.nll_loss(input, target, reduction, int(ignore_index))


def sparse_softmax_cross_entropy(labels, logits):
    """OneFlow's (after TensorFlow's): the cross entropy of softmax(logits) over the last dim
    with the class index in labels, per element, without reduction. logits (d0, ..., C),
    labels (d0, ...) of int32 or int64 in [0, C); the result has labels' shape. Global logits
    may be split on any dim (the softmax's boxing follows from the SBP rules)."""
    if not isinstance(logits, flow.Tensor) or not is_floating(logits.dtype):
        got = logits.dtype if isinstance(logits, flow.Tensor) else type(logits).__name__
        raise TypeError(f"sparse_softmax_cross_entropy: logits must be a floating point tensor, "
                        f"got {got}")
    if not isinstance(labels, flow.Tensor) or labels.dtype not in (flow.int32, flow.int64):
        got = labels.dtype if isinstance(labels, flow.Tensor) else type(labels).__name__
        raise TypeError(f"sparse_softmax_cross_entropy: labels must be an int32 or int64 "
                        f"tensor, got {got}")
    if logits.ndim < 1 or tuple(labels.shape) != tuple(logits.shape[:-1]):
        raise ValueError(f"sparse_softmax_cross_entropy: labels must have the shape of logits "
                         f"without its last (class) dim, {tuple(logits.shape[:-1])}, got "
                         f"{tuple(labels.shape)}")
    if logits.ndim == 2:
        return flow._C.cross_entropy(logits, labels.long(), "none", -100)
    classes = logits.shape[-1]
    loss = flow._C.cross_entropy(logits.reshape(-1, classes), labels.long().reshape(-1), "none",
                                 -100)
    return loss.reshape(labels.shape)


def cross_entropy(
    input,
    target,
    weight=None,
    size_average=None,
    ignore_index=-100,
    reduce=None,
    reduction="mean",
    label_smoothing=0.0,
):
    reduction = _legacy_reduction("cross_entropy", size_average, reduce, reduction)
    _check_reduction("cross_entropy", reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    if weight is not None:
        weight = _class_weight(weight, input, "cross_entropy")

    if is_floating(target.dtype):
        # Class probabilities instead of indices (PyTorch accepts both).
        if tuple(target.shape) != tuple(input.shape):
            raise ValueError(
                "cross_entropy: probability targets must have the input's shape "
                f"{tuple(input.shape)}, got {tuple(target.shape)}"
            )
        num_classes = input.size(1)
        if label_smoothing > 0:
            target = target * (1.0 - label_smoothing) + label_smoothing / num_classes
        if weight is not None:
            target = target * weight  # 'mean' still divides by the number of elements
        loss = -(target * log_softmax(input, 1)).sum(dim=1)
        return _reduce(loss, reduction)

    # The fused op (one pass over the logits, label smoothing inside) for local (N, C) / (C,)
    # logits; weights, more class dims and global logits with smoothing are composed below.
    fused_smoothing = input.ndim <= 2 and not input.is_global
    if weight is None and (label_smoothing == 0 or fused_smoothing):
        return flow._C.cross_entropy(input, target, reduction, int(ignore_index),
                                     float(label_smoothing))

    cdim = 1 if input.ndim > 1 else 0
    log_probs = log_softmax(input, cdim)
    if weight is not None:
        nll = _weighted_nll(log_probs, target, weight, ignore_index, reduction)
        if label_smoothing == 0:
            return nll
    else:
        nll = flow._C.nll_loss(log_probs, target, reduction, int(ignore_index))
    # PyTorch's smoothing: (1 - e) * nll + e / C * sum over classes of -w log p, over kept
    # targets; 'mean' divides by the kept targets' count (their weights' sum with weights).
    keep = (target != ignore_index).to(log_probs.dtype)
    weighted = log_probs if weight is None else log_probs * weight
    smooth = -weighted.sum(dim=cdim) / input.size(cdim) * keep
    if reduction == "none":
        smooth_loss = smooth
    elif reduction == "sum":
        smooth_loss = smooth.sum()
    elif weight is None:
        smooth_loss = smooth.sum() / keep.sum()
    else:
        picked = flow._C.nll_loss(-weight.detach().expand(*log_probs.shape), target, "none",
                                  int(ignore_index))
        smooth_loss = smooth.sum() / picked.sum()
    return nll * (1.0 - label_smoothing) + smooth_loss * label_smoothing


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction("mse_loss", size_average, reduce, reduction)
    _check_reduction("mse_loss", reduction)
    return flow._C.mse_loss(input, target, reduction)


# ---- losses built from elementwise ops (so they run on global tensors under any sbp)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    reduction = _legacy_reduction("binary_cross_entropy", size_average, reduce, reduction)
    _check_reduction("binary_cross_entropy", reduction)
    # PyTorch's and OneFlow's clamp of the logs at -100 keeps 0 and 1 finite.
    log_x = flow.clamp(flow.log(input), min=-100.0)
    log_1mx = flow.clamp(flow.log(1.0 - input), min=-100.0)
    loss = -(target * log_x + (1.0 - target) * log_1mx)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    reduction = _legacy_reduction("binary_cross_entropy_with_logits", size_average, reduce,
                                  reduction)
    _check_reduction("binary_cross_entropy_with_logits", reduction)
    # log(1 + exp(-|x|)) + max(x, 0) - x * t, stable for large |x|
    log_sig_neg = flow.log(1.0 + flow.exp(-flow.abs(input))) + flow.relu(-input)  # -log(sigmoid(x))
    if pos_weight is not None:
        log_weight = 1.0 + (pos_weight - 1.0) * target
        loss = (1.0 - target) * input + log_weight * log_sig_neg
    else:
        loss = (1.0 - target) * input + log_sig_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    reduction = _legacy_reduction("kl_div", size_average, reduce, reduction)
    if reduction not in ("none", "sum", "mean", "batchmean"):
        raise ValueError(f"kl_div: reduction must be 'none', 'mean', 'sum' or 'batchmean', "
                         f"got {reduction!r}")
    if log_target:
        loss = flow.exp(target) * (target - input)
    else:
        positive = target > 0
        safe = flow.where(positive, target, flow.ones_like(target))
        loss = flow.where(positive, target * (flow.log(safe) - input),
                          flow.zeros_like(input) * input)
    if reduction == "batchmean":
        return flow.sum(loss) / input.shape[0]
    return _reduce(loss, reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    reduction = _legacy_reduction("smooth_l1_loss", size_average, reduce, reduction)
    _check_reduction("smooth_l1_loss", reduction)
    diff = flow.abs(input - target)
    if beta == 0:
        loss = diff
    else:
        loss = flow.where(diff < beta, 0.5 * diff * diff / beta, diff - 0.5 * beta)
    return _reduce(loss, reduction)


# ==== conv1d / conv_transpose, pad, interpolate, channel dropout (nn/modules/{conv_extra,
# padding,upsampling}.py hold their modules). Composites of conv2d, cat, index_select and
# arithmetic, so autograd follows them.


def _single(op, name, value):
    """[v] for an int or a 1-tuple; anything else is an error naming op and name."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, (list, tuple)) and len(value) == 1 and isinstance(value[0], int) \
            and not isinstance(value[0], bool):
        return [value[0]]
    raise TypeError(f"{op}: {name} must be an int or a 1-tuple of ints, got {value!r}")


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """(N, C, L) or (C, L) input, weight (O, C / groups, K): conv2d over a height of 1."""
    _check_dim("conv1d", input, (2, 3))
    if weight.dim() != 3:
        raise ValueError(
            f"conv1d: expected weight of shape (out_channels, in_channels / groups, kernel), "
            f"got {tuple(weight.shape)}"
        )
    stride = _single("conv1d", "stride", stride)
    dilation = _single("conv1d", "dilation", dilation)
    if isinstance(padding, str):
        if padding == "valid":
            padding = [0]
        elif padding == "same":
            if stride != [1]:
                raise ValueError("conv1d: padding='same' is not supported for strided convolutions")
            total = dilation[0] * (weight.size(2) - 1)
            if total % 2:
                # PyTorch puts the odd element on the right.
                input = pad(input, [total // 2, total - total // 2])
                padding = [0]
            else:
                padding = [total // 2]
        else:
            raise ValueError(f"conv1d: padding must be 'valid', 'same' or ints, got {padding!r}")
    else:
        padding = _single("conv1d", "padding", padding)
    x = input.unsqueeze(-2)
    y = flow._C.conv2d(
        x, weight.unsqueeze(2), bias, [1] + stride, [0] + padding, [1] + dilation, groups
    )
    return y.squeeze(-2)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """Weight (in_channels, out_channels / groups, kh, kw); the gradient of conv2d wrt its input."""
    _check_dim("conv_transpose2d", input, (3, 4))
    return flow._C.conv_transpose2d(
        input,
        weight,
        bias,
        _pair("conv_transpose2d", "stride", stride),
        _pair("conv_transpose2d", "padding", padding),
        _pair("conv_transpose2d", "output_padding", output_padding),
        groups,
        _pair("conv_transpose2d", "dilation", dilation),
    )


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """(N, C, L) or (C, L) input, weight (in_channels, out_channels / groups, K)."""
    op = "conv_transpose1d"
    _check_dim(op, input, (2, 3))
    if weight.dim() != 3:
        raise ValueError(
            f"{op}: expected weight of shape (in_channels, out_channels / groups, kernel), "
            f"got {tuple(weight.shape)}"
        )
    y = flow._C.conv_transpose2d(
        input.unsqueeze(-2),
        weight.unsqueeze(2),
        bias,
        [1] + _single(op, "stride", stride),
        [0] + _single(op, "padding", padding),
        [0] + _single(op, "output_padding", output_padding),
        groups,
        [1] + _single(op, "dilation", dilation),
    )
    return y.squeeze(-2)


def _on(x):
    """Where tensors that combine with x go: x's device, or for a global x its placement,
    broadcast (pad, interpolate and channel dropout build such index and fill tensors)."""
    if x.is_global:
        return {"placement": x.placement, "sbp": [flow.sbp.broadcast] * len(x.placement.hierarchy)}
    return {"device": x.device}


def _index(values, like):
    return flow.tensor(values, dtype=flow.int64, **_on(like))


def _narrow(x, dim, start, stop):
    return x[(slice(None),) * dim + (slice(start, stop),)]


def pad(input, pad, mode="constant", value=None):
    """PyTorch's F.pad: pad = (last-dim left, last-dim right, next-to-last left, ...)."""
    if not isinstance(pad, (list, tuple)) or not all(
        isinstance(p, int) and not isinstance(p, bool) for p in pad
    ):
        raise TypeError(f"pad: pad must be a tuple of ints, got {pad!r}")
    pad = list(pad)
    if len(pad) % 2:
        raise ValueError(f"pad: padding length must be divisible by 2, got {len(pad)} values {tuple(pad)}")
    npad = len(pad) // 2
    if npad > input.dim():
        raise ValueError(
            f"pad: padding {tuple(pad)} pads {npad} dimensions but the input has only "
            f"{input.dim()} (shape {tuple(input.shape)})"
        )
    out_shape = list(input.shape)
    for k in range(npad):
        out_shape[input.dim() - 1 - k] += pad[2 * k] + pad[2 * k + 1]
    if all(d >= 0 for d in out_shape):  # negative sizes get their own message below
        _check_tensor_size("pad", out_shape, input.dtype)
    if mode == "constant":
        return _pad_constant(input, pad, 0.0 if value is None else value)
    if value is not None and value != 0:
        raise ValueError(f"pad: a padding value is only used by mode='constant', got mode={mode!r} "
                         f"with value={value!r}")
    if mode not in ("reflect", "replicate"):
        if mode == "circular":
            raise NotImplementedError("pad: mode='circular' is not supported (use 'constant', "
                                      "'reflect' or 'replicate')")
        raise ValueError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', "
                         f"got {mode!r}")
    if npad > 3 or input.dim() not in (npad + 1, npad + 2):
        raise ValueError(
            f"pad: mode={mode!r} with {len(pad)} padding values expects a "
            f"{npad + 1}-D or {npad + 2}-D input, got shape {tuple(input.shape)}"
            if npad <= 3 else
            f"pad: mode={mode!r} pads at most 3 dimensions (6 values), got {len(pad)} values"
        )
    x = input
    for k in range(npad):
        dim = input.dim() - 1 - k
        left, right = pad[2 * k], pad[2 * k + 1]
        n = input.size(dim)
        if mode == "reflect" and (left >= n or right >= n):
            raise ValueError(
                f"pad: reflect padding ({left}, {right}) must be smaller than the size {n} of "
                f"dimension {dim} of the input {tuple(input.shape)}"
            )
        out = n + left + right
        if out < 1:
            raise ValueError(f"pad: padding ({left}, {right}) leaves dimension {dim} of the input "
                             f"{tuple(input.shape)} with size {out}")
        if left == 0 and right == 0:
            continue
        idx = []
        for j in range(out):
            i = j - left
            if mode == "reflect":
                i = -i if i < 0 else (2 * (n - 1) - i if i >= n else i)
            else:
                i = min(max(i, 0), n - 1)
            idx.append(i)
        x = x.index_select(dim, _index(idx, x))
    return x


def _pad_constant(x, pad, value):
    shape = list(x.shape)
    for k in range(len(pad) // 2):
        dim = x.dim() - 1 - k
        left, right = pad[2 * k], pad[2 * k + 1]
        n = x.size(dim)
        if n + left + right < 0:
            raise ValueError(f"pad: padding ({left}, {right}) leaves dimension {dim} of the input "
                             f"{tuple(shape)} with a negative size {n + left + right}")
        # Negative padding crops.
        x = _narrow(x, dim, max(-left, 0), n - max(-right, 0))
        parts = []
        for amount in (left, right):
            if amount > 0:
                fill_shape = list(x.shape)
                fill_shape[dim] = amount
                parts.append(flow.full(fill_shape, value, dtype=x.dtype, **_on(x)))
            else:
                parts.append(None)
        pieces = [p for p in (parts[0], x, parts[1]) if p is not None]
        if len(pieces) > 1:
            x = flow.cat(pieces, dim)
    return x


_INTERP_MODES = {"nearest": (1, 2, 3), "nearest-exact": (1, 2, 3), "linear": (1,),
                 "bilinear": (2,), "trilinear": (3,)}


def _interp_sizes(input, size, scale_factor, recompute_scale_factor):
    nd = input.dim() - 2
    if size is not None and scale_factor is not None:
        raise ValueError("interpolate: only one of size or scale_factor should be defined")
    if size is None and scale_factor is None:
        raise ValueError("interpolate: either size or scale_factor should be defined")
    if size is not None:
        sizes = list(size) if isinstance(size, (list, tuple)) else [size] * nd
        if len(sizes) != nd:
            raise ValueError(
                f"interpolate: input with spatial dimensions {list(input.shape[2:])} needs an "
                f"output size of {nd} values, got size={tuple(sizes)}"
            )
        if not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes):
            raise ValueError(f"interpolate: size must be positive ints, got {size!r}")
        return sizes, [None] * nd
    scales = list(scale_factor) if isinstance(scale_factor, (list, tuple)) else [scale_factor] * nd
    if len(scales) != nd:
        raise ValueError(
            f"interpolate: input with spatial dimensions {list(input.shape[2:])} needs a "
            f"scale_factor of {nd} values, got scale_factor={tuple(scales)}"
        )
    sizes = [int(math.floor(float(input.size(2 + i)) * float(s))) for i, s in enumerate(scales)]
    if any(s < 1 for s in sizes):
        raise ValueError(f"interpolate: scale_factor {scale_factor!r} gives an empty output "
                         f"{tuple(sizes)} for input {tuple(input.shape)}")
    if recompute_scale_factor:
        scales = [None] * nd
    return sizes, [float(s) for s in scales] if scales[0] is not None else scales


def _scale_value(scale, n_in, n_out):
    # PyTorch's compute_scales_value, in float32 as its kernels compute it.
    import numpy as np

    if scale is not None and scale > 0:
        return np.float32(1.0 / scale)
    return np.float32(n_in) / np.float32(n_out)


def _nearest_index(n_in, n_out, scale, exact):
    import numpy as np

    s = _scale_value(scale, n_in, n_out)
    dst = np.arange(n_out, dtype=np.float32)
    src = np.floor((dst + np.float32(0.5)) * s) if exact else np.floor(dst * s)
    return np.minimum(src.astype(np.int64), n_in - 1).tolist()


def _linear_axis(x, dim, n_out, scale, align_corners):
    import numpy as np

    n_in = x.size(dim)
    dst = np.arange(n_out, dtype=np.float32)
    if align_corners:
        s = np.float32(n_in - 1) / np.float32(n_out - 1) if n_out > 1 else np.float32(0)
        src = dst * s
    else:
        s = _scale_value(scale, n_in, n_out)
        src = np.maximum(s * (dst + np.float32(0.5)) - np.float32(0.5), np.float32(0))
    i0 = src.astype(np.int64)
    i1 = i0 + (i0 < n_in - 1)
    w1 = (src - i0.astype(np.float32)).astype(np.float32)
    shape = [1] * x.dim()
    shape[dim] = n_out
    lam1 = flow.tensor(w1.reshape(shape), dtype=x.dtype, **_on(x))
    lam0 = flow.tensor((np.float32(1) - w1).reshape(shape), dtype=x.dtype, **_on(x))
    x0 = x.index_select(dim, _index(i0.tolist(), x))
    x1 = x.index_select(dim, _index(i1.tolist(), x))
    return x0 * lam0 + x1 * lam1


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """PyTorch's F.interpolate for modes nearest, nearest-exact, linear (3-D), bilinear (4-D)
    and trilinear (5-D); separable index_select and weighted sums."""
    if mode not in _INTERP_MODES and mode not in ("bicubic", "area"):
        raise ValueError(f"interpolate: mode must be one of {', '.join(_INTERP_MODES)}, got {mode!r}")
    if mode in ("bicubic", "area"):
        raise NotImplementedError(f"interpolate: mode={mode!r} is not supported (use nearest, "
                                  "nearest-exact, linear, bilinear or trilinear)")
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported")
    nearest = mode.startswith("nearest")
    if nearest and align_corners is not None:
        raise ValueError("interpolate: align_corners option can only be set with the "
                         "interpolating modes: linear | bilinear | bicubic | trilinear")
    if input.dim() < 3 or input.dim() - 2 not in _INTERP_MODES[mode]:
        wanted = " or ".join(f"{d + 2}-D" for d in _INTERP_MODES[mode])
        raise ValueError(f"interpolate: mode={mode!r} expects a {wanted} input (N, C, ...), got "
                         f"shape {tuple(input.shape)}")
    sizes, scales = _interp_sizes(input, size, scale_factor, recompute_scale_factor)
    # The output's size, checked before the per-axis index lists are built in Python.
    _check_tensor_size("interpolate", tuple(input.shape[:2]) + tuple(sizes), input.dtype)
    x = input
    for i, (n_out, scale) in enumerate(zip(sizes, scales)):
        dim = 2 + i
        n_in = x.size(dim)
        if nearest:
            if n_out == n_in and mode == "nearest":  # PyTorch's kernel copies, whatever the scale
                continue
            idx = _nearest_index(n_in, n_out, scale, mode == "nearest-exact")
            x = x.index_select(dim, _index(idx, x))
        else:
            x = _linear_axis(x, dim, n_out, scale, bool(align_corners))
    return x


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    warnings.warn("nn.functional.upsample is deprecated. Use nn.functional.interpolate instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def _channel_dropout(op, input, p, training, inplace, spatial):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")
    if inplace:
        raise ValueError(f"{op}: inplace=True is not supported")
    if not training or p == 0.0:
        return input
    # One keep/drop draw per (sample, channel), scaled by 1 / (1 - p), broadcast over the rest.
    batched = input.dim() == spatial + 2
    shape = list(input.shape[: (2 if batched else 1)]) + [1] * spatial
    mask = flow._C.dropout(flow.ones(*shape, dtype=input.dtype, **_on(input)), float(p), True)
    return input * mask


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, L) or (C, L) input."""
    _check_dim("dropout1d", input, (2, 3))
    return _channel_dropout("dropout1d", input, p, training, inplace, 1)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, H, W) input; a 3-D input is (N, C, L), as in PyTorch 1.13."""
    if input.dim() not in (3, 4):
        # PyTorch 1.13 (and OneFlow) go on with a warning: one draw per input.shape[:2] entry
        # (per element of a 1-D input), broadcast over the dims after
        if input.dim() == 0 or (input.dim() == 1 and training and 0.0 < p < 1.0):
            raise ValueError(f"dropout2d: feature dropout needs at least 2 dims, got shape "
                             f"{tuple(input.shape)} (only p=0, p=1 or eval mode take it)")
        warnings.warn(
            f"dropout2d: Received a {input.dim()}-D input to dropout2d, which is deprecated and "
            "will result in an error in a future release; expected a 3-D or 4-D input",
            stacklevel=2,
        )
        return _channel_dropout("dropout2d", input, p, training, inplace,
                                builtins.max(input.dim() - 2, 0))
    if input.dim() == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D "
            "dropout behavior is desired - input is interpreted as shape (N, C, L)",
            stacklevel=2,
        )
        return _channel_dropout("dropout2d", input, p, training, inplace, 1)
    return _channel_dropout("dropout2d", input, p, training, inplace, 2)


def one_hot(tensor, num_classes=-1):
    """int64 one-hot rows of class indices; num_classes=-1 uses max(tensor) + 1."""
    if not isinstance(tensor, flow.Tensor):
        raise TypeError(f"one_hot: expected a tensor of class indices, got {type(tensor).__name__}")
    num_classes = _int_arg(num_classes, "one_hot", "num_classes", -1)
    if num_classes >= 0:
        _check_tensor_size("one_hot", tuple(tensor.shape) + (num_classes,), flow.int64)
    return flow._C.one_hot(tensor, num_classes)


def depend(input, depend):
    """OneFlow's control edge: input, to be used only after the ops that made `depend` (a tensor
    or a list of tensors) ran. This build runs eager ops, and nn.Graph replays its plan, in
    program order, so those ops have always run by then: the tensors are checked and input is
    returned as it is (as OneFlow's eager mode does)."""
    deps = list(depend) if isinstance(depend, (list, tuple)) else [depend]
    if not isinstance(input, flow.Tensor):
        raise TypeError(f"depend: expected a Tensor input, got {type(input).__name__}")
    for d in deps:
        if not isinstance(d, flow.Tensor):
            raise TypeError(f"depend: expected a Tensor or a list of Tensors to depend on, got "
                            f"{type(d).__name__}")
    return input
