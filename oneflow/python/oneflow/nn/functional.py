"""oneflow.nn.functional: PyTorch's functional signatures over the binding's flow._C ops.

    import oneflow.nn.functional as F
    y = F.max_pool2d(F.relu(F.conv2d(x, w, padding=1)), 2)
    loss = F.cross_entropy(logits, labels)

Here arguments are checked and normalised (an int or a pair becomes [h, w]); the ops
themselves run in C++.
"""

import math
import warnings

import oneflow as flow
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


def relu(input, inplace=False):
    return flow.relu(input)


def relu6(input, inplace=False):
    return flow._C.relu6(input)


def sigmoid(input):
    return flow.sigmoid(input)


def tanh(input):
    return flow.tanh(input)


def gelu(input, approximate="none"):
    if approximate == "none":
        return flow._C.gelu(input)
    if approximate == "tanh":
        inner = math.sqrt(2.0 / math.pi) * (input + 0.044715 * input * input * input)
        return 0.5 * input * (1.0 + flow.tanh(inner))
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def _softmax_dim(op, ndim):
    # PyTorch's legacy choice when no dim is given.
    warnings.warn(
        f"Implicit dimension choice for {op} has been deprecated. "
        "Change the call to include dim=X as an argument.",
        stacklevel=3,
    )
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, dtype=None):
    if dim is None:
        dim = _softmax_dim("softmax", input.dim())
    if dtype is not None:
        input = input.to(dtype)
    return flow._C.softmax(input, dim)


def log_softmax(input, dim=None, dtype=None):
    if dim is None:
        dim = _softmax_dim("log_softmax", input.dim())
    if dtype is not None:
        input = input.to(dtype)
    return flow._C.log_softmax(input, dim)


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
    if return_indices:
        raise ValueError("max_pool2d: return_indices=True is not supported")
    _check_dim("max_pool2d", input, (4,))
    kernel = _pair("max_pool2d", "kernel_size", kernel_size)
    stride = kernel if _no_stride(stride) else _pair("max_pool2d", "stride", stride)
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
        raise ValueError("avg_pool2d: divisor_override is not supported")
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
    _check_dim("batch_norm", input, (2, 3, 4))
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
    out = flow._C.batch_norm(
        input, running_mean, running_var, weight, bias, bool(training), float(momentum), float(eps)
    )
    return out.reshape(*shape) if len(shape) != 4 else out


def dropout(input, p=0.5, training=True, inplace=False):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout: probability has to be between 0 and 1, but got {p}")
    return flow._C.dropout(input, float(p), bool(training))


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


def nll_loss(
    input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"
):
    reduction = _legacy_reduction("nll_loss", size_average, reduce, reduction)
    _check_reduction("nll_loss", reduction)
    if weight is not None:
        raise ValueError("nll_loss: class weights are not supported")
    return flow._C.nll_loss(input, target, reduction, int(ignore_index))


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
    if weight is not None:
        raise ValueError("cross_entropy: class weights are not supported")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")

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
        loss = -(target * log_softmax(input, 1)).sum(dim=1)
        return _reduce(loss, reduction)

    if label_smoothing == 0:
        return flow._C.cross_entropy(input, target, reduction, int(ignore_index))

    # PyTorch's smoothing: (1 - e) * nll + e * mean over classes of -log p, over kept targets.
    log_probs = log_softmax(input, 1)
    nll = flow._C.nll_loss(log_probs, target, reduction, int(ignore_index))
    keep = (target != ignore_index).to(log_probs.dtype)
    smooth = -log_probs.sum(dim=1) / input.size(1) * keep
    if reduction == "none":
        smooth_loss = smooth
    elif reduction == "sum":
        smooth_loss = smooth.sum()
    else:
        smooth_loss = smooth.sum() / keep.sum()
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


def one_hot(tensor, num_classes=-1):
    """int64 one-hot rows of class indices; num_classes=-1 uses max(tensor) + 1."""
    if not isinstance(tensor, flow.Tensor):
        raise TypeError(f"one_hot: expected a tensor of class indices, got {type(tensor).__name__}")
    return flow._C.one_hot(tensor, int(num_classes))
